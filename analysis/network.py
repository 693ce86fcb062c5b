"""Network: bytes per step beside the model size, and the bandwidth bound of communication.

The bound is the fewest bytes a node must send per step, averaged over the nodes, given where
the roles are placed (bound_bytes); bound seconds = those bytes / link bandwidth; efficiency =
bound / measured communication time (1 = the link is the only cost). A node that sent fewer
bytes than the bound is a measurement error (analysis/consistency.py, bytes_vs_bound)."""
import math

import pandas as pd

import registry

BYTES_PER_PARAMETER = 4  # float32
# the package's assumption (the paper states no link: paper.yml, setup `link`); used when
# the run does not record its link rate
ASSUMED_MBIT = 1000


def bound_bytes(system, parameters, nodes, manifest=None):
    """Bytes per node and step that must cross the network, for the registry's placement
    (every role on every node; harness/plan/layout.py).

    Ring all-reduce: every node sends 2(n-1)/n of the model. Parameter servers: each worker
    pushes its gradients to, and pulls its weights from, the servers: 2 x model, of which the
    share held by the server on its own node never leaves it. With k workers beside a server on
    each of n nodes, server i holding a share p_i of the model, the nodes send
    2 x model x k x sum(1 - p_i) = 2 x model x k x (n - 1) in all, however the keys are spread
    over the servers: 2k(n-1)/n x model per node."""
    model = parameters * BYTES_PER_PARAMETER
    entry = registry.system(system, manifest)
    if entry["communication"] == "all-reduce":
        return 2.0 * (nodes - 1) / nodes * model
    per_node = entry["roles"]
    workers = per_node.count("worker")
    if len(set(per_node) - {"worker"}) == 0:  # no server beside the workers
        return 2.0 * workers * model
    return 2.0 * workers * (nodes - 1) / nodes * model


def link_mbit(manifest):
    """(rate, where it came from): the run's recorded link rate, else 1 Gbit/s, the package's
    assumption (the paper does not state its link: paper.yml, setup `link`)."""
    rate = (manifest.get("network") or {}).get("rate_mbit")
    if rate:
        return float(rate), "recorded for the run"
    return float(ASSUMED_MBIT), "assumed (the package's assumption: the paper does not " \
        "state its link)"


def rate_sentence(cells, manifest):
    """What the report says of the link rates: the cells' recorded settings, the run's, or
    the assumed rate, as the records have them."""
    recorded = sorted({float(r) for r in cells.link_mbit.dropna() if r}) \
        if "link_mbit" in cells else []
    rate, source = link_mbit(manifest)
    unset = int(cells.link_mbit.isna().sum()) if "link_mbit" in cells else len(cells)
    if recorded and not unset:
        return "Link rate: recorded per cell (%s Mbit/s)." % ", ".join("%g" % r for r in recorded)
    if recorded:
        return ("Link rate: recorded per cell (%s Mbit/s); %d cell(s) without a setting: "
                "%.0f Mbit/s, %s." % (", ".join("%g" % r for r in recorded), unset, rate, source))
    return "Link rate: %.0f Mbit/s, %s." % (rate, source)


def bound_label(cells, manifest):
    """The bound's legend: at which rate, and "assumed" where no cell and not the run
    recorded one (the paper states no link)."""
    unset = int(cells.link_mbit.isna().sum()) if "link_mbit" in cells else len(cells)
    if not unset:
        return "bandwidth bound at each cell's recorded rate"
    rate, source = link_mbit(manifest)
    return "bandwidth bound at %g Mbit/s (%s)" % (
        rate, "assumed: the paper states no link" if source.startswith("assumed")
        else "recorded for the run")


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
