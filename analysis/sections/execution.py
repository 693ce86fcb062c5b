"""Execution time (Fig. 3), its breakdown (Figs. 4, 6, 8, 9) and the mean communication per
system-mode (Table V)."""
import math

from .. import claims, consistency, figures, render, stats, testbed, tidy


PHASE_COLUMNS = ["step"] + tidy.PHASES


PAPER, STEADY = "{:,}".format(tidy.PAPER_STEPS), "{:,}".format(tidy.PAPER_STEPS - 1)


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



def section(ctx):
    fig3 = ctx.figure(figures.execution_time(ctx.main, ctx.out / "fig3_execution_time",
                                             ctx.planned))
    return execution_section(fig3, ctx.groups, ctx.manifest) + loading_note(ctx.bed)


def section_breakdowns(ctx):
    blocks = []
    for benchmark in dict.fromkeys(ctx.main.benchmark):
        stem = "%s_breakdown_%s" % (figures.BREAKDOWN_FIGURES.get(benchmark, "fig"), benchmark)
        png = ctx.figure(figures.breakdown(ctx.main, benchmark, ctx.out / stem, ctx.planned))
        blocks += [("h3", "Breakdown: %s" % benchmark),
                   ("img", png, "Breakdown of execution time (%s)" % benchmark)]
    return blocks


def section_table_v(ctx):
    return table_v_section(ctx.main, ctx.manifest)
