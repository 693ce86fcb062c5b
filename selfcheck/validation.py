"""`invoke verdict-check`: does the verdict size predict the paper's run? LeNet-5/CIFAR-10
at the paper's full length (10 x 396 steps) in every system-mode, against the verdict size's
projection of the same cell. A benchmark that prints figures: nothing here asserts them.

Per system-mode, three runs back to back: the verdict size, the full run, the verdict
size again, so that both projections bracket the full run in time (a shared machine's
speed moves between runs). Three errors per system-mode separate what goes wrong:
- before / after: each verdict run's projection against the full run's measurement;
- in-run: the projection made from the full run's own first steps, cut to as many as the
  verdict run timed (the method's error with the machine's state held);
- the full run's own spread: how far its later epochs' mean steps lie apart. A prediction made
  from minutes of steps cannot follow a machine whose speed moves by more than the goal.
"""
import json
from pathlib import Path

import numpy as np
import pandas as pd

from analysis import stats, tidy
from harness.results import run_manifest
from harness import commands
from harness.plan import matrix
from contract.errors import UserError
from contract.runfolder import RunFolder

BENCHMARK = "lenet5-cifar10"
GOAL_ERROR = 0.05
ORDER = [("before", "verdict"), ("full", "paper"), ("after", "verdict")]


def run(inventory_name, stack_name, results, systems=None, data="synthetic",
        benchmark=BENCHMARK):
    if benchmark not in matrix.BENCHMARKS:
        raise UserError("unknown benchmark %r" % benchmark,
                        "benchmarks are: %s" % ", ".join(matrix.BENCHMARKS))
    out = Path(results) / ("check-%s" % run_manifest.new_run_id())
    chosen = systems.split(",") if systems else list(matrix.SYSTEMS)
    runs = {}
    for system in chosen:
        for name, size in ORDER:
            outcome = commands.bench_named(inventory_name, stack_name, size, out,
                                     run="%s-%s" % (name, system), benchmarks=benchmark,
                                     systems=system, data=data, profile_steps=0)
            runs.setdefault(system, {})[name] = str(outcome["path"])
    rows = [compare(system, paths) for system, paths in runs.items()]
    lines = ["%s at the paper's full length against the verdict size's projection"
             % benchmark, ""] + table(rows, runs)
    (out / "validation.md").write_text("\n".join(lines) + "\n")
    (out / "validation.json").write_text(json.dumps({"rows": rows, "runs": runs}, indent=1))
    print("\n".join(lines))
    print("written: %s" % (out / "validation.md"))
    return rows


def compare(system, paths):
    """One system-mode's row: the full run's measured execution time; each verdict run's
    projection, interval and error; the in-run projection's error; the full run's spread."""
    records = {name: _system(tidy.load_records(RunFolder(path).records_path), system)
               for name, path in paths.items()}
    groups = {name: _group(recs) for name, recs in records.items()}
    full = groups["full"]
    row = {"system": system, "measured": None}
    if not full or not full["succeeded"]:
        return row
    measured = full["execution_seconds"]
    row.update(measured=measured, spread=epoch_spread(records["full"]))
    for name in ("before", "after"):
        short = groups.get(name)
        if short and short["succeeded"]:
            # one full run: what the prediction of one more run is about
            low, high = stats.interval(short["execution_pred"])
            row[name] = {"projected": short["execution_seconds"], "low": low,
                         "high": high, "stop": short["stop"],
                         "error": short["execution_seconds"] / measured - 1}
    if row.get("before"):
        row["in_run"] = in_run_projection(records["full"], records["before"]) / measured - 1
    return row


def _system(records, system):
    return records[records.system == system]


def _group(records):
    groups = tidy.group_table(tidy.cell_table(records)).to_dict("records")
    return groups[0] if groups else None


def in_run_projection(full, short):
    """The projection the verdict size would have made from the full run's own first
    steps: per process, its first k first-epoch and first m later-epoch step times, k and m
    as many as the same process timed in the verdict run, and its wall step scaled alike."""
    cut = []
    counts = _sample_counts(short)
    for key, proc in full[full.metric != "status"].groupby(["role", "rank"], dropna=False):
        proc = proc.copy()
        found = proc.metric == "step_samples"
        if key not in counts or not found.any():
            continue
        index = proc.index[found][0]
        samples, epochs = proc.at[index, "samples"], proc.at[index, "sample_epochs"]
        kept = _first_of_each(samples, epochs, counts[key])
        ratio = proc[proc.metric == "wall_step"].value.iloc[0] / np.mean(samples)
        proc.at[index, "samples"] = [s for s, _ in kept]
        proc.at[index, "sample_epochs"] = [e for _, e in kept]
        proc.loc[proc.metric == "wall_step", "value"] = ratio * np.mean([s for s, _ in kept])
        cut.append(proc)
    return tidy.projection(pd.concat(cut), None)["execution_seconds"]


def _sample_counts(records):
    """(role, rank) -> (first-epoch samples, later-epoch samples) of a run's processes."""
    counts = {}
    rows = records[records.metric == "step_samples"]
    for _, r in rows.iterrows():
        epochs = list(r["sample_epochs"])
        first = sum(1 for e in epochs if e == 0)
        counts[(r["role"], r["rank"])] = (first, len(epochs) - first)
    return counts


def _first_of_each(samples, epochs, counts):
    """The first counts[0] samples of epoch 0 and the first counts[1] of the later epochs."""
    first = [(s, e) for s, e in zip(samples, epochs) if e == 0][:counts[0]]
    later = [(s, e) for s, e in zip(samples, epochs) if e >= 1][:counts[1]]
    return first + later


def epoch_spread(records):
    """(max - min) / mean of the later epochs' mean step, the widest over processes: how far
    the full run's own speed moved while it ran."""
    widest = 0.0
    for _, r in records[records.metric == "step_samples"].iterrows():
        samples, epochs = np.asarray(r["samples"]), np.asarray(r["sample_epochs"])
        means = [samples[epochs == e].mean() for e in sorted(set(epochs)) if e >= 1]
        if len(means) >= 2:
            widest = max(widest, (max(means) - min(means)) / np.mean(means))
    return widest


def table(rows, runs):
    lines = ["| system-mode | full run, measured s | verdict before: projection s (95%) | "
             "error | verdict after: projection s (95%) | error | in-run error | "
             "full run's epochs apart | goal |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["measured"] is None:
            lines.append("| %s | not measured |%s" % (r["system"], " - |" * 7))
            continue
        cells = [r["system"], "%.1f" % r["measured"]]
        for name in ("before", "after"):
            p = r.get(name)
            cells += (["%.1f (%.1f - %.1f), %s" % (p["projected"], p["low"], p["high"],
                                                   p["stop"]), "%+.1f%%" % (100 * p["error"])]
                      if p else ["failed" if name in runs[r["system"]] else "not run", "-"])
        cells += ["%+.1f%%" % (100 * r["in_run"]) if "in_run" in r else "-",
                  "%.1f%%" % (100 * r["spread"]), goal(r)]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", walls(runs)]
    return lines


def goal(row):
    """Met when every verdict run is within 5%. Where not, it says whether the full run itself
    held one speed: if its epochs lie more than 5% apart, no projection from its first minutes
    could meet the goal, and this machine cannot judge the method."""
    errors = [abs(row[n]["error"]) for n in ("before", "after") if row.get(n)]
    if errors and max(errors) <= GOAL_ERROR:
        return "met"
    if row["spread"] > GOAL_ERROR:
        return "not met; not judged here: the full run's own speed moved by %.0f%%" % (
            100 * row["spread"])
    return "not met"


def walls(runs):
    """Wall time of one verdict pass over the system-modes against the full runs'."""
    total = {name: sum(RunFolder(paths[name]).wall_seconds() for paths in runs.values()
                       if name in paths)
             for name, _ in ORDER}
    return ("wall time: full runs %.0f s, verdict runs %.0f s before and %.0f s after "
            "(%.1f%% of the full runs' each on average)" % (
                total["full"], total["before"], total["after"],
                50 * (total["before"] + total["after"]) / max(total["full"], 1e-9)))

