"""`invoke interval-check`: do the verdict size's 95% intervals hold what they are about? A
benchmark that prints figures: nothing here asserts them.

Per benchmark, runs interleaved so that the machine's drift falls on both kinds: v1, f1, v2,
f2, v3, f3, v4. A verdict run (`--short` of them) is one `bench --size verdict` of every
chosen system-mode, its 3 repeats in blocks; a full round (`--full` of them) one `bench
--size paper` of every system-mode, in a new random order each round. Three intervals of
each verdict run, judged against what each is about:
- the confidence interval of the expected time (the report's): against the mean of the full
  rounds (cells), or the ratio of two system-modes' full means (ratios). The full mean is
  itself an estimate (its own spread is the full rounds' s / sqrt(rounds)): a miss can be its;
- the prediction interval of one more run: against each single full run (cells), and each
  round's ratio (ratios);
- one repeat alone (its steps' block bootstrap): against each single full run.
Beside them, the gap of every verdict run's value from the full mean, per system-mode, and the
run-to-run variation measured (the s of log time pooled over a benchmark's system-modes, with
its degrees of freedom) of the full runs and of the verdict runs' repeats: interval_check.json
keeps it for the report of a one-repeat run on this machine (analysis/variation.py).
Goal: 90-99% of a nominal 95% (over 99% throws precision away).
"""
import functools
import itertools
import json
import math
import random
from pathlib import Path

import numpy as np

from analysis import stats, tidy
from harness import commands
from harness.plan import matrix
from harness.results import run_manifest
from contract.errors import UserError
from contract import runfolder
from contract.runfolder import RunFolder

GOAL = (0.90, 0.99)
REPORT = runfolder.INTERVAL_CHECK_REPORT


def run(options, data="synthetic"):
    """options: harness/plan/options.py IntervalCheckOptions."""
    out = Path(options.results) / (runfolder.INTERVAL_CHECK_FOLDER + run_manifest.new_run_id())
    shuffle = random.Random(out.name)
    runs = {}
    systems = options.systems.split(",") if options.systems else list(matrix.SYSTEMS)
    for benchmark in options.benchmarks.split(","):
        for name in order(options.short, options.full):
            verdict = name.startswith("v")
            chosen = list(systems)
            if not verdict:
                shuffle.shuffle(chosen)  # a paper run of one repeat keeps the order given
            run_id = "%s-%s" % (name, benchmark)
            try:
                commands.bench_named(options.inventory, options.stack,
                                     "verdict" if verdict else "paper", out, run=run_id,
                                     benchmarks=benchmark, systems=",".join(chosen), data=data,
                                     profile_steps=0)
            except UserError as exc:  # one run lost; the others still count
                print("interval-check: %s failed: %s" % (run_id, exc), flush=True)
            kind = "verdict" if verdict else "full"
            runs.setdefault(benchmark, {"verdict": [], "full": []})[kind].append(
                str(out / run_id))
    return summarise(out, runs)


def order(short, full):
    """Run names, verdict and full interleaved: v1, f1, v2, f2, ... (the rest at the end)."""
    names = []
    for i in range(max(short, full)):
        names += (["v%d" % (i + 1)] if i < short else []) + (["f%d" % (i + 1)] if i < full
                                                             else [])
    return names


def again(folder, results="results"):
    """The tables of an earlier interval check, from its run folders (`--again DIR`: a path, or
    a folder's name in the results folder)."""
    out = Path(folder)
    if not out.is_dir() and (Path(results) / folder).is_dir():
        out = Path(results) / folder
    if not out.is_dir():
        raise UserError("no interval check's folder %s (nor %s)"
                        % (folder, Path(results) / folder),
                        "name one of %s/%s*, or give its path" % (
                            results, runfolder.INTERVAL_CHECK_FOLDER))
    runs = {}
    for path in sorted(p for p in out.iterdir() if p.is_dir()):
        name, _, benchmark = path.name.partition("-")
        if benchmark not in matrix.BENCHMARKS or name[:1] not in "vf":
            raise UserError("%s is not an interval check's run of this version (v<i>-<benchmark> or "
                            "f<i>-<benchmark>)" % path, "run `invoke interval-check` again")
        kind = "verdict" if name.startswith("v") else "full"
        runs.setdefault(benchmark, {"verdict": [], "full": []})[kind].append(str(path))
    return summarise(out, runs)


def summarise(out, runs):
    cells, ratios = [], []
    measured = measured_variation(runs)
    for benchmark, paths in runs.items():
        fulls = [groups(p)[0] for p in paths["full"]]
        shorts = [(Path(p).name.split("-")[0],) + groups(p) for p in paths["verdict"]]
        systems = [s for s in matrix.SYSTEMS if any(s in f for f in fulls)]
        cells += [cell_row(benchmark, s, fulls, shorts) for s in systems]
        ratios += [ratio_row(benchmark, a, b, fulls, shorts)
                   for a, b in itertools.combinations(systems, 2)]
        target_spread(cells + ratios, benchmark, measured["paper"].get(benchmark))
    found = {"cells": cells, "ratios": ratios, "runs": runs, "variation": measured,
             "cpu": cpu_models(runs)}
    found["pairing"] = pairing(runs)
    lines = table(cells, ratios) + [""] + gap_table(cells) + [""] + variation_lines(
        found["variation"]) + [""] + pairing_lines(found["pairing"])
    (out / REPORT).write_text("\n".join(lines) + "\n")
    (out / runfolder.INTERVAL_CHECK).write_text(json.dumps(found, indent=1, default=float))
    print("\n".join(lines))
    print("written: %s" % (out / REPORT))
    return cells, ratios


@functools.lru_cache(maxsize=None)
def cells_of(path):
    """A run's cell table (tidy.cell_table), read once however many tables ask; None where
    the run left no records."""
    run = RunFolder(path)
    if not run.records_path.is_file():
        return None
    return tidy.cell_table(tidy.load_records(run.records_path))


def usable(table):
    """The cells the report's verdicts use: succeeded, not disturbed."""
    return table[(table.status == "succeeded") & (table.disturbed == "")]


def groups(path):
    """({system: its group row}, {system: its first usable repeat's cell}) of one run, as
    the report builds them; empty where the run left no records."""
    table = cells_of(path)
    if table is None:
        return {}, {}
    found = {g["system"]: g for g in tidy.group_table(table).to_dict("records")
             if g["succeeded"] and g["execution_boot"] is not None}
    first = {}
    ok = usable(table)
    for cell in ok[ok.execution_boot.notna()].sort_values("repeat").to_dict("records"):
        first.setdefault(cell["system"], cell)
    return found, first


def cell_row(benchmark, system, fulls, shorts):
    values = [f[system]["execution_seconds"] for f in fulls if system in f]
    row = {"benchmark": benchmark, "system": system, "full_runs": values,
           "full": float(np.mean(values)) if values else None, "short": []}
    for name, found, first in shorts:
        if system not in found:
            row["short"].append({"run": name, "failed": True})
            continue
        g = found[system]
        row["short"].append(dict(
            _intervals(g["execution_boot"], g["execution_pred"],
                       first[system]["execution_boot"] if system in first else None),
            run=name, value=g["execution_seconds"]))
    return row


def ratio_row(benchmark, a, b, fulls, shorts):
    """a/b: the full rounds' ratios and the ratio of their means; each verdict run's
    intervals of it."""
    pairs = [(f[a]["execution_seconds"], f[b]["execution_seconds"]) for f in fulls
             if a in f and b in f]
    row = {"benchmark": benchmark, "ratio": "%s/%s" % (a, b),
           "full_runs": [x / y for x, y in pairs],
           "full": float(np.mean([x for x, _ in pairs]) / np.mean([y for _, y in pairs]))
           if pairs else None, "short": []}
    for name, found, first in shorts:
        if a not in found or b not in found:
            continue
        ga, gb = found[a], found[b]
        one = np.asarray(first[a]["execution_boot"]) / np.asarray(
            first[b]["execution_boot"]) if a in first and b in first else None
        row["short"].append(dict(_intervals(
            np.asarray(ga["execution_boot"]) / np.asarray(gb["execution_boot"]),
            np.asarray(ga["execution_pred"]) / np.asarray(gb["execution_pred"]), one),
            run=name, value=ga["execution_seconds"] / gb["execution_seconds"]))
    return row


def target_spread(rows, benchmark, full):
    """Each row's `full_half`: the 95% half-width (log scale) of its target, the full rounds'
    mean or ratio of means, itself an estimate: t(df) x s x sqrt(1 / n) for a cell, sqrt(1 /
    n_a + 1 / n_b) for a ratio, s and df the full runs' pooled variation (None: unknown)."""
    for row in rows:
        if row["benchmark"] != benchmark:
            continue
        n = len(row["full_runs"])
        if not full or not full.get("s") or not n:
            row["full_half"] = None
            continue
        spread = math.sqrt(1.0 / n) if "system" in row else math.sqrt(2.0 / n)
        row["full_half"] = stats.t_quantile(full["df"]) * full["s"] * spread


def _intervals(confidence, prediction, one):
    (low, high), (plow, phigh) = stats.interval(confidence), stats.interval(prediction)
    olow, ohigh = stats.interval(one) if one is not None else (None, None)
    return {"low": low, "high": high, "pred_low": plow, "pred_high": phigh,
            "one_low": olow, "one_high": ohigh}


METHODS = (("confidence interval of the expected time (the report's)", "low", "high", False,
            False),
           ("the same, the full mean's own 95% uncertainty added", "low", "high", False, True),
           ("prediction of one more run", "pred_low", "pred_high", True, False),
           ("one repeat alone (its steps' bootstrap)", "one_low", "one_high", True, False))


def covered(row, low="low", high="high", single=False, target_spread=False):
    """(covered, judged) of a row's verdict runs: against the full mean, or (single) against
    every single full run (cells) or round's ratio (ratios). target_spread: the full mean's
    own uncertainty added (two estimates compared: |log interval centre - log full| within
    the root sum of squares of the two half-widths)."""
    targets = row["full_runs"] if single else ([row["full"]] if row["full"] is not None
                                               else [])
    found = [s for s in row["short"] if s.get(low) is not None and s[low] == s[low]]
    if target_spread:
        extra = row.get("full_half")
        if extra is None:
            return 0, 0
        hits = sum(1 for s in found for t in targets if _within(s[low], s[high], t, extra))
    else:
        hits = sum(1 for s in found for t in targets if s[low] <= t <= s[high])
    return hits, len(found) * len(targets)


def _within(low, high, target, extra):
    centre, half = (math.log(high) + math.log(low)) / 2, (math.log(high) - math.log(low)) / 2
    return abs(centre - math.log(target)) <= math.sqrt(half ** 2 + extra ** 2)


def halfwidths(rows, low, high):
    return [(s[high] - s[low]) / 2 / s["value"] for r in rows for s in r["short"]
            if s.get(low) is not None and s[low] == s[low]]


def table(cells, ratios):
    """Per cell and ratio, the full runs and each verdict run's value with its confidence
    interval; then the coverage of each method, of cells and of ratios apart (the ratios come
    from the same runs: not independent of the cells)."""
    lines = ["| cell or ratio | full runs (mean) | verdict runs: value [95% CI of the expected "
             "time] | CI covers the full mean | prediction covers single full runs |",
             "|---|---|---|---|---|"]
    for row in cells + ratios:
        lines.append(table_line(row))
    lines += ["", "| method | cells: covered | median half-width | ratios: covered | median "
              "half-width |", "|---|---|---|---|---|"]
    for title, low, high, single, spread in METHODS:
        out = [title]
        for rows in (cells, ratios):
            hit, of = [sum(x) for x in zip(*[covered(r, low, high, single, spread)
                                             for r in rows])] if rows else (0, 0)
            widths = halfwidths(rows, low, high)
            out += ["%d of %d (%s)" % (hit, of, "%.0f%%" % (100.0 * hit / of) if of else "-"),
                    "%.1f%%" % (100 * np.median(widths)) if widths else "-"]
        lines.append("| " + " | ".join(out) + " |")
    lines.append("")
    lines.append("Goal: %.0f-%.0f%% of a nominal 95%%." % (100 * GOAL[0], 100 * GOAL[1]))
    return lines


def table_line(row):
    name = "%s %s" % (row["benchmark"], row.get("system") or row["ratio"])
    full = "-" if row["full"] is None else "%s (%.3g)" % (
        ", ".join("%.3g" % v for v in row["full_runs"]), row["full"])
    shorts = "; ".join("%s failed" % s["run"] if s.get("failed") else "%.3g [%.3g-%.3g]" % (
        s["value"], s["low"], s["high"]) for s in row["short"])
    ci, pi = covered(row), covered(row, "pred_low", "pred_high", True)
    return "| %s | %s | %s | %d of %d | %d of %d |" % (name, full, shorts, ci[0], ci[1],
                                                       pi[0], pi[1])


def gap_table(cells):
    """Each verdict run's value against the full mean, per system-mode."""
    lines = ["| benchmark | system-mode | verdict runs' gap from the full mean | mean gap |",
             "|---|---|---|---|"]
    for row in cells:
        gaps = [s["value"] / row["full"] - 1 for s in row["short"]
                if not s.get("failed") and row["full"]]
        lines.append("| %s | %s | %s | %s |" % (
            row["benchmark"], row["system"], ", ".join("%+.1f%%" % (100 * g) for g in gaps),
            "%+.1f%%" % (100 * np.mean(gaps)) if gaps else "-"))
    return lines


def measured_variation(runs):
    """{"paper": {benchmark: {s, df}}, "verdict": {...}}: the s of log execution time between
    runs of one cell, pooled over a benchmark's system-modes (and, for the verdict size,
    over its runs: each run's repeats about their own mean)."""
    found = {"paper": {}, "verdict": {}}
    for benchmark, paths in runs.items():
        fulls = [groups(p)[0] for p in paths["full"]]
        by_system = {}
        for f in fulls:
            for system, g in f.items():
                by_system.setdefault(system, []).append(g["execution_seconds"])
        found["paper"][benchmark] = dict(stats.pooled_sd(by_system.values()),
                                         steps_per_epoch=steps_of(paths["full"]))
        tables = [t for t in map(cells_of, paths["verdict"]) if t is not None]
        found["verdict"][benchmark] = dict(stats.pooled_sd(
            [list(v) for t in tables for _, v in usable(t).groupby("system").execution_seconds]),
            steps_per_epoch=steps_of(paths["verdict"]))
    return found


def steps_of(paths):
    """The steps an epoch of runs' cells (a variation applies to runs of that shape only:
    analysis/variation.py); None where they left no records or differ."""
    found = {int(n) for t in map(cells_of, paths) if t is not None for n in t.steps_per_epoch}
    return found.pop() if len(found) == 1 else None


def variation_lines(found):
    lines = ["Run-to-run variation (s of log execution time, pooled over system-modes):"]
    for size, per in found.items():
        for benchmark, v in per.items():
            lines.append("- %s size, %s: %s" % (
                size, benchmark, "s = %.4f (%.1f%%), %d degrees of freedom" % (
                    v["s"], 100 * v["s"], v["df"]) if v["s"] is not None else "not measured"))
    return lines


def cpu_models(runs):
    models = set()
    for paths in runs.values():
        for path in paths["full"] + paths["verdict"]:
            run = RunFolder(path)
            try:
                manifest = run.manifest()
            except (OSError, ValueError):
                continue
            models |= {c.get("model") for c in (manifest.get("cpu") or {}).values()
                       if isinstance(c, dict)}
    return sorted(m for m in models if m)


def pairing(runs):
    """Whether pairing by block helps: per verdict run, the half-width of a ratio of two
    system-modes' expected times (log scale, t x s x sqrt(2 / k)) under the one-way model and
    under the paired one, on the same repeats (stats.expected_time's two models)."""
    out = []
    for benchmark, paths in runs.items():
        for path in paths["verdict"]:
            table = cells_of(path)
            if table is None:
                continue
            ok = usable(table)
            values = {s: list(g.execution_seconds) for s, g in ok.groupby("system")}
            blocks = {s: list(g.repeat) for s, g in ok.groupby("system")}
            k = max(len(v) for v in values.values())  # a full pool's repeats
            row = {"run": Path(path).name, "blocked": tidy.ran_in_blocks(table)}
            for name, given in (("one-way", None), ("paired", blocks)):
                _, model = stats.expected_time(values, path, given, replicates=10)
                if model is None or model["model"] != name:
                    continue
                row[name] = {"s": model["s"], "df": model["df"], "s_b": model["s_b"],
                             "half": math.expm1(stats.t_quantile(model["df"]) * model["s"]
                                                * math.sqrt(2.0 / k))}
            out.append(row)
    return out


def pairing_lines(rows):
    lines = ["Pairing by block: a ratio's 95% half-width, one-way against paired (same repeats):"]
    for row in rows:
        one, two = row.get("one-way"), row.get("paired")
        lines.append("- %s%s: one-way %s; paired %s" % (
            row["run"], "" if row["blocked"] else " (not run in blocks)",
            "s %.1f%%, %d df, +-%.1f%%" % (100 * one["s"], one["df"], 100 * one["half"])
            if one else "-",
            "s_e %.1f%%, s_b %.1f%%, %d df, +-%.1f%%" % (
                100 * two["s"], 100 * two["s_b"], two["df"], 100 * two["half"]) if two
            else "-"))
    return lines
