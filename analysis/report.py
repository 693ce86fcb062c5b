"""One run -> results/<run-id>/analysis/: tables (CSV), the paper's figures (PNG, PDF), and
report.md + a self-contained report.html: what was run, every figure, the paper's claims with
verdicts, failed or missing cells and why."""
import datetime
import math
from pathlib import Path

import registry

from contract import manifest as manifests, runfolder
from contract.runfolder import RunFolder

from . import (answer, claims, consistency, explain, figures, memory, network, operators,
               releases, render, setup_text, stats, testbed, tidy, variation)

PHASE_COLUMNS = ["step"] + tidy.PHASES
PAPER, STEADY = "{:,}".format(tidy.PAPER_STEPS), "{:,}".format(tidy.PAPER_STEPS - 1)
SHOWN_PACKAGES = registry.shown_packages() + ("numpy", "psutil")


def build(run_path, quiet=False, out=None):
    """out: the folder to write into (default <run>/analysis). A run of several stacks gets
    each stack's report in a folder of its own (analysis/<stack>/) and, on top, the report
    that sets them side by side (analysis/releases.py)."""
    run_path = Path(run_path)
    out = Path(out) if out else run_path / "analysis"
    out.mkdir(exist_ok=True)
    manifest = RunFolder(run_path).manifest()
    records = tidy.load_records(run_path / runfolder.RECORDS)
    names = manifests.stack_names(manifest)
    if len(names) == 1:
        return build_stack(run_path, manifests.view(manifest, names[0]), records, out, quiet)
    built = {name: build_stack(run_path, manifests.view(manifest, name),
                               records[records["stack"] == name], out / name, quiet=True)
             for name in names}
    return releases.build(run_path, manifest, records, built, out, quiet)


def build_stack(run_path, manifest, records, out, quiet=False):
    """The report of a run under one stack: manifest, that stack's view (contract/manifest.py
    view); records, its records."""
    out.mkdir(exist_ok=True)
    cells = tidy.cell_table(records)
    groups = tidy.group_table(cells, variation.newest(
        run_path, manifest.get("size"), variation.cpus_of(manifest),
        dict(zip(cells.benchmark, cells.steps_per_epoch))))
    records.to_csv(out / "records.csv", index=False)
    cells.to_csv(out / "cells.csv", index=False)
    groups.to_csv(out / "groups.csv", index=False)
    summary = {"disturbed": disturbed_note(cells, manifest.get("run_id"))}
    blocks, pngs = sections(run_path, out, manifest, records, cells, groups, summary)
    (out / runfolder.REPORT).write_text(render.markdown(blocks))
    (out / runfolder.REPORT_HTML).write_text(render.to_html(blocks, "Reproduction report: run %s"
                                                    % manifest.get("run_id")))
    if not quiet:
        print("report:  %s\n         %s\nfigures: %s" % (out / runfolder.REPORT, out / runfolder.REPORT_HTML,
                                                        ", ".join(pngs)))
        if summary["disturbed"]:
            print("disturbed: %s" % summary["disturbed"])
    return dict(summary, report=out / runfolder.REPORT, html=out / runfolder.REPORT_HTML, figures=pngs,
                cells=cells, groups=groups)


def sections(run_path, out, manifest, records, cells, groups, summary):
    """summary: filled with what the console prints after the report's path (the layout, the
    setup's node and thread deviations, the verdicts' tally)."""
    planned = sorted({c["system"] for c in manifest.get("cells", [])})
    pngs = []

    def figure(paths):
        pngs.append(paths[0])
        return paths[0]

    bed = testbed.describe(manifest)
    figures.stamp("")  # no caveat of an earlier report in this process
    main = tidy.reference_groups(groups)  # the assumed link (the paper states none)
    ids = cell_ids(manifest)
    spent, moved = _minutes(cells_seconds(run_path, ids)), explain.moves(run_path)
    profile = operator_profile(records, cells, bed)
    first, method, summary["verdicts"] = claims_section(
        main, bed, moved, manifest.get("size"),
        lambda rows, caveats: figure(figures.claims_forest(rows, out / "claims", caveats)),
        lambda rows, common, forest, notes: answer.blocks(rows, common, manifest, bed, spent,
                                                          forest, notes, profile[2]))
    blocks = [("h1", "Reproduction report: run %s" % manifest.get("run_id"))] + first
    blocks += provenance(manifest, time_line(run_path, groups, manifest.get("size"), ids))
    blocks += setup_text.setup_section(bed)
    blocks += method
    summary["layout"] = bed["layout"]
    summary["against_paper"] = [d["text"] for d in bed["deviations"]
                                if d["key"] in ("nodes", "threads", "shared_cores")]
    fig3 = figure(figures.execution_time(main, out / "fig3_execution_time", planned))
    blocks += execution_section(fig3, groups, manifest)
    blocks += loading_note(bed)
    for benchmark in dict.fromkeys(main.benchmark):
        stem = "%s_breakdown_%s" % (figures.BREAKDOWN_FIGURES.get(benchmark, "fig"), benchmark)
        png = figure(figures.breakdown(main, benchmark, out / stem, planned))
        blocks += [("h3", "Breakdown: %s" % benchmark),
                   ("img", png, "Breakdown of execution time (%s)" % benchmark)]
    blocks += table_v_section(main, manifest)
    blocks += memory_section(run_path, out, records, cells, figure)
    blocks += network_section(out, groups, records, cells, manifest, figure)
    blocks += scaling_section(out, groups, figure)
    section, table = operators_section(out, records, profile, planned, figure, moved,
                                       answer.indicative(main))
    blocks += section
    blocks += consistency_section(out, records, groups, table, manifest,
                                  network.table(groups, records, cells, manifest))
    blocks += failures_section(cells, summary["disturbed"])
    return blocks, pngs


def scaling_section(out, groups, figure):
    if groups.nodes.nunique() < 2:
        return []
    table = tidy.scaling_table(groups)
    table.to_csv(out / "scaling.csv", index=False)
    blocks = [("h2", "Scaling (beyond the paper)"),
              ("p", "Each cell on the first k nodes, local batch %d (the global batch grows "
                    "with k). Throughput = k x %d / step time; speedup over one node; "
                    "efficiency = speedup / k." % ((tidy.PAPER["local_batch"],) * 2))]
    if table.speedup.notna().any():
        blocks.append(("img", figure(figures.scaling(table, out / "scaling")),
                       "Speedup and scaling efficiency"))
    blocks.append(("table", ["benchmark", "system", "links", "nodes", "images/s", "speedup",
                             "efficiency", "note"],
                   [[r.benchmark, r.system, r.link or "-", r.nodes, render.number(r.images_per_s, "%.1f"),
                     render.number(r.speedup, "%.2f"), render.number(r.efficiency, "%.2f"), r.note or "-"]
                    for r in table.itertuples()]))
    return blocks


def operator_profile(records, cells, bed):
    """(the profiled operators by category, their table, the paper's operator claims judged):
    the first screen counts the claims, their section shows them."""
    ops = operators.categorised(records)
    table = operators.category_table(ops, cells)
    return ops, table, [] if ops.empty else operators.evaluate_claims(table, testbed=bed)


def operators_section(out, records, profile, planned, figure, moved=None, stamp=""):
    """Figs. 5, 7, 10, coverage, the names left in `other`, the profiler's cost, the claims;
    and the table of operator categories (the consistency section reads it)."""
    ops, table, rows = profile
    blocks = [("h2", "Operator profiles (cf. paper Figs. 5, 7, 10)")]
    if ops.empty:
        return blocks + [("p", "No profiled steps in this run (`invoke bench --profile-steps "
                               "N`, N > 0).")], table
    return blocks + _operator_blocks(out, records, ops, table, planned, figure) + [
        ("h3", "The paper's operator claims")] + claims_table(rows, moved, stamp), table


def _operator_blocks(out, records, ops, table, planned, figure):
    """The figures, the table per category, coverage, names in `other`, the profiler's cost."""
    table.to_csv(out / "operators.csv", index=False)
    blocks = []
    blocks.append(("p", "Profiled steps run after each cell's timed steps and calibration, so "
                        "the profiler never runs in a timed step. Time per step of each "
                        "canonical category (analysis/operators.yml), every process of the "
                        "cell (servers included) over its workers. Methodology: "
                        "docs/methodology.md."))
    for stem, benchmarks in operators.FIGURES.items():
        shown = [b for b in benchmarks if b in set(table.benchmark)]
        if shown:
            png = figure(figures.operator_profile(
                table, shown, out / ("%s_operators" % stem), "Operator time per step (cf. "
                "paper %s)" % stem.replace("fig", "Fig. "), planned))
            blocks.append(("img", png, "%s: operators, %s" % (stem, ", ".join(shown))))
    wide = table.pivot_table(index=["benchmark", "system"], columns="category",
                             values="seconds").reset_index()
    columns = [c for c in operators.load_table()["categories"] if c in wide]
    blocks.append(("table", ["benchmark", "system"] + ["%s ms" % c for c in columns],
                   [[r["benchmark"], r["system"]] + [render.number(r[c], "%.3f", 1e3) for c in columns]
                    for _, r in wide.iterrows()]))
    cover = operators.coverage(ops)
    blocks += [("h3", "Coverage of the mapping table"),
               ("table", ["framework", "operator ms/step (no communication)",
                          "in a canonical category"],
                [[r.framework, "%.2f" % r.operator_ms_per_step, "%.1f%%" % (100 * r.coverage)]
                 for r in cover.itertuples()])]
    unknown = operators.unknown_names(ops)
    if not unknown.empty:
        blocks += [("p", "Operator names in `other` (no rule in analysis/operators.yml):"),
                   ("table", ["framework", "operator", "ms/step"],
                    [[r.framework, r.operator, "%.3f" % r.ms_per_step]
                     for r in unknown.itertuples()])]
    cost = operators.overhead(records)
    if not cost.empty:
        blocks += [("h3", "Profiler overhead"),
                   ("p", "Profiled step / timed (un-instrumented) step, per cell."),
                   ("table", ["benchmark", "system", "timed s/step", "profiled s/step",
                              "ratio"],
                    [[r.benchmark, r.system, "%.4f" % r.timed_step, "%.4f" % r.profiled_step,
                      "%.2f" % r.ratio] for r in cost.itertuples()])]
    return blocks


CLAIM_HEADER = ["claim", "section", "paper", "measured", "95% interval", "tolerance band",
                "verdict", "direction", "deviations besides the common list", "basis"]


def claims_table(rows, moved=None, stamp="", common=()):
    """moved: claim id -> what moves it most (an explain result in the run's folder), shown as
    a column where there is one; stamp: what every verdict is (", indicative"); common: the
    deviations named once above the table (answer.common_deviations)."""
    moved = moved or {}
    extra = ["what moves it (invoke explain)"] if any(c["id"] in moved for c in rows) else []
    return [("table", CLAIM_HEADER + extra,
             [[c["text"], c["section"], render.value_text(c["paper"]),
               render.value_text(c["measured"]), _interval(c), _band(c),
               c["verdict"] + (stamp if judged(c) else ""), c.get("direction") or "",
               answer.apart(c, common), c.get("basis", "")]
              + ([moved.get(c["id"], "")] if extra else []) for c in rows])]


def _band(row):
    """The tolerance band as numbers ("2.12 - 3.31 (x/ 1.25)"), or "" for an order claim."""
    if row["tolerance"] is None or not isinstance(row["paper"], (int, float)):
        return ""
    low, high = claims.band(row["paper"], row["tolerance"])
    return "%.2f - %.2f (x/ %.2f)" % (low, high, 1 + row["tolerance"])


def judged(row):
    """Whether a claim got a verdict from its interval (not 'not comparable', 'not
    measured')."""
    return row["verdict"].split(" (")[0] in ("reproduced", "not reproduced", "inconclusive",
                                              "partial")


def evidence_notes(rows, groups, size):
    """What the verdicts rest on: the smoke size checks the machinery; one repeat leaves
    run-to-run variation unmeasured; n claims on a 95% interval each. (notes, stamp for each
    verdict)."""
    notes, stamp = [], answer.indicative(groups)
    if size == "smoke":
        notes.append("**The smoke size checks the machinery; it is not a measurement.** "
                     "A dozen steps per cell: the verdicts below show that every part runs "
                     "and is judged, not what the frameworks do (`--size verdict`).")
    usable = _usable_repeats(groups)
    if stamp:
        notes.append("**%s: run-to-run variation was not measured.** Their intervals cover "
                     "the variation between the steps of one run only; two runs of one cell "
                     "minutes apart have differed by more. Every verdict is indicative "
                     "(`--repeats 3`, the verdict size's default, measures it)." % (
                         "One repeat per cell" if int(usable.max()) == 1 else
                         "Some cells have one usable repeat"))
    borrowed = sorted({x[len("variation from "):] for x in groups.get("interval", [])
                       if str(x).startswith("variation from ")})
    if borrowed:
        notes.append("**Cells of one repeat: run-to-run variation measured elsewhere.** "
                     "Their intervals widen the run's value by the variation between runs "
                     "of one cell that %s measured on this CPU (docs/methodology.md, "
                     "\"Intervals and verdicts\")." % "; ".join(borrowed))
    count = sum(1 for r in rows if judged(r) and _interval(r) != "-")  # order claims: none
    if count:
        notes.append("Of the claims above, %d are judged on a 95%% interval: even if the "
                     "intervals were exact, "
                     "about %.1f of them would fall outside by chance alone." % (
                         count, 0.05 * count))
    return notes, stamp


def _usable_repeats(groups):
    """Each group's count of succeeded repeats, the groups with none left out."""
    return groups.succeeded[groups.succeeded > 0] if len(groups) else groups.iloc[0:0]


def claims_section(groups, bed, moved=None, size=None, forest=None, first=None):
    """The claims: (first-screen blocks, the method's blocks, tally). forest(rows, caveats):
    the claims' figure; first(rows, common deviations, forest block, the notes' headlines):
    the first screen's lead (answer.blocks) before the table."""
    rows = claims.evaluate(groups, testbed=bed)
    notes, stamp = evidence_notes(rows, groups, size)
    caveats = ", ".join(c for c in (
        "smoke: a check of the machinery" if size == "smoke" else "",
        "nodes share cores: not comparable" if bed.get("shares_cores") else "",
        stamp.strip(", ")) if c)
    figures.stamp(caveats)  # every later figure says what the forest's title says
    shown = ("img", forest(rows, caveats), "The claims: measured ratio and 95% interval "
             "against the paper's value and the tolerance band") if forest else None
    common = answer.common_deviations(rows)
    heads = [n.split("** ")[0] + "**" for n in notes if n.startswith("**")]
    lead = first(rows, common, shown, heads) if first else []
    return lead + claims_table(rows, moved, stamp, common), [
        ("h2", "The paper's claims: how they are judged"),
        ("p", "Paper values from `analysis/reference/paper.yml`. Every time is the "
              "paper-scale execution time: start-up + the steady step x the paper's "
              "remaining steps (Table IV: %s per worker), measured where a run made "
              "them. Intervals: 95%% confidence intervals of the expected time (and of the "
              "ratio of two expected times): with repeats, from the run-to-run variation "
              "of log time pooled over a benchmark's system-modes; with one repeat, "
              "that variation as the newest interval check on this CPU measured it, where "
              "there is one, else a block bootstrap over the run's steps only. What one "
              "more run would show is wider: the execution table shows it beside. "
              "Tolerance band (the package's assumption: the paper states no "
              "uncertainty): the paper's value divided or multiplied by 1 + tolerance, "
              "symmetric in log space, so that a ratio and its inverse are judged alike. A "
              "claim averaged over benchmarks: the geometric mean of their ratios (the "
              "paper does not say how it averaged; the arithmetic mean is in the basis). "
              "Verdicts, the test of the interval against the band: reproduced (the whole "
              "interval inside the band), not reproduced (wholly outside it), inconclusive "
              "(it straddles an edge; the basis says about how many repeats of each cell "
              "would likely decide it), partial (k of n benchmarks), not comparable (the "
              "setup cannot support it; the value is still shown), not measured. "
              "Direction: whether the interval lies on the paper's side of 1 (holds), on "
              "the other (contradicted), or holds 1 (unclear), whatever the size; not "
              "judged where the verdict is partial or not comparable (what the measured "
              "part showed is in the basis). Deviations: the setup section." % PAPER)
    ] + [("p", n) for n in notes] + [("p", claims.coverage_text())], answer.tally(rows)


def _interval(row):
    return render.range_text(row.get("low"), row.get("high"))



def loading_note(bed):
    if not any(s["epochs"] < 2 for s in bed["steps"]["run"]):
        return []
    return [("p", "Loading: this run covers fewer than 2 epochs, so what caching changes "
                  "after epoch 1 (%s, paper section V-G) was not measured; the loading times "
                  "below are the first epoch's." % testbed.caching_note())]


# an interval wider than this either way (half-width / value) says nothing about the claims
WIDE_INTERVAL = 0.25


def interval_flag(g):
    """'' or why a group's paper-scale interval is too wide to judge anything by."""
    if g.ci_low != g.ci_low or not g.execution_seconds:
        return ""
    half = (g.ci_high - g.ci_low) / 2.0 / g.execution_seconds
    if half <= WIDE_INTERVAL:
        return ""
    return "interval +-%.0f%%: too few steps to say anything" % (100 * half)


def prediction_text(g):
    """The prediction of one more run, where the repeats give one ("-" with one repeat: one
    run's steps say nothing of the next run)."""
    if getattr(g, "succeeded", 0) < 2 or getattr(g, "execution_pred", None) is None:
        return "-"
    low, high = stats.interval(g.execution_pred)
    return render.range_text(low, high, "%.1f")


def coordinator_note(groups, manifest):
    """Where a coordinator times the steps: which of its two step times the execution time
    uses, why, and how far apart they lie."""
    rows = [g for g in groups.itertuples() if g.wall_step == g.wall_step and g.step == g.step
            and consistency.coordinator_timed(g.system, manifest)]
    if not rows:
        return []
    gaps = "; ".join("%s %s: %.4f s against %.4f s (%.1fx)" % (
        g.benchmark, g.system, g.wall_step, g.step, g.wall_step / g.step) for g in rows
        if g.step)
    return [("p", "Two step times of a coordinator-timed system-mode (registry "
                  "`timed_by`). The loop wall s/step is the chief's: the interval between "
                  "closures it gets back, times the workers, i.e. the time one worker's step "
                  "takes as the job sees it. The phase columns are a worker's own closure, on "
                  "its clock, from its first read of the batch to the gradients applied on the "
                  "parameter servers. The execution time uses the first, because a training "
                  "job ends when the chief has every closure back: the difference is the "
                  "coordinator's dispatch (scheduling a closure, its RPC to a worker, fetching "
                  "its result), which the breakdown counts as communication. A parameter-server "
                  "coordinator's step can only be longer than a worker's closure (check "
                  "wall_vs_closures, ratio >= 0.85); by how much depends on the CPU the chief "
                  "gets beside the workers. Here: " + gaps + ".")]


def cleaning_flag(g):
    """"3 outlier(s) left out, 10 warm-up step(s) found" or ""."""
    out, cut = getattr(g, "outliers", 0) or 0, getattr(g, "truncated", 0) or 0
    return ", ".join(t for t in ("%d outlier(s) left out" % out if out else "",
                                 "%d warm-up step(s) found" % cut if cut else "") if t)


def interference_cell(g):
    """"2.1% (+0.0%), wait 0.04" or "-" for a run from before it was measured."""
    others = getattr(g, "others_cpu", math.nan)
    if others != others:
        return "-"
    steal, wait = getattr(g, "steal", math.nan), getattr(g, "runqueue_wait", math.nan)
    return "%.1f%% (+%.1f%%), wait %s" % (100 * others, 100 * (steal if steal == steal else 0),
                                         render.number(wait, "%.2f"))


def steady_step(g):
    """The steady step a group's paper-scale time rests on: (paper-scale - start-up) over the
    paper's steps after the first (the loop's raw wall step keeps warm-up and outliers)."""
    return (g.execution_seconds - g.startup) / (tidy.PAPER_STEPS - 1)


def execution_row(g):
    """One benchmark x system-mode's row of the execution-time table."""
    return ([g.benchmark, g.system, g.link or "-", g.status,
             "%d/%d" % (g.succeeded, g.repeats), render.number(g.startup, "%.2f"),
             render.number(g.measured_seconds - g.startup, "%.2f"),
             render.number(g.wall_step, "%.4f"), render.number(steady_step(g), "%.4f"),
             render.number(getattr(g, "median_step", math.nan), "%.4f"),
             render.number(g.execution_seconds, "%.1f"),
             "-" if g.ci_low != g.ci_low else "%.1f - %.1f" % (g.ci_low, g.ci_high),
             getattr(g, "interval", "") or "-", prediction_text(g),
             ("projected" if g.projected else "measured")
             + (", stopped at %s" % g.stop if g.stop else ""),
             render.number(g.cv, "%.1f%%", 100),
             "; ".join(f for f in ("CV > 5%" if g.unstable else "", interval_flag(g),
                                   "%d disturbed, left out" % g.disturbed
                                   if g.disturbed else "", cleaning_flag(g)) if f),
             interference_cell(g)]
            + [render.number(getattr(g, c), "%.4f") for c in PHASE_COLUMNS]
            + [render.number(g.peak_rss_mb, "%.0f")])


def execution_section(fig3, groups, manifest=None):
    rows = [execution_row(g) for g in groups.itertuples()]
    return [("h2", "Execution time (cf. paper Fig. 3)"), ("img", fig3, "Fig. 3: execution time"),
            ("p", "Per benchmark and system-mode over its repeats, the measured run in two "
                  "parts that do not overlap: start-up (process start to the end of the first "
                  "step: imports, rendezvous, graph tracing, the first batch) and what came "
                  "after it up to the loop's end (the slowest process's each); the loop's wall "
                  "step as measured (warm-up excluded); the steady step the paper-scale time "
                  "rests on, (paper-scale - start-up) / " + STEADY + ", the measured steps "
                  "cleaned as below (in the verdict size, the first epoch's rate and the "
                  "later epochs' weighted); and the paper-scale execution time = start-up + "
                  "steady step x " + STEADY + " (the paper's " + PAPER + " steps less the "
                  "first, which is in start-up), with "
                  "the 95% confidence interval of its expected time (what the claims are "
                  "about; its model: one-way over the benchmark's cells, the spread s of log "
                  "time and its degrees of freedom, or the interval check it took them from) "
                  "and, wider, the 95% prediction of "
                  "what one more run would show (`invoke interval-check` checks both); CV over "
                  "repeats; per-step phase means in seconds. Fig. 3 "
                  "draws the paper-scale time, start-up as a tick at its own height. Before the mean, each "
                  "process's measured steps lose a warm-up found in the data (MSER-5) and "
                  "the outliers (a step over 5x the median); the flag counts them, and the "
                  "median step shows beside the mean. Interference: what else ran "
                  "on the worst node while the cell did, over every repeat: other programs' "
                  "share of its CPUs' time (+ steal), and how long the cell's threads waited "
                  "for a CPU per second they ran; a repeat where other programs and steal "
                  "took more than 5% of a node's CPUs (0.15 CPU-s of other programs' time in "
                  "each process's window let off: what a quiet node shows there) was run "
                  "again, and one disturbed again "
                  "is left out of the verdicts. Definitions: docs/methodology.md."),
            ("table", ["benchmark", "system", "links", "status", "ok/repeats",
                       "start-up s", "after start-up s", "loop wall s/step", "steady s/step",
                       "median s/step",
                       "paper-scale s",
                       "95% CI of the expected time", "its model",
                       "95% prediction of one more run", "how", "CV", "flag",
                       "interference: others' CPU (+steal), run-queue wait"]
             + PHASE_COLUMNS + ["peak RSS MB"], rows)] + coordinator_note(groups, manifest) + [
            ("h2", "Breakdown of execution time (cf. paper Figs. 4, 6, 8, 9)"),
            ("p", "Seconds per phase over the paper's run: start-up once, loading, forward and "
                  "backward at their per-step means x " + STEADY + " steps, communication the "
                  "rest, so "
                  "each bar's total is Fig. 3's bar.")]


def consistency_section(out, records, groups, table, manifest, net=None):
    checks = consistency.run_all(records, groups, table, manifest, net)
    checks.to_csv(out / "consistency.csv", index=False)
    can_fail = checks[checks.not_applicable == ""]
    failed = can_fail[~can_fail.ok]
    reasons = sorted(set(checks.not_applicable) - {""})
    blocks = [("h2", "Internal consistency"),
              ("p", "Checked in every analysis: Fig. 3 against the breakdown's sum; the steady "
                    "wall step against the phase timers' step (for a coordinator: against a "
                    "worker's closure); profiled forward and backward "
                    "operator time against the calibrated forward and backward, per system-mode; "
                    "each operator table per worker (a worker's compute operators cannot take "
                    "longer than its profiled step); the bytes each node sent per step against "
                    "the fewest the placement of the roles allows; where the roles ran as Slurm "
                    "job steps with accounting, Slurm's MaxRSS of each step against the "
                    "sampler's peak. %d of the %d checks that can fail on this setup pass%s."
                    % (len(can_fail) - len(failed), len(can_fail), "; %d more shown but not "
                       "counted, as they cannot fail here (%s)" % (
                           len(checks) - len(can_fail), "; ".join(reasons)) if reasons else ""))]
    if len(failed):
        blocks.append(("p", "**Warning**: %d check(s) failed; the figures are below. Where "
                            "nodes share cores, profiled steps run beside the other workers "
                            "and servers while the calibration runs alone: the profiled "
                            "operator times are inflated by that contention." % len(failed)))
    return blocks + [("table", ["check", "benchmark", "system", "value", "against", "ratio",
                                "accepted", "result"],
                      [[r.check, r.benchmark, r.system, "%.4g" % r.value, "%.4g" % r.against,
                        render.number(r.ratio, "%.3f"), r.accepted, "not counted" if r.not_applicable
                        else "ok" if r.ok else "WARNING"]
                       for r in checks.itertuples()])]


def dispatch_seconds(g, manifest):
    """A coordinator-timed system-mode's dispatch over the paper's run: its steady step (as
    the paper-scale time projects it: warm-up and outliers out) less a worker's own closure,
    x the steady steps; NaN for the others (no coordinator times them). With the projection's
    step, not the loop's raw mean, what is left is the workers' own communication phase."""
    if not consistency.coordinator_timed(g.system, manifest) or g.step != g.step:
        return math.nan
    steady = tidy.PAPER_STEPS - 1
    return max(g.execution_seconds - g.startup - g.step * steady, 0.0)


def table_v_section(groups, manifest=None):
    ref = claims.load_reference()["table_v"]
    values = {(g.benchmark, g.system): (g.communication_total, dispatch_seconds(g, manifest))
              for g in groups.itertuples() if g.succeeded}
    rows = []
    for system, paper in ref["seconds"].items():
        found = [values[(b, system)] for b in ref["benchmarks"] if (b, system) in values]
        mean = sum(f[0] for f in found) / len(found) if found else math.nan
        dispatch = sum(f[1] for f in found) / len(found) if found else math.nan
        whole = len(found) == len(ref["benchmarks"])  # like for like: the paper's mean
        # nothing dispatched: all of it is transfer and waits; a coordinator's dispatch not
        # known (its workers' step missing): the rest is not known either
        timed = consistency.coordinator_timed(system, manifest)
        rest = mean - dispatch if timed else mean
        rows.append([system, render.number(mean, "%.2f"), render.number(dispatch, "%.2f"), render.number(rest, "%.2f"),
                     "%d of %d" % (len(found), len(ref["benchmarks"])),
                     "%.2f" % paper if whole else "not comparable (%.2f over %d)" % (
                         paper, len(ref["benchmarks"]))])
    return [("h2", "Mean communication time per system-mode (cf. paper Table V)"),
            ("p", "Over the CIFAR-10 benchmarks, as the paper: communication over the "
                  "paper's run (the breakdown's communication part), averaged over the "
                  "benchmarks measured. The paper's figure is a mean over its %d CIFAR-10 "
                  "benchmarks (section V-F): it stands beside a measured mean only where the "
                  "run measured all of them; the ratio claims above compare like with like "
                  "on fewer. Where a coordinator times the steps (registry `timed_by`), "
                  "communication so defined (section IV-C) holds the coordinator's dispatch: "
                  "its step less a worker's own closure, x the steps. The paper also says that "
                  "in the asynchronous case \"communication time refers to the time consumed "
                  "in data transfer over the network\" (section V-F): the last measured column "
                  "is that part (the whole where nothing is dispatched)." % len(ref["benchmarks"])),
            ("table", ["system", "measured s", "of which coordinator dispatch s",
                       "of which transfer and waits s", "benchmarks",
                       "paper (Table V gives no unit: read as s, the package's reading)"], rows)]


def memory_section(run_path, out, records, cells, figure):
    series = memory.load_series(run_path, cells)
    blocks = [("h2", "Memory (cf. paper section V-G)")]
    if not series.empty:
        blocks.append(("img", figure(figures.memory_over_time(series, out / "memory_rss")),
                       "RSS over time per system-mode and role"))
    peaks = memory.peak_table(records)
    peaks.to_csv(out / "memory_peaks.csv", index=False)
    blocks.append(("table", ["system", "role", "peak RSS MB (with its loader processes)",
                             "own peak RSS MB (the memory claims' measure)"],
                   [[r.system, r.role, render.number(r.peak_rss_mb, "%.0f"),
                     render.number(r.peak_own_rss_mb, "%.0f")] for r in peaks.itertuples()]))
    return blocks


def network_section(out, groups, records, cells, manifest, figure):
    net = network.table(groups, records, cells, manifest)
    net.to_csv(out / "network.csv", index=False)
    blocks = [("h2", "Network: bytes per step and the bandwidth bound"),
              ("p", network.rate_sentence(cells, manifest) + " Bound: the fewest bytes a node "
                    "must send per step, from where the roles are placed: ring all-reduce "
                    "2(n-1)/n x model; parameter servers 2(n-1)/n x model too, as the share "
                    "held by the server on a worker's own node never crosses the network "
                    "(analysis/network.py). Sent bytes below it are flagged in the consistency "
                    "checks. Efficiency = bound / measured communication. Where the coordinator "
                    "times the steps (registry `timed_by`), the bytes are node 1's, the "
                    "coordinator's node. On the local cluster every node "
                    "shares `lo`: bytes sent are the whole cluster's.")]
    if net.communication.notna().any():
        blocks.append(("img", figure(figures.communication_bound(
            net, out / "network_bound", network.bound_label(cells, manifest))),
                       "Communication vs the bandwidth bound"))
    if net.link_mbit.nunique() > 1:
        blocks.append(("img", figure(figures.communication_vs_bandwidth(
            net, out / "network_bandwidth")), "Communication time against link bandwidth"))
    blocks.append(("table", ["benchmark", "system", "Mbit/s", "model MB", "sent MB/step/node",
                             "bound MB/step", "bound s/step", "communication s/step",
                             "efficiency"],
                   [[r.benchmark, r.system, render.number(r.link_mbit, "%g"), render.number(r.model_mb, "%.2f"),
                     render.number(r.bytes_sent_per_step_mb, "%.2f"), render.number(r.bound_mb_per_step, "%.2f"),
                     render.number(r.bound_seconds, "%.4f"), render.number(r.communication, "%.4f"),
                     render.number(r.efficiency, "%.2f")] for r in net.itertuples()]))
    return blocks


def failures_section(cells, disturbed_text):
    failed = cells[cells.status != "succeeded"]
    items = ["`%s`: %s%s" % (r.cell_id, r.status, " (%s)" % r.reason if r.reason else "")
             for r in failed.itertuples()]
    blocks = [("h2", "Failed or missing cells"),
              ("list", items) if items else ("p", "None: every planned cell succeeded.")]
    warned = cells[cells.warning.fillna("") != ""] if "warning" in cells else cells.iloc[0:0]
    if not warned.empty:
        blocks += [("p", "Cells that succeeded with a warning (a part missing, a second "
                         "attempt):"),
                   ("list", ["`%s`: %s" % (r.cell_id, r.warning) for r in warned.itertuples()])]
    disturbed = cells[cells.disturbed.fillna("") != ""] if "disturbed" in cells \
        else cells.iloc[0:0]
    if not disturbed.empty:
        blocks += [("p", "Cells disturbed in both attempts, shown but left out of the "
                         "verdicts:"),
                   ("list", ["`%s`: %s" % (r.cell_id, r.disturbed)
                             for r in disturbed.itertuples()]),
                   ("p", "What to do: " + disturbed_text.split(": ", 1)[1])]
    return blocks


def disturbed_note(cells, run_id):
    """"" or what the console and the report say when cells stayed disturbed: how many, the
    worst figure, and what to do (the claims that need them are "not measured")."""
    if "disturbed" not in cells:
        return ""
    hit = cells[cells.disturbed.fillna("") != ""]
    if hit.empty:
        return ""
    return ("%d cell(s) disturbed in both attempts and left out of the claims (other "
            "programs took up to %s and steal up to %s of a node's CPUs; the bound, 5%%, is on "
            "the two together, after 0.15 CPU-s of other programs' time a process): stop "
            "what else runs on the nodes, then `invoke bench --run %s --retry-failed`, "
            "`invoke collect --run %s` and `invoke analyze --run %s`" % (
                len(hit), _worst(hit, "others_cpu"), _worst(hit, "steal"), run_id, run_id,
                run_id))


def _worst(cells, column):
    """The largest share in `column` as "31%", or "?" where no cell has it."""
    worst = cells[column].max() if column in cells else None
    return "%.0f%%" % (100 * worst) if worst is not None and worst == worst else "?"


def code_line(manifest):
    """The code the nodes ran (bench/ and contract/), as each training process hashed its
    own (result.json `code_digest`), against the controller's at the run's start (pre-flight
    refused nodes whose code differed)."""
    here, ran = manifest.get("code_digest"), manifest.get("code_ran") or []
    said = "node code (bench/, contract/): "
    if not here:
        return said + "not recorded (a run from before it was)"
    if not ran:
        return said + "digest %s on the controller; no process recorded its own" % here[:12]
    if ran == [here]:
        return said + "digest %s, the controller's, in every process that trained" % here[:12]
    return said + "**processes ran other code than the controller's** (digest %s): %s" % (
        here[:12], ", ".join(d[:12] for d in ran))


def time_line(run_path, groups, size, ids=None):
    """What the run's cells cost against the paper's length, in every report: the verdict
    size's budget (docs/methodology.md, "The verdict size") counts each setting's paper-scale
    time once, not once per repeat. ids: the cells counted (None: all)."""
    spent, launches = cells_seconds(run_path, ids), len(_statuses(run_path, ids))
    line = ("time: the cells took %s in %d launch(es), attempts set aside included (the "
            "contention probe and provisioning not counted)" % (_minutes(spent), launches))
    paper = groups.execution_seconds.dropna() if len(groups) else groups
    if size == "paper" or not len(paper) or not spent:
        return line
    share = spent / paper.sum()
    line += ("; the same %d setting(s) at the paper's length: %s projected (each setting's "
             "paper-scale time once, the mean of its repeats), so this run took %.1f%% of it%s"
             % (len(paper), _minutes(paper.sum()), 100 * share, _goal(share, size)))
    if share > 0.5:  # LeNet-5: start-up and the launches weigh more than the steps
        line += "; at that share, `--size paper` would measure the paper's length itself"
    return line


def _goal(share, size):
    """The verdict size's budget beside its share, and whether the run kept to it (rounded as
    the share is shown)."""
    if size != "verdict":
        return ""
    return " (the verdict size's goal: 5%%, %s)" % (
        "within it" if round(100 * share, 1) <= 5 else "over it")


def _statuses(run_path, ids=None):
    """Every launch's status file: the cells' and the attempts set aside (`<cell>.<n>`); ids:
    of these cells only (None: all)."""
    folder = Path(run_path)
    found = list(folder.glob("*/" + runfolder.STATUS)) + list(
        folder.glob("%s/*/%s" % (runfolder.ATTEMPTS, runfolder.STATUS)))
    return found if ids is None else [
        p for p in found if p.parent.name.rsplit(".", 1)[0] in ids or p.parent.name in ids]


def cell_ids(manifest):
    """The ids of a manifest's cells (a stack's view: that stack's)."""
    return {c.get("id") for c in manifest.get("cells") or []}


def cells_seconds(run_path, ids=None):
    """What the run's launches took, attempts set aside included; ids: these cells only."""
    return sum((runfolder.read_json(p, {}) or {}).get("seconds") or 0
               for p in _statuses(run_path, ids))


def _minutes(seconds):
    return "%.0f s" % seconds if seconds < 120 else "%.1f min" % (seconds / 60)


def provenance(manifest, time_text=None):
    hosts = manifest.get("inventory", {}).get("hosts", [])
    facts = manifest.get("host_facts") or {}
    lines = ["- command: `%s`" % manifest.get("command", "?"),
             "- size: %s; stack: %s" % (manifest.get("size"),
                                          manifest.get("stack", {}).get("name")),
             "- git commit: %s%s" % (manifest.get("git", {}).get("commit"),
                                    " (uncommitted changes)" if manifest.get("git", {}).get(
                                        "dirty") else ""),
             "- " + code_line(manifest),
             "- started: %s; ended: %s" % (_when(manifest.get("started")),
                                          _when(manifest.get("ended")))]
    lines += ["- " + time_text] if time_text else []
    lines.append("- inventory `%s`: %d nodes" % (manifest.get("inventory", {}).get("name"),
                                                 len(hosts)))
    if any(h.get("connection") == "slurm" for h in hosts):
        lines.append("- launched through Slurm: every role a job step (`srun --overlap`), named "
                     "in its records (`slurm_step`); Slurm's account of each step in "
                     "`<cell>/sacct.txt`")
    nodes = [[h["name"], h["address"], h["vcpus"]] + [(facts.get(h["name"]) or {}).get(k, "?")
             for k in ("cpu_model", "cpu_count", "memory_mb", "kernel", "os",
                       "provisioned_through")] for h in hosts]
    versions = []
    for node, envs in sorted((manifest.get("installed") or {}).items()):
        for framework, env in sorted((envs or {}).items()):
            # distribution names as metadata spells them vary (tf_keras / tf-keras)
            pkgs = {k.replace("_", "-"): v for k, v in env.get("packages", {}).items()}
            shown = ", ".join("%s %s" % (k, pkgs[k]) for k in SHOWN_PACKAGES if k in pkgs)
            versions.append("%s / %s: Python %s; %s" % (node, framework, env.get("python"),
                                                         shown))
    return [("h2", "What was run"), ("list", [l[2:] for l in lines]),
            ("table", ["node", "address", "vcpus given", "CPU", "cores", "memory MB", "kernel",
                       "OS", "provisioned through"], nodes),
            ("p", "Installed versions (from each node's environments):"), ("list", versions)]






def _when(stamp):
    if not stamp:
        return "?"
    return datetime.datetime.fromtimestamp(stamp, datetime.timezone.utc).strftime(
        "%Y-%m-%d %H:%M:%S UTC")
