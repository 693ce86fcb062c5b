"""One run -> results/<run-id>/analysis/: cells.csv, records.csv, figures, report.md."""
import datetime
import json
from pathlib import Path

from . import figures, tidy

PHASE_COLUMNS = ["step"] + tidy.PHASES


def build(run_path):
    run_path = Path(run_path)
    out = run_path / "analysis"
    out.mkdir(exist_ok=True)
    manifest = json.loads((run_path / "manifest.json").read_text())
    records = tidy.load_records(run_path / "records.jsonl")
    cells = tidy.cell_table(records)
    records.to_csv(out / "records.csv", index=False)
    cells.to_csv(out / "cells.csv", index=False)
    fig3 = figures.execution_time(cells, out / "fig3_execution_time")
    report = out / "report.md"
    report.write_text(render(manifest, cells, [Path(p).name for p in fig3]))
    print("report:  %s\nfigures: %s" % (report, ", ".join(fig3)))
    return {"report": report, "figures": fig3, "cells": cells}


def render(manifest, cells, figure_files):
    lines = ["# Reproduction report: run %s" % manifest["run_id"], ""]
    lines += _provenance(manifest) + [""]
    lines += ["## Execution time (cf. paper Fig. 3)", "", "![Fig. 3](%s)" % figure_files[0], ""]
    lines += ["## Cells", "",
              "Per-step means in seconds over measured steps (warm-up excluded), averaged over "
              "workers; execution = the slowest worker's training time. Breakdown definitions: "
              "docs/methodology.md.", ""]
    lines += _cells_table(cells) + [""]
    failed = cells[cells.status != "succeeded"]
    lines += ["## Failed or missing cells", ""]
    if failed.empty:
        lines.append("None: every planned cell succeeded.")
    for row in failed.itertuples():
        lines.append("- `%s`: %s%s" % (row.cell_id, row.status,
                                        " (%s)" % row.reason if row.reason else ""))
    return "\n".join(lines) + "\n"


def _provenance(manifest):
    hosts = manifest.get("inventory", {}).get("hosts", [])
    facts = manifest.get("host_facts") or {}
    lines = ["## What was run", "",
             "- command: `%s`" % manifest.get("command", "?"),
             "- profile: %s; stack: %s" % (manifest.get("profile"),
                                          manifest.get("stack", {}).get("name")),
             "- git commit: %s%s" % (manifest.get("git", {}).get("commit"),
                                    " (uncommitted changes)" if manifest.get("git", {}).get(
                                        "dirty") else ""),
             "- started: %s; ended: %s" % (_when(manifest.get("started")),
                                          _when(manifest.get("ended"))),
             "- inventory `%s`: %d nodes" % (manifest.get("inventory", {}).get("name"),
                                             len(hosts)), ""]
    lines += ["| node | address | vcpus given | CPU | cores | memory MB | kernel | OS |",
              "|---|---|---|---|---|---|---|---|"]
    for host in hosts:
        f = facts.get(host["name"]) or {}
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
            host["name"], host["address"], host["vcpus"], f.get("cpu_model", "?"),
            f.get("cpu_count", "?"), f.get("memory_mb", "?"), f.get("kernel", "?"),
            f.get("os", "?")))
    lines += ["", "Installed versions (from each node's environments):", ""]
    for node, envs in sorted((manifest.get("installed") or {}).items()):
        for framework, env in sorted((envs or {}).items()):
            # distribution names as metadata spells them vary (tf_keras / tf-keras)
            pkgs = {k.replace("_", "-"): v for k, v in env.get("packages", {}).items()}
            shown = ", ".join("%s %s" % (k, pkgs[k]) for k in SHOWN_PACKAGES if k in pkgs)
            lines.append("- %s / %s: Python %s; %s" % (node, framework, env.get("python"), shown))
    return lines


SHOWN_PACKAGES = ("torch", "tensorflow", "tensorflow-cpu", "tf-keras", "mxnet", "numpy", "psutil")


def _cells_table(cells):
    header = ["cell", "status", "workers", "execution s"] + PHASE_COLUMNS + ["peak RSS MB"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in cells.to_dict("records"):
        values = [row["cell_id"], row["status"], _num(row.get("workers"), "%d"),
                  _num(row.get("execution_seconds"), "%.2f")]
        values += [_num(row.get(c), "%.4f") for c in PHASE_COLUMNS]
        values.append(_num(row.get("peak_rss_mb"), "%.0f"))
        lines.append("| " + " | ".join(values) + " |")
    return lines


def _num(value, fmt):
    try:
        return fmt % value if value == value and value is not None else "-"
    except TypeError:
        return "-"


def _when(stamp):
    if not stamp:
        return "?"
    return datetime.datetime.fromtimestamp(stamp, datetime.timezone.utc).strftime(
        "%Y-%m-%d %H:%M:%S UTC")
