"""Memory (paper section V-G): RSS over time from every process's memory.csv, and peaks."""
from pathlib import Path

import pandas as pd

from contract import nodefolder

POINTS = 400  # per process line: enough for the figure, cheap for hours of 1 Hz samples
COLUMNS = ["elapsed_s", "rss_mb", "children_rss_mb"]


def load_series(run_path, cells):
    """One frame of (system, cell_id, process, role, elapsed_s, rss_mb), thinned per process."""
    systems = dict(zip(cells.cell_id, cells.system))
    frames = []
    for cell_id, system in systems.items():
        for path in nodefolder.fetched(Path(run_path, cell_id), nodefolder.MEMORY):
            frame = _read(path)
            if frame is None:
                continue
            step = max(1, len(frame) // POINTS)
            frame = frame.iloc[::step].copy()
            process = "%s/%s" % (path.parent.parent.name, path.parent.name)
            frame["rss_mb"] = frame.rss_mb + frame.children_rss_mb.fillna(0)
            frame = frame.assign(system=system, cell_id=cell_id, process=process,
                                 role=path.parent.name.rsplit("-", 1)[0])
            frames.append(frame)
    if not frames:
        return pd.DataFrame(columns=["system", "cell_id", "process", "role"] + COLUMNS)
    return pd.concat(frames, ignore_index=True)


def _read(path):
    try:
        frame = pd.read_csv(path, usecols=COLUMNS, engine="c")
    except (ValueError, pd.errors.ParserError, pd.errors.EmptyDataError):
        return None  # a process killed mid-write leaves a torn last line or an empty file
    return frame if len(frame) else None


def peak_table(records):
    """Largest RSS per system-mode and role, over cells and processes (MB): with the
    process's forked loaders (peak_rss_mb), and its own (peak_own_rss_mb, what the memory
    claims compare: tidy.py), NaN where a run did not record it."""
    columns = ["system", "role", "peak_rss_mb", "peak_own_rss_mb"]
    peaks = records[records.metric.isin(columns[2:])]
    if peaks.empty:
        return pd.DataFrame(columns=columns)
    wide = peaks.pivot_table(index=["system", "role"], columns="metric", values="value",
                             aggfunc="max").reset_index()
    return wide.reindex(columns=columns)
