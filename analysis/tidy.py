"""records.jsonl -> pandas tables: one row per record, one per cell, one per (benchmark,
system-mode) over its repeats."""
import json
import math

import numpy as np
import pandas as pd

from contract import paper, records as schema

from . import stats

PAPER = paper.TABLE_IV
PAPER_EPOCHS, PAPER_STEPS_PER_EPOCH = paper.EPOCHS, paper.STEPS_PER_EPOCH  # per worker
PAPER_STEPS = paper.STEPS
TIMES = ["execution_seconds", "startup", "wall_step", "loop_seconds", "measured_seconds"]
PHASES = list(schema.PHASES)  # the paper's breakdown (contract/records.py)
CELL_KEYS = ["cell_id", "benchmark", "system", "repeat"]
TOTALS = ["startup"] + PHASES  # the breakdown's parts over the paper's run
CV_LIMIT = 0.05  # a group whose execution time varies more than this is flagged
TOTAL_OF = {"execution": "execution_seconds", "communication": "communication_total"}
# what else ran on a node while a cell did (bench/common/interference.py), shares of 0..1
INTERFERENCE = list(schema.INTERFERENCE)
LEFT_OUT = "disturbed in both attempts, left out"  # scaling.csv's note on such a node count


def load_records(path):
    with open(path) as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    if not rows:
        raise ValueError("%s holds no records" % path)
    return pd.DataFrame(rows)


def cell_table(records, paper_steps=PAPER_STEPS):
    """Per cell: status and reason; the paper-scale execution time (start-up + steady step x
    the paper's remaining steps, or the measurement where the run made the paper's steps) with
    its bootstrap replicates; the measured loop and start-up beside it; per-step phase means
    over workers and their totals at the paper's length; peak RSS = the largest process."""
    per_process = records[records.metric != "status"]
    table = _status_table(records[records.metric == "status"].set_index("cell_id"))
    if not per_process.empty:
        _fill_measured(table, per_process, paper_steps)
    table["stop"] = _stops(per_process, table.index)
    return _paper_totals(table, paper_steps).reset_index()


def _status_table(status):
    """The cells' status rows, with every measured column empty (NaN) until filled."""
    for optional in ("link", "link_mbit", "warning", "disturbed"):  # absent from older runs
        if optional not in status:
            status = status.assign(**{optional: None})
    if "local_batch" not in status:
        status = status.assign(local_batch=PAPER["local_batch"])
    if "order" not in status:  # older runs: their order is not known
        status = status.assign(order=math.nan)
    table = status[["benchmark", "system", "repeat", "status", "reason", "warning", "disturbed",
                    "epochs", "steps_per_epoch", "nodes", "link", "link_mbit",
                    "local_batch", "order"]].copy()
    table["link"] = table.link.fillna("")
    table["warning"] = table.warning.fillna("")
    table["disturbed"] = table.disturbed.fillna("")
    table["total_steps"] = table.epochs * table.steps_per_epoch
    for column in ["step"] + PHASES + ["peak_rss_mb", "worker_peak_rss_mb", "parameters"] + \
            TIMES + INTERFERENCE:
        table[column] = math.nan
    table["workers"] = 0
    table["truncated"] = 0
    table["outliers"] = 0
    table["median_step"] = math.nan
    table["projected"] = True
    table["execution_boot"] = None
    return table


def _fill_measured(table, per_process, paper_steps):
    """The per-process records into the table: phase means, the slowest process's times,
    memory, interference, and each cell's projection to the paper's length."""
    wide = per_process.pivot_table(index="cell_id", columns="metric", values="value",
                                   aggfunc="mean")
    for column in ["step"] + PHASES + ["parameters"]:
        if column in wide:
            table[column] = wide[column]
    table["loop_seconds"] = _by_cell(per_process, "train_seconds", "max")
    table["measured_seconds"] = _by_cell(per_process, "execution_seconds", "max")
    table["peak_rss_mb"] = _by_cell(per_process, "peak_rss_mb", "max")
    # the memory claims (section V-G) are about what a worker process holds, its data and
    # model: its own RSS, without its forked loaders (which count the pages they share
    # with it again); runs from before it was recorded fall back to the sum
    workers = per_process[per_process.role == "worker"]
    own = "peak_own_rss_mb" if (workers.metric == "peak_own_rss_mb").any() else "peak_rss_mb"
    table["worker_peak_rss_mb"] = _by_cell(workers, own, "max")
    for column in INTERFERENCE:  # the worst node's, over the cell's processes
        table[column] = _by_cell(per_process, column, "max")
    table["workers"] = per_process[per_process.metric == "step"].groupby(
        "cell_id").size().reindex(table.index).fillna(0).astype(int)
    for cell_id, rows in per_process.groupby("cell_id"):
        found = projection(rows, table.total_steps.get(cell_id), paper_steps)
        for key, value in found.items():
            table.at[cell_id, key] = value


def _stops(records, cells):
    """The verdict size's stop per cell: "+-h% (precision | ceiling)", h the widest
    process's 95% half-width of its later epochs' mean step; "" for fixed-length cells. At the
    ceiling it names that process and how much its later steps vary (their CV), the reason
    the interval stayed wide."""
    if "stopped_by" not in records:
        return pd.Series("", index=cells)
    stops = records[records.metric == "stop_halfwidth"]
    out = {}
    for cell_id, rows in stops.groupby("cell_id"):
        worst = rows.value.max()
        why = "ceiling" if (rows.stopped_by == "ceiling").any() else "precision"
        if worst != worst:
            out[cell_id] = "no interval (%s)" % why
            continue
        if why == "ceiling":
            why += _noisiest(records[records.cell_id == cell_id], rows.loc[rows.value.idxmax()])
        out[cell_id] = "+-%.1f%% (%s)" % (100 * worst, why)
    return pd.Series(out, dtype=object).reindex(cells).fillna("")


def _noisiest(records, widest):
    """": node2/worker-1's later steps vary by 31% (CV)" for the process with the widest
    interval; "" where its samples are not in the records."""
    same = records[(records.node == widest.node) & (records.role == widest.role)
                   & (records["rank"] == widest["rank"])]
    samples, epochs = _samples(same)
    later = [s for s, e in zip(samples, epochs or []) if e >= 1]
    if len(later) < 2:
        return ""
    return ": %s/%s-%s's later steps vary by %.0f%% (CV)" % (
        widest.node, widest.role, int(widest["rank"]), 100 * np.std(later) / np.mean(later))


def projection(rows, run_steps, paper_steps=PAPER_STEPS):
    """One cell's paper-scale execution time from its processes' records: per process that
    timed steps (workers; the tensorflow-async chief), start-up + wall step x (paper_steps -
    1) (the first step is inside start-up); the cell's is its slowest process's. Replicates:
    the wall step scaled by block-bootstrap means of the process's measured steps."""
    best = None
    boots = []
    for key, proc in rows.groupby(["node", "role", "rank"], dropna=False):
        values = dict(zip(proc.metric, proc.value))
        if "wall_step" not in values or "startup_seconds" not in values:
            continue
        steady, steady_boot, kept = _steady(proc, key, values["wall_step"], paper_steps)
        point = values["startup_seconds"] + steady
        boots.append(values["startup_seconds"] + steady_boot)
        if best is None or point > best["execution_seconds"]:
            slowest = len(boots) - 1
            best = dict(kept, execution_seconds=point, startup=values["startup_seconds"],
                        wall_step=values["wall_step"])
    if best is None:
        return {}
    # the slowest process is the one with the largest point estimate, and its replicates are
    # the cell's: a maximum over processes taken replicate by replicate is biased upward
    best["execution_boot"] = boots[slowest]
    if run_steps is not None and run_steps >= paper_steps:  # measured, not projected
        measured = rows[rows.metric == "execution_seconds"].value.max()
        best.update(execution_seconds=measured, projected=False,
                    execution_boot=stats.constant(measured))
    return best


def _steady(proc, key, wall_step, paper_steps):
    """The paper's steps after the first, in seconds, its replicates, and what was cut:
    each part of them at the rate of its measured steps (their mean scaled to the loop's wall
    step, with a block bootstrap). One part, every step at the wall step; a run that timed
    later epochs (the verdict size) has two: the first epoch's remaining steps at the first
    epoch's rate (uncached input) and the 9 later epochs at the later epochs' (TensorFlow
    reads its cache). The measured steps are cleaned first (cleaned(): a warm-up found in the
    data, outliers)."""
    raw, epochs = _samples(proc)
    if not raw:
        return wall_step * (paper_steps - 1), stats.constant(wall_step * (paper_steps - 1)), {}
    scale = wall_step / np.mean(raw)  # sample means -> the loop's wall per step
    samples, epochs, kept = cleaned(raw, epochs)
    parts = [(samples, paper_steps - 1)]
    if epochs is not None and paper_steps == PAPER_STEPS:
        first = [s for s, e in zip(samples, epochs) if e == 0]
        later = [s for s, e in zip(samples, epochs) if e >= 1]
        if first and later:
            parts = [(first, PAPER_STEPS_PER_EPOCH - 1),
                     (later, (PAPER_EPOCHS - 1) * PAPER_STEPS_PER_EPOCH)]
    rng = stats.rng_for("/".join(map(str, key)) + str(proc.cell_id.iloc[0]))
    steady = sum(scale * np.mean(part) * steps for part, steps in parts)
    boot = sum(scale * stats.bootstrap_means(part, rng) * steps for part, steps in parts)
    kept["median_step"] = scale * float(np.median(samples))
    return steady, boot, kept


# A measured step longer than this many times the process's median step is an outlier: left
# out of the mean, and counted in the execution table. A hiccup that long in a dozen steps
# weighs far more than it would in the paper's 3,960 (one interval of 0.217 s among a median
# of 0.029 s once moved a cell by 28%).
OUTLIER_FACTOR = 5.0
MSER_BATCH = 5


def cleaned(samples, epochs):
    """(samples, epochs, {"truncated": n, "outliers": k}): the outliers left out (against
    the median of their epoch's measured steps: an uncached first epoch is slower as a
    whole), then the first epoch's (or the run's) initial transient cut by MSER-5."""
    samples = list(samples)
    tags = list(epochs) if epochs is not None else [0] * len(samples)
    medians = {e: float(np.median([x for x, t in zip(samples, tags) if t == e]))
               for e in set(tags)}
    calm = [i for i, x in enumerate(samples) if x <= OUTLIER_FACTOR * medians[tags[i]]]
    first = [i for i in calm if epochs is None or epochs[i] == 0]
    cut = set(first[:mser_cut([samples[i] for i in first])])
    keep = [i for i in calm if i not in cut]
    return ([samples[i] for i in keep], [epochs[i] for i in keep] if epochs is not None
            else None, {"truncated": len(cut), "outliers": len(samples) - len(calm)})


def mser_cut(series, batch=MSER_BATCH):
    """How many leading steps are a warm-up, by MSER-5 (White, 1997): over batch means of 5
    steps, the truncation d (at most half the batches) that minimises the squared standard
    error of the mean of what remains, sum((m - mean)^2) / (n - d)^2. Fewer than 3 batches
    (15 steps): nothing to find."""
    batches = len(series) // batch
    if batches < 3:  # the verdict size's first epoch: 15 measured steps, 3 batches
        return 0
    means = np.asarray(series[:batches * batch], dtype=float).reshape(batches, batch).mean(1)
    scores = [np.sum((means[d:] - means[d:].mean()) ** 2) / (batches - d) ** 2
              for d in range(batches // 2 + 1)]
    return int(np.argmin(scores)) * batch


def _samples(proc):
    """(measured step times, their epochs or None) of one process's records."""
    found = proc[proc.metric == "step_samples"]
    if not len(found) or "samples" not in found:
        return [], None
    samples = found.samples.iloc[0]
    epochs = found.sample_epochs.iloc[0] if "sample_epochs" in found else None
    ok = isinstance(samples, (list, tuple, np.ndarray))
    epochs = epochs if isinstance(epochs, (list, tuple, np.ndarray)) else None
    return (list(samples) if ok else []), epochs


def _paper_totals(table, paper_steps):
    """Each phase over the paper's run: start-up once, loading / forward / backward at their
    per-step means x the remaining steps, communication the rest of the execution time, so
    the breakdown's bars add up to Fig. 3's."""
    steady = paper_steps - 1
    table["startup_total"] = table.startup
    for phase in PHASES[:-1]:
        table[phase + "_total"] = table[phase] * steady
    table["communication_total"] = table.execution_seconds - table.startup - steady * (
        table.loading + table.forward + table.backward)
    table["communication_boot"] = [
        None if b is None else b - s - steady * (lo + f + bw) for b, s, lo, f, bw in zip(
            table.execution_boot, table.startup, table.loading, table.forward, table.backward)]
    return table


def _by_cell(records, metric, how):
    return records[records.metric == metric].groupby("cell_id").value.agg(how)


def group_table(cells, variation=None):
    """Per (benchmark, system, link, nodes): repeats run and succeeded; the mean paper-scale
    execution time with the 95% confidence interval of its expectation (pooled over the
    benchmark's settings: expected()), the prediction of one more run beside it
    (execution_pred), and the coefficient of variation over repeats (flagged when CV > 5%);
    phase means. variation: {benchmark: {s, df, source}}, run-to-run variation measured
    elsewhere (analysis/variation.py) for settings of one repeat in a pool without any."""
    rows = []
    for (benchmark, system, link, nodes), group in cells.groupby(
            ["benchmark", "system", "link", "nodes"], sort=False):
        # a cell disturbed twice (harness/run/disturbance.py) is shown, not used
        ok = group[(group.status == "succeeded") & group.execution_seconds.notna()
                   & (group.disturbed == "")]
        row = {"benchmark": benchmark, "system": system, "link": link, "nodes": nodes,
               "link_mbit": group.link_mbit.max(), "repeats": len(group),
               "local_batch": group.local_batch.max(),
               "succeeded": int(((group.status == "succeeded")
                                 & (group.disturbed == "")).sum()),
               "disturbed": int((group.disturbed != "").sum()),
               "status": _group_status(group),
               "projected": bool(ok.projected.all()) if len(ok) else True}
        row.update(_spread(ok.execution_seconds))
        rng = stats.rng_for("%s/%s/%s/%s" % (benchmark, system, link, nodes))
        for name, one_more in (("execution", True), ("communication", False)):
            kept = [(b, v) for b, v in zip(ok[name + "_boot"], ok[TOTAL_OF[name]])
                    if b is not None]
            row[name + "_boot"] = stats.over_repeats(
                [b for b, _ in kept], rng, [v for _, v in kept], one_more) if kept else None
        row["execution_pred"] = row["execution_boot"]  # replaced by expected() where it can
        row["interval"] = "steps of one run" if row["execution_boot"] is not None else ""
        row["repeat_values"] = list(ok.execution_seconds)
        row["interval_df"] = 0
        for column in ["step"] + PHASES + ["startup"] + [p + "_total" for p in TOTALS] + [
                "loop_seconds", "measured_seconds", "wall_step", "peak_rss_mb",
                "worker_peak_rss_mb", "parameters"]:
            row[column] = ok[column].mean() if len(ok) else math.nan
        for column in INTERFERENCE:  # the worst over every repeat, the disturbed included
            row[column] = group[column].max()
        row["median_step"] = ok.median_step.mean() if len(ok) else math.nan
        row["truncated"], row["outliers"] = int(ok.truncated.sum()), int(ok.outliers.sum())
        row["stop"] = "; ".join(x for x in ok.stop if x) if "stop" in ok else ""
        rows.append(row)
    table = pd.DataFrame(rows)
    if len(table):
        expected(table, cells, variation or {})
    return table


def expected(groups, cells, variation):
    """Each group's execution_boot becomes the confidence interval of its expected time, its
    run-to-run variation pooled over the groups of one benchmark, link and node count
    (stats.expected_time, one-way); where the pool has
    no degree of freedom (one repeat each), from `variation` if it names the benchmark, else
    the steps of one run stay (the report says run-to-run variation was not measured)."""
    for key, pool in groups.groupby(["benchmark", "link", "nodes"], sort=False):
        usable = pool[pool.repeat_values.map(len) > 0]
        values = dict(zip(usable.system, usable.repeat_values))
        # one-way: pairing by block was measured not to help (docs/methodology.md)
        found, model = stats.expected_time(values, "/".join(map(str, key)),
                                           within=_within(cells, key))
        for index, row in usable.iterrows():
            if found is not None:
                groups.at[index, "execution_boot"] = found[row.system]
                groups.at[index, "interval"] = "%s, s %.1f%%%s, %d df" % (
                    model["model"], 100 * model["s"],
                    " (one run's steps)" if model.get("floor") else "", model["df"])
                groups.at[index, "interval_df"] = model["df"]
            elif key[0] in variation and len(row.repeat_values) == 1:
                known = variation[key[0]]
                groups.at[index, "execution_boot"] = stats.single_run(
                    row.repeat_values[0], "%s/%s" % ("/".join(map(str, key)), row.system),
                    known["s"], known["df"])
                groups.at[index, "interval"] = "variation from %s" % known["source"]
                groups.at[index, "interval_df"] = known["df"]
    bounds = [stats.interval(b) if b is not None else (math.nan, math.nan)
              for b in groups.execution_boot]
    groups["ci_low"], groups["ci_high"] = [b[0] for b in bounds], [b[1] for b in bounds]
    # the prediction of one more run, where repeats give one (as the execution table shows it)
    predicted = [stats.interval(p) if ok >= 2 and p is not None else (math.nan, math.nan)
                 for p, ok in zip(groups.execution_pred, groups.succeeded)]
    groups["pred_low"], groups["pred_high"] = [p[0] for p in predicted], [p[1] for p in predicted]


def _within(cells, key):
    """The median over a pool's usable cells of the log sd of each one's step-bootstrap
    replicates: the spread one run's own steps leave."""
    ok = cells[(cells.benchmark == key[0]) & (cells.link == key[1]) & (cells.nodes == key[2])
               & (cells.status == "succeeded") & (cells.disturbed == "")]
    spreads = [float(np.std(np.log(b))) for b in ok.execution_boot
               if b is not None and np.all(np.asarray(b) > 0)]
    return float(np.median(spreads)) if spreads else 0.0


def ran_in_blocks(cells):
    """Whether every repeat's cells ran before any of the next repeat's (the status records'
    `order`, the cell's place in the planned run): randomized complete blocks, which `invoke
    interval-check` needs to ask whether pairing by block would help."""
    if "order" not in cells or cells.order.isna().any() or cells.repeat.nunique() < 2:
        return False
    spans = cells.groupby("repeat").order.agg(["min", "max"]).sort_index()
    return bool((spans["max"].values[:-1] < spans["min"].values[1:]).all())


def _group_status(group):
    states = sorted(set(group.status))
    return states[0] if len(states) == 1 else "mixed: " + ", ".join(states)


def _spread(values):
    """Mean and coefficient of variation over repeats."""
    values = values.dropna()
    n = len(values)
    mean = values.mean() if n else math.nan
    if n < 2:
        return {"execution_seconds": mean, "cv": math.nan, "unstable": False}
    cv = values.std(ddof=1) / mean if mean else math.nan
    return {"execution_seconds": mean, "cv": cv, "unstable": bool(cv > CV_LIMIT)}


def reference_groups(groups):
    """The groups the paper's figures and claims use: unshaped or 1 Gbit/s links (the
    package's assumption: the paper states no link), else the first link setting of the run."""
    if groups.empty:
        return groups
    groups = groups[groups.nodes == groups.nodes.max()]  # the paper ran on all its nodes
    paper = groups[groups.link.isin(["", "1gbit"])]
    return paper if not paper.empty else groups[groups.link == groups.link.iloc[0]]


def scaling_table(groups):
    """Per benchmark, system-mode and link: throughput (images/s over all workers, each with
    its cells' local batch) at each node count, speedup over one node, and scaling efficiency
    = speedup / nodes."""
    # a node count whose cells were all disturbed stays as a row that says so: a sweep with
    # a missing point would look complete
    left_out = groups.disturbed if "disturbed" in groups else 0
    ok = groups[((groups.succeeded > 0) & groups.step.notna()) | (left_out > 0)].copy()
    ok["images_per_s"] = ok.nodes * ok.local_batch / ok.step.where(ok.succeeded > 0)
    rows = []
    for key, group in ok.groupby(["benchmark", "system", "link"], sort=False):
        single = group[group.nodes == 1].images_per_s
        base = single.iloc[0] if len(single) else math.nan
        for r in group.sort_values("nodes").itertuples():
            speedup = r.images_per_s / base
            rows.append({"benchmark": key[0], "system": key[1], "link": key[2],
                         "nodes": r.nodes, "images_per_s": r.images_per_s,
                         "speedup": speedup, "efficiency": speedup / r.nodes,
                         "note": "" if r.succeeded > 0 else LEFT_OUT})
    return pd.DataFrame(rows, columns=["benchmark", "system", "link", "nodes", "images_per_s",
                                       "speedup", "efficiency", "note"])
