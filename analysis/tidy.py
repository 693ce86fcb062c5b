"""records.jsonl -> pandas tables: one row per record, then one row per cell."""
import json

import pandas as pd

PHASES = ["loading", "forward", "backward", "communication"]
CELL_KEYS = ["cell_id", "benchmark", "system", "repeat"]


def load_records(path):
    with open(path) as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    if not rows:
        raise ValueError("%s holds no records" % path)
    return pd.DataFrame(rows)


def cell_table(records):
    """Per cell: status and reason; execution time = slowest worker's training time;
    per-step phase means averaged over workers; peak RSS = the largest process."""
    status = records[records.metric == "status"].set_index("cell_id")
    per_process = records[records.metric != "status"]
    table = status[["benchmark", "system", "repeat", "status", "reason"]].copy()
    if not per_process.empty:
        wide = per_process.pivot_table(index="cell_id", columns="metric", values="value",
                                       aggfunc="mean")
        slowest = per_process[per_process.metric == "train_seconds"].groupby("cell_id").value.max()
        peak = per_process[per_process.metric == "peak_rss_mb"].groupby("cell_id").value.max()
        table = table.join(wide[[c for c in ["step"] + PHASES if c in wide]], how="left")
        table["execution_seconds"] = slowest
        table["peak_rss_mb"] = peak
        table["workers"] = per_process[per_process.metric == "step"].groupby("cell_id").size()
    return table.reset_index()
