"""`invoke calibration`: do the verdict profile's 95% intervals cover what the paper's
full-length run measures? A benchmark that prints figures: nothing here asserts them.

Per cell (benchmark x system-mode), runs interleaved so that the machine's drift falls on
both kinds: verdict, verdict, full, verdict, verdict (`--short` verdict runs, half before the
full run and half after). Each verdict run has the profile's repeats (3). Coverage:
- of a cell: how many of its verdict runs' intervals hold the full run's measured time;
- of a ratio (two system-modes of one benchmark): how many of the verdict runs' ratio
  intervals (the i-th verdict run of each) hold the ratio of the full runs;
- before: the same, with the interval one repeat alone would have given (its steps' block
  bootstrap: the method before issue 36), from the first repeat of each verdict run.
Goal: at least 90% of a nominal 95%.
"""
import itertools
import json
from pathlib import Path

import numpy as np

from analysis import stats, tidy
from harness import commands
from harness.plan import matrix
from harness.results import collect
from contract.errors import UserError
from contract.runfolder import RunFolder

GOAL = 0.90


def run(inventory_name, stack_name, results, benchmarks, systems, short=4, data="synthetic"):
    out = Path(results) / ("calibration-%s" % collect.new_run_id())
    runs = {}
    for benchmark, system in [(b, s) for b in benchmarks for s in systems]:
        for name in order(short):
            profile = "paper" if name == "full" else "verdict"
            run_id = "%s-%s-%s" % (name, benchmark, system)
            try:
                commands.bench(inventory_name, stack_name, profile, out, run_id=run_id,
                               benchmarks=benchmark, systems=system, data=data,
                               profile_steps=0)
            except UserError as exc:  # one run lost; the others still count
                print("calibration: %s failed: %s" % (run_id, exc), flush=True)
            runs.setdefault((benchmark, system), {})[name] = str(out / run_id)
    return summarise(out, runs, benchmarks, systems)


def again(folder):
    """The table of an earlier calibration, from its run folders (`--again DIR`)."""
    out = Path(folder)
    runs = {}
    for path in sorted(p for p in out.iterdir() if p.is_dir()):
        name, _, rest = path.name.partition("-")
        benchmark = next(b for b in matrix.BENCHMARKS if rest.startswith(b + "-"))
        runs.setdefault((benchmark, rest[len(benchmark) + 1:]), {})[name] = str(path)
    benchmarks = sorted({b for b, _ in runs})
    systems = [s for s in matrix.SYSTEMS if any(k[1] == s for k in runs)]
    return summarise(out, runs, benchmarks, systems)


def summarise(out, runs, benchmarks, systems):
    rows = [cell_row(key, paths) for key, paths in runs.items()]
    ratios = [ratio_row(b, a, c, runs) for b in benchmarks
              for a, c in itertools.combinations(systems, 2)]
    lines = table(rows, ratios)
    (out / "calibration.md").write_text("\n".join(lines) + "\n")
    (out / "calibration.json").write_text(json.dumps(
        {"cells": rows, "ratios": ratios, "runs": {"%s/%s" % k: v for k, v in runs.items()}},
        indent=1))
    print("\n".join(lines))
    print("written: %s" % (out / "calibration.md"))
    return rows, ratios


def order(short):
    """Run names, the full run in the middle: v1, v2, full, v3, v4."""
    names = ["v%d" % (i + 1) for i in range(short)]
    return names[:short // 2] + ["full"] + names[short // 2:]


def group(path):
    """The run's one group (as the report builds it) and its first usable repeat's cell, each
    None where there is none (a failed run, no records, no interval)."""
    run = RunFolder(path)
    if not run.records_path.is_file():
        return None, None
    cells = tidy.cell_table(tidy.load_records(run.records_path))
    groups = tidy.group_table(cells).to_dict("records")
    usable = cells[(cells.status == "succeeded") & (cells.disturbed == "")
                   & cells.execution_boot.notna()].sort_values("repeat").to_dict("records")
    found = groups[0] if groups and groups[0]["succeeded"] and \
        groups[0]["execution_boot"] is not None else None
    return found, usable[0] if usable else None


def cell_row(key, paths):
    full, _ = group(paths["full"])
    row = {"benchmark": key[0], "system": key[1], "full": full and full["execution_seconds"],
           "short": []}
    for name in sorted(n for n in paths if n != "full"):
        found, first = group(paths[name])
        if not found:
            row["short"].append({"run": name, "failed": True})
            continue
        one = stats.interval(first["execution_boot"]) if first is not None else (None, None)
        row["short"].append({"run": name, "value": found["execution_seconds"],
                             "low": found["ci_low"], "high": found["ci_high"],
                             "one_low": one[0], "one_high": one[1]})
    return row


def ratio_row(benchmark, a, b, runs):
    """The ratio a/b of the full runs, and each i-th pair of verdict runs' interval of it."""
    paths_a, paths_b = runs.get((benchmark, a)), runs.get((benchmark, b))
    row = {"benchmark": benchmark, "ratio": "%s/%s" % (a, b), "full": None, "short": []}
    if not paths_a or not paths_b:
        return row
    full_a, full_b = group(paths_a["full"])[0], group(paths_b["full"])[0]
    if full_a and full_b:
        row["full"] = full_a["execution_seconds"] / full_b["execution_seconds"]
    for name in sorted(n for n in paths_a if n != "full" and n in paths_b):
        (ga, fa), (gb, fb) = group(paths_a[name]), group(paths_b[name])
        if not ga or not gb:
            continue
        low, high = stats.interval(np.asarray(ga["execution_boot"]) /
                                   np.asarray(gb["execution_boot"]))
        one = stats.interval(np.asarray(fa["execution_boot"]) / np.asarray(
            fb["execution_boot"])) if fa is not None and fb is not None else (None, None)
        row["short"].append({"run": name, "value": ga["execution_seconds"] /
                             gb["execution_seconds"], "low": low, "high": high,
                             "one_low": one[0], "one_high": one[1]})
    return row


def covered(row, low="low", high="high"):
    """(covered, judged) of a row's short runs against its full value."""
    if row["full"] is None:
        return 0, 0
    found = [s for s in row["short"] if s.get(low) is not None and s[low] == s[low]]
    return sum(1 for s in found if s[low] <= row["full"] <= s[high]), len(found)


def table(rows, ratios):
    """The table, then the coverage of cells and of ratios apart (the ratios come from the
    same runs: not independent of the cells)."""
    lines = ["| cell or ratio | full run | verdict runs: value [95% interval] | covered, 3 "
             "repeats (t prediction) | covered, one repeat alone (its steps' bootstrap) |",
             "|---|---|---|---|---|"]
    totals = {}
    for kind, found in (("cells", rows), ("ratios", ratios)):
        for row in found:
            lines.append(table_line(row))
            for method, args in (("3 repeats, t prediction", ()),
                                 ("one repeat alone", ("one_low", "one_high"))):
                hit, of = covered(row, *args)
                total = totals.setdefault((kind, method), [0, 0])
                total[0] += hit
                total[1] += of
    lines += [""] + ["%s, %s: %d of %d intervals cover the full run%s (%s; goal %.0f%%)" % (
        kind, method, hit, of, "s' ratio" if kind == "ratios" else "",
        "%.0f%%" % (100.0 * hit / of) if of else "-", 100 * GOAL)
        for (kind, method), (hit, of) in totals.items()]
    return lines


def table_line(row):
    name = "%s %s" % (row["benchmark"], row.get("system") or row["ratio"])
    after, before = covered(row), covered(row, "one_low", "one_high")
    shorts = "; ".join("failed" if s.get("failed") else "%.3g [%.3g-%.3g]" % (
        s["value"], s["low"], s["high"]) for s in row["short"])
    return "| %s | %s | %s | %d of %d | %d of %d |" % (
        name, "-" if row["full"] is None else "%.3g" % row["full"], shorts, after[0], after[1],
        before[0], before[1])
