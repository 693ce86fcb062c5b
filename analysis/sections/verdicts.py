"""The report's claims: the first screen (the answer, the claims' figure and table) and how
they are judged (the method, what the verdicts rest on)."""
from .. import answer, claims, figures, render
from .execution import PAPER


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
    """The claims: (first-screen blocks, the method's blocks, tally, the claims' rows).
    forest(rows, caveats):
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
    ] + [("p", n) for n in notes] + [("p", claims.coverage_text())], answer.tally(rows), rows


def _interval(row):
    return render.range_text(row.get("low"), row.get("high"))



def section_first_screen(ctx):
    """The report's title, the answer and the claims' table; keeps the method's blocks and
    the verdicts' tally for later."""
    first, ctx.method, ctx.summary["verdicts"], ctx.summary["claims"] = claims_section(
        ctx.main, ctx.bed, ctx.moved, ctx.manifest.get("size"),
        lambda rows, caveats: ctx.figure(figures.claims_forest(rows, ctx.out / "claims",
                                                               caveats)),
        lambda rows, common, forest, notes: answer.blocks(
            rows, common, ctx.manifest, ctx.bed, ctx.spent, forest, notes, ctx.operators[2]))
    return [("h1", "Reproduction report: run %s" % ctx.manifest.get("run_id"))] + first


def section_method(ctx):
    """How the claims are judged, and how often such intervals held on this machine class by
    the ledger's full-length runs."""
    coverage = ctx.summary.pop("coverage", "")
    return ctx.method + ([("p", coverage)] if coverage else [])
