"""records.jsonl -> pandas tables: one row per record, one per cell, one per (benchmark,
system-mode) over its repeats."""
import json
import math

import pandas as pd

PHASES = ["loading", "forward", "backward", "communication"]
CELL_KEYS = ["cell_id", "benchmark", "system", "repeat"]
CV_LIMIT = 0.05  # a group whose execution time varies more than this is flagged
# two-sided 95% Student t quantiles by degrees of freedom (no scipy on the controller)
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
       9: 2.262, 10: 2.228, 15: 2.131, 20: 2.086, 30: 2.042}


def load_records(path):
    with open(path) as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    if not rows:
        raise ValueError("%s holds no records" % path)
    return pd.DataFrame(rows)


def cell_table(records):
    """Per cell: status and reason; execution time = slowest worker's training time;
    per-step phase means averaged over workers; totals = per-step mean x planned steps;
    peak RSS = the largest process."""
    status = records[records.metric == "status"].set_index("cell_id")
    per_process = records[records.metric != "status"]
    for optional in ("link", "link_mbit"):  # absent from runs without link settings
        if optional not in status:
            status = status.assign(**{optional: None})
    table = status[["benchmark", "system", "repeat", "status", "reason", "epochs",
                    "steps_per_epoch", "nodes", "link", "link_mbit"]].copy()
    table["link"] = table.link.fillna("")
    table["total_steps"] = table.epochs * table.steps_per_epoch
    for column in ["step"] + PHASES + ["execution_seconds", "peak_rss_mb", "parameters"]:
        table[column] = math.nan
    table["workers"] = 0
    if not per_process.empty:
        wide = per_process.pivot_table(index="cell_id", columns="metric", values="value",
                                       aggfunc="mean")
        for column in ["step"] + PHASES + ["parameters"]:
            if column in wide:
                table[column] = wide[column]
        table["execution_seconds"] = _by_cell(per_process, "train_seconds", "max")
        table["peak_rss_mb"] = _by_cell(per_process, "peak_rss_mb", "max")
        table["workers"] = per_process[per_process.metric == "step"].groupby(
            "cell_id").size().reindex(table.index).fillna(0).astype(int)
    for phase in PHASES:
        table[phase + "_total"] = table[phase] * table.total_steps
    return table.reset_index()


def _by_cell(records, metric, how):
    return records[records.metric == metric].groupby("cell_id").value.agg(how)


def group_table(cells):
    """Per (benchmark, system): repeats run and succeeded, mean execution time with its 95%
    confidence interval and coefficient of variation, phase means; flagged when CV > 5%."""
    rows = []
    for (benchmark, system, link, nodes), group in cells.groupby(
            ["benchmark", "system", "link", "nodes"], sort=False):
        ok = group[group.status == "succeeded"]
        row = {"benchmark": benchmark, "system": system, "link": link, "nodes": nodes,
               "link_mbit": group.link_mbit.max(), "repeats": len(group),
               "succeeded": len(ok), "status": _group_status(group)}
        row.update(_spread(ok.execution_seconds.dropna()))
        for column in ["step"] + PHASES + [p + "_total" for p in PHASES] + ["peak_rss_mb",
                                                                          "parameters"]:
            row[column] = ok[column].mean() if len(ok) else math.nan
        rows.append(row)
    return pd.DataFrame(rows)


def _group_status(group):
    states = sorted(set(group.status))
    return states[0] if len(states) == 1 else "mixed: " + ", ".join(states)


def _spread(values):
    n = len(values)
    mean = values.mean() if n else math.nan
    if n < 2:
        return {"execution_seconds": mean, "ci95": math.nan, "cv": math.nan, "unstable": False}
    sd = values.std(ddof=1)
    cv = sd / mean if mean else math.nan
    return {"execution_seconds": mean, "ci95": t95(n - 1) * sd / math.sqrt(n), "cv": cv,
            "unstable": bool(cv > CV_LIMIT)}


def t95(df):
    known = max(k for k in T95 if k <= df)
    return T95[known] if df <= 30 else 1.96


def reference_groups(groups):
    """The groups the paper's figures and claims use: unshaped or 1 Gbit/s links (the paper's
    network), else the first link setting of the run."""
    if groups.empty:
        return groups
    groups = groups[groups.nodes == groups.nodes.max()]  # the paper ran on all its nodes
    paper = groups[groups.link.isin(["", "1gbit"])]
    return paper if not paper.empty else groups[groups.link == groups.link.iloc[0]]


def scaling_table(groups, local_batch=42):
    """Per benchmark, system-mode and link: throughput (images/s over all workers) at each
    node count, speedup over one node, and scaling efficiency = speedup / nodes."""
    ok = groups[(groups.succeeded > 0) & groups.step.notna()].copy()
    ok["images_per_s"] = ok.nodes * local_batch / ok.step
    rows = []
    for key, group in ok.groupby(["benchmark", "system", "link"], sort=False):
        single = group[group.nodes == 1].images_per_s
        base = single.iloc[0] if len(single) else math.nan
        for r in group.sort_values("nodes").itertuples():
            speedup = r.images_per_s / base
            rows.append({"benchmark": key[0], "system": key[1], "link": key[2],
                         "nodes": r.nodes, "images_per_s": r.images_per_s,
                         "speedup": speedup, "efficiency": speedup / r.nodes})
    return pd.DataFrame(rows, columns=["benchmark", "system", "link", "nodes", "images_per_s",
                                       "speedup", "efficiency"])
