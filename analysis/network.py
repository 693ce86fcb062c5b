"""Network: bytes per step beside the model size, and the bandwidth bound of communication.

Per worker and step, ring all-reduce sends 2(n-1)/n of the model; a parameter-server exchange
pushes the gradients and pulls the weights: twice the model (which a system-mode does:
registry/systems.yml, `communication`). bound = those bytes / link bandwidth; efficiency = bound / measured
communication time (1 = the link is the only cost)."""
import math

import pandas as pd

import registry

BYTES_PER_PARAMETER = 4  # float32
ASSUMED_MBIT = 1000  # the paper's cluster; used when the run does not record its link rate


def bound_bytes(system, parameters, nodes, manifest=None):
    model = parameters * BYTES_PER_PARAMETER
    if registry.system(system, manifest)["communication"] == "all-reduce":
        return 2.0 * (nodes - 1) / nodes * model
    return 2.0 * model


def link_mbit(manifest):
    """(rate, where it came from): the run's recorded link rate, else the paper's 1 Gbit/s."""
    rate = (manifest.get("network") or {}).get("rate_mbit")
    if rate:
        return float(rate), "recorded for the run"
    return float(ASSUMED_MBIT), "assumed (the paper's 1 Gbit/s; the run recorded no link rate)"


def table(groups, records, cells, manifest):
    default_rate, _ = link_mbit(manifest)
    keys = ["benchmark", "system", "link"]
    sent = records[records.metric == "net_bytes_sent_per_step"][["cell_id", "value"]].merge(
        cells[["cell_id"] + keys], on="cell_id")
    sent_mean = sent.groupby(keys).value.mean()
    nodes = cells.groupby(keys).nodes.max()
    rows = []
    for r in groups.itertuples():
        key = (r.benchmark, r.system, r.link)
        rate = r.link_mbit if r.link_mbit == r.link_mbit and r.link_mbit else default_rate
        n = int(nodes.get(key, 3))
        params = r.parameters if r.parameters == r.parameters else math.nan
        needed = bound_bytes(r.system, params, n, manifest)
        bound = needed / (rate * 1e6 / 8)
        comm = r.communication
        rows.append({"benchmark": r.benchmark, "system": r.system, "link": r.link,
                     "link_mbit": rate, "nodes": n,
                     "model_mb": params * BYTES_PER_PARAMETER / 1e6,
                     "bytes_sent_per_step_mb": sent_mean.get(key, math.nan) / 1e6,
                     "bound_mb_per_step": needed / 1e6, "bound_seconds": bound,
                     "communication": comm,
                     "efficiency": bound / comm if comm and comm > 0 else math.nan})
    return pd.DataFrame(rows)
