"""`invoke verdict-check`: does the verdict profile predict the paper's run? LeNet-5/CIFAR-10
at the paper's full length (10 x 396 steps) in every system-mode, and the verdict profile on
the same cells; per system-mode the measured execution time, the projection with its 95%
interval, the error, and each run's wall time. Goal: error within 5% everywhere, and the
verdict run's time a small share of the full run's (issue 16). A benchmark that prints
figures: nothing here asserts them."""
import json
from pathlib import Path

from . import collect, commands

BENCHMARK = "lenet5-cifar10"
GOAL_ERROR = 0.05


def run(inventory_name, stack_name, results, systems=None, data="synthetic"):
    stamp = collect.new_run_id()
    runs = {}
    for profile in ("paper", "verdict"):
        outcome = commands.bench(inventory_name, stack_name, profile, results,
                                 run_id="check-%s-%s" % (profile, stamp),
                                 benchmarks=BENCHMARK, systems=systems, data=data,
                                 profile_steps=0)
        runs[profile] = outcome["path"]
    rows = compare(runs["paper"], runs["verdict"])
    out = Path(results) / ("check-%s" % stamp)
    out.mkdir(parents=True, exist_ok=True)
    lines = table(rows, runs)
    (out / "validation.md").write_text("\n".join(lines) + "\n")
    (out / "validation.json").write_text(json.dumps(rows, indent=1))
    print("\n".join(lines))
    print("written: %s" % (out / "validation.md"))
    return rows


def compare(full_run, verdict_run):
    """Per system-mode: the full run's measured execution time against the verdict run's
    projection (analysis/tidy.py), the error, and the verdict cells' steps and stop."""
    from analysis import tidy
    groups = {}
    for name, path in (("full", full_run), ("verdict", verdict_run)):
        cells = tidy.cell_table(tidy.load_records(Path(path) / "records.jsonl"))
        groups[name] = {g["system"]: g for g in tidy.group_table(cells).to_dict("records")}
    rows = []
    for system, full in groups["full"].items():
        short = groups["verdict"].get(system)
        if not short or not full["succeeded"] or not short["succeeded"]:
            rows.append({"system": system, "error": None})
            continue
        measured, projected = full["execution_seconds"], short["execution_seconds"]
        rows.append({"system": system, "measured": measured, "projected": projected,
                     "low": short["ci_low"], "high": short["ci_high"],
                     "error": projected / measured - 1, "stop": short["stop"],
                     "inside": short["ci_low"] <= measured <= short["ci_high"]})
    return rows


def table(rows, runs):
    lines = ["| system-mode | full run, measured s | verdict projection s | 95% interval | "
             "error | measured inside | verdict stop |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["error"] is None:
            lines.append("| %s | - | - | - | not measured | - | - |" % r["system"])
            continue
        lines.append("| %s | %.1f | %.1f | %.1f - %.1f | %+.1f%% %s | %s | %s |" % (
            r["system"], r["measured"], r["projected"], r["low"], r["high"], 100 * r["error"],
            "ok" if abs(r["error"]) <= GOAL_ERROR else "over 5%",
            "yes" if r["inside"] else "no", r["stop"]))
    walls = {name: _wall(path) for name, path in runs.items()}
    lines.append("")
    lines.append("wall time: full run %.0f s, verdict run %.0f s (%.1f%% of it)" % (
        walls["paper"], walls["verdict"], 100 * walls["verdict"] / walls["paper"]))
    return lines


def _wall(run_path):
    manifest = json.loads((Path(run_path) / "manifest.json").read_text())
    return (manifest.get("ended") or 0) - (manifest.get("started") or 0)
