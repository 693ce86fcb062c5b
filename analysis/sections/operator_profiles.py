"""Operator profiles (Figs. 5, 7, 10): the categories per system-mode, the mapping's coverage,
the profiler's cost and the paper's operator claims."""
from contract import analysis_folder

from .. import answer, figures, operators, render
from .verdicts import claims_table


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
    table.to_csv(out / analysis_folder.OPERATORS_TABLE, index=False)
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



def section(ctx):
    """Keeps the table of operator categories for the consistency checks."""
    blocks, ctx.operator_table = operators_section(
        ctx.out, ctx.records, ctx.operators, ctx.planned, ctx.figure, ctx.moved,
        answer.indicative(ctx.main))
    return blocks
