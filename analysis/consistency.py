"""Internal consistency checks, run in every analysis and shown in the report: a check that
fails is a warning with its figures, never a silent pass.

  fig3_vs_breakdown     Fig. 3's bar (paper-scale execution) = the breakdown's parts added up
  wall_vs_timers        the steady wall step against the phase timers' mean step
  wall_vs_closures      where a coordinator times the steps (tensorflow-async): the chief's
                        wall step per worker against a worker's own closure, which it cannot
                        undercut (each worker runs its closures one after another); the gap
                        is the coordinator's dispatch and has no upper limit
  forward_vs_profile    profiled forward operator time against the calibrated forward
  backward_vs_profile   profiled backward + update operator time against the calibrated one
  operators_per_worker  a worker's compute operators per step cannot exceed its profiled step
  bytes_vs_bound        the bytes a node sent per step cannot be fewer than the placement of
                        the roles requires (analysis/network.py bound_bytes)
  memory_vs_slurm       Slurm's MaxRSS of a role's job step (sacct) cannot lie far above the
                        sampler's peak: both sample, and a sampled maximum never exceeds the
                        true one, so Slurm seeing more means the sampler missed memory (a
                        slower Slurm sampling may see less: no lower limit)
"""
import math

import pandas as pd

import registry

from . import operators, testbed, tidy

COLUMNS = ["check", "benchmark", "system", "value", "against", "ratio", "accepted", "ok",
           "not_applicable"]
# checks that cannot fail on a setup: shown, not counted in the tally, with why
IDENTITY = ("holds by construction: communication is what the execution time leaves after "
            "start-up, loading, forward and backward (IV-C's definition, start-up also taken "
            "out: the package's)")
LOOPBACK = ("cannot fail on loopback: every node sends on the one `lo`, whose counters are the "
            "whole cluster's bytes, never fewer than one node's bound")
# accepted ratios (value / against)
LIMITS = {"fig3_vs_breakdown": (0.999, 1.001), "wall_vs_timers": (0.85, 1.15),
          "wall_vs_closures": (0.85, math.inf),
          # profiled steps run beside the other workers, the calibration alone where nodes
          # may share cores (in turn), and
          # operator self times leave out dispatch between operators (methodology.md)
          "forward_vs_profile": (0.5, 2.0), "backward_vs_profile": (0.5, 2.0),
          "operators_per_worker": (0.0, 1.05),
          # counters may miss a little (a step's tail after the last read): 2%
          "bytes_vs_bound": (0.98, math.inf),
          # the step's own shells (setsid, bash: about 7 MB) count in Slurm's figure
          "memory_vs_slurm": (0.0, 1.10)}


def run_all(records, groups, table, manifest=None, net=None):
    """table: operators.category_table of the run (empty without profiled steps); net:
    network.table of the run."""
    rows = fig3_vs_breakdown(groups) + wall_vs_timers(groups, manifest)
    if not table.empty:
        rows += profile_vs_calibration(table, groups) + operators_per_worker(table, records)
    if net is not None:
        rows += bytes_vs_bound(net)
    rows += memory_vs_slurm(records)
    loopback = bool(manifest) and testbed.describe(manifest)["link"]["kind"] == "loopback"
    for row in rows:
        row["not_applicable"] = IDENTITY if row["check"] == "fig3_vs_breakdown" else \
            LOOPBACK if row["check"] == "bytes_vs_bound" and loopback else ""
    return pd.DataFrame(rows, columns=COLUMNS)


def bytes_vs_bound(net):
    """Megabytes a node sent per step against the bound (network.bound_bytes)."""
    return [check("bytes_vs_bound", r.benchmark, r.system, r.bytes_sent_per_step_mb,
                  r.bound_mb_per_step) for r in net.itertuples()
            if r.bytes_sent_per_step_mb == r.bytes_sent_per_step_mb and r.bound_mb_per_step > 0]


def memory_vs_slurm(records):
    """Per benchmark and system-mode, the process whose Slurm MaxRSS lies furthest above its
    sampled peak (records of runs through Slurm with accounting; none otherwise)."""
    if "slurm_step" not in records:
        return []
    keys = ["benchmark", "system", "cell_id", "node", "role", "rank"]
    slurm = records[records.metric == "slurm_max_rss_mb"][keys + ["value"]]
    peak = records[records.metric == "peak_rss_mb"][keys + ["value"]]
    both = slurm.merge(peak, on=keys, suffixes=("_slurm", "_peak"))
    both = both[both.value_peak > 0]
    out = []
    for (benchmark, system), rows in both.groupby(["benchmark", "system"]):
        worst = rows.loc[(rows.value_slurm / rows.value_peak).idxmax()]
        out.append(check("memory_vs_slurm", benchmark, system, worst.value_slurm,
                         worst.value_peak))
    return out


def check(name, benchmark, system, value, against):
    low, high = LIMITS[name]
    ratio = value / against if against else math.nan
    return {"check": name, "benchmark": benchmark, "system": system, "value": value,
            "against": against, "ratio": ratio,
            "accepted": ">= %g" % low if high == math.inf else "%g - %g" % (low, high),
            "ok": bool(low <= ratio <= high)}


def _measured(groups):
    return groups[(groups.succeeded > 0) & groups.execution_seconds.notna()]


def fig3_vs_breakdown(groups):
    out = []
    for g in _measured(groups).itertuples():
        parts = sum(getattr(g, p + "_total") for p in tidy.TOTALS)
        out.append(check("fig3_vs_breakdown", g.benchmark, g.system, parts,
                         g.execution_seconds))
    return out


def wall_vs_timers(groups, manifest=None):
    """The loop's wall time per step against its timed steps' mean: what the timers miss
    between steps (the loop's own bookkeeping). Where the coordinator times the workers'
    steps (registry `timed_by`, tensorflow-async) its wall step is the coordinator's
    dispatch rate x workers: the check is wall_vs_closures, with no upper limit, as the gap
    is dispatch, which its breakdown counts as communication."""
    out = []
    for g in _measured(groups).itertuples():
        if g.step == g.step and g.wall_step == g.wall_step:
            name = "wall_vs_closures" if coordinator_timed(g.system, manifest) \
                else "wall_vs_timers"
            out.append(check(name, g.benchmark, g.system, g.wall_step, g.step))
    return out


def coordinator_timed(system, manifest=None):
    return registry.systems(manifest).get(system, {}).get("timed_by") == "coordinator"


def profile_vs_calibration(table, groups):
    out = []
    calibrated = groups.set_index(["benchmark", "system"])
    for (benchmark, system), rows in table.groupby(["benchmark", "system"]):
        if (benchmark, system) not in calibrated.index:
            continue
        here = calibrated.loc[(benchmark, system)]
        here = here.iloc[0] if isinstance(here, pd.DataFrame) else here
        compute = rows[~rows.category.isin(operators.NOT_COMPUTE)]
        backward = compute.category.str.endswith("_backward") | (
            compute.category == "weights_update")
        for name, value, against in (
                ("forward_vs_profile", compute[~backward].seconds.sum(), here.forward),
                ("backward_vs_profile", compute[backward].seconds.sum(), here.backward)):
            if against == against and against > 0:
                out.append(check(name, benchmark, system, value, against))
    return out


def operators_per_worker(table, records):
    steps = records[(records.metric == "profiled_step") &
                    records.role.isin(["worker", "chief"])]
    profiled = steps.groupby(["benchmark", "system"]).value.mean()
    out = []
    compute = table[~table.category.isin(operators.NOT_COMPUTE)]
    for (benchmark, system), rows in compute.groupby(["benchmark", "system"]):
        if (benchmark, system) in profiled.index:
            out.append(check("operators_per_worker", benchmark, system, rows.seconds.sum(),
                             profiled[(benchmark, system)]))
    return out
