"""Two runs side by side (`invoke compare RUN_A RUN_B`), typically the same matrix under two
stacks: the paper's frameworks (paper-py39) and today's (current). For every claim of the
paper and every cell: both values with their 95% intervals, the change B / A with its
interval, and, claim by claim, whether the finding holds under one stack, both or neither.
Runs that differ in more than the stack are compared with a warning naming the differences.
Writes results/compare-<A>-vs-<B>/: report.md, report.html, figures, claims.csv, cells.csv.
"""
import math
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from contract import compare_folder, manifest as manifests, runfolder
from contract.errors import UserError
from contract.runfolder import RunFolder

from . import claims, figures, operators, render, stats, testbed, tidy


def build(run_a, run_b, out=None, quiet=False):
    a, b = load(run_a), load(run_b)
    if a["label"] == b["label"]:  # the same stack twice: tell them apart by run id
        a["label"], b["label"] = a["run_id"], b["run_id"]
    for run in (a, b):
        run["era"] = paper_era(run["bed"])
    out = Path(out or Path(run_a).parent / ("compare-%s-vs-%s" % (a["run_id"], b["run_id"])))
    out.mkdir(parents=True, exist_ok=True)
    rows = claim_rows(a, b)
    cells = cell_rows(a, b)
    ops = operator_rows(a, b)
    pd.DataFrame([{k: v for k, v in r.items() if k != "boot"} for r in rows]).to_csv(
        out / compare_folder.CLAIMS_TABLE, index=False)
    pd.DataFrame(cells).to_csv(out / compare_folder.CELLS_TABLE, index=False)
    pd.DataFrame(ops).to_csv(out / compare_folder.OPERATORS_TABLE, index=False)
    pngs = [execution_figure(a, b, cells, out / "execution_time")[0]]
    if ops:
        pngs.append(operator_figure(a, b, ops, out / "operators")[0])
    blocks = report_blocks(a, b, rows, cells, ops, pngs)
    (out / runfolder.REPORT).write_text(render.markdown(blocks))
    (out / runfolder.REPORT_HTML).write_text(render.to_html(blocks, blocks[0][1]))
    if not quiet:
        print("report:  %s\n         %s\nfigures: %s" % (out / runfolder.REPORT, out / runfolder.REPORT_HTML,
                                                        ", ".join(pngs)))
    return {"report": out / runfolder.REPORT, "claims": rows, "cells": cells, "operators": ops,
            "differences": differences(a, b)}


def load(run_path, stack=None):
    """A run's manifest, setup, groups (the assumed link's setting: the paper states none),
    operator table, claims; of a run of several stacks, those of `stack` (its cells' records
    only)."""
    run_path = Path(run_path)
    whole = RunFolder(run_path).manifest()
    names = manifests.stack_names(whole)
    if stack is None and len(names) != 1:
        raise UserError("run %s ran under %d stacks (%s): its own report sets them side by "
                        "side" % (run_path.name, len(names), ", ".join(names)),
                        "read %s, or compare two runs of one stack each"
                        % (run_path / runfolder.ANALYSIS / runfolder.REPORT))
    name = stack or names[0]
    manifest = manifests.view(whole, name)
    records = tidy.load_records(run_path / runfolder.RECORDS)
    if len(names) > 1:
        records = records[records["stack"] == name]
    found = evaluate(records, manifest)
    return dict(found, path=run_path, run_id=manifest.get("run_id") or run_path.name,
                label=name, manifest=manifest)


def evaluate(records, manifest):
    """Records -> setup, groups (the assumed link: the paper states none), operator table and
    claims ({id: row}); also for a subset of a run's records (invoke explain's settings)."""
    cells = tidy.cell_table(records)
    groups = tidy.reference_groups(tidy.group_table(cells))
    bed = testbed.describe(manifest)
    table = operators.category_table(operators.categorised(records), cells)
    found = claims.evaluate(groups, testbed=bed) + operators.evaluate_claims(table, testbed=bed)
    return {"bed": bed, "groups": groups, "operators": table,
            "claims": {c["id"]: c for c in found}}


# What two runs may differ in besides the stack, each as (what, value of a run).
def _setup_facts(run):
    bed, manifest = run["bed"], run["manifest"]
    cells = manifest.get("cells") or []
    return {
        "inventory": (manifest.get("inventory") or {}).get("name"),
        "nodes": len(bed["nodes"]),
        "machines": "; ".join("%s: %s logical CPUs, %s threads" % (
            ", ".join(m["nodes"]), m["logical_cpus"], m["threads"]) for m in bed["machines"]),
        "nodes share cores": bed["shares_cores"],
        "link": bed["link"]["text"],
        "size": manifest.get("size"),
        "data": "/".join(bed["data"]),
        "steps": ", ".join("%d x %d" % (s["epochs"], s["steps_per_epoch"])
                           for s in bed["steps"]["run"]),
        "benchmarks": ", ".join(sorted({c.get("benchmark") for c in cells})),
        "system-modes": ", ".join(sorted({c.get("system") for c in cells})),
    }


def differences(a, b):
    """[(what, A's, B's)] for every setup fact other than the stack that differs."""
    fa, fb = _setup_facts(a), _setup_facts(b)
    return [(k, fa[k], fb[k]) for k in fa if fa[k] != fb[k]]


def paper_era(bed):
    """Whether every framework ran at the paper's release line (major.minor, IV-A: torch 1.7.1
    is of 1.7.0's line); None where a run recorded no versions."""
    def line(version):
        return tuple(str(version).split(".")[:2])
    versions = [v for v in bed["versions"].values() if v["run"]]
    if not versions:
        return None
    return all(line(r) == line(v["paper"]) for v in versions for r in v["run"])


def _stack_facts(run):
    bed = run["bed"]
    versions = {k: "/".join(v["run"]) or "?" for k, v in bed["versions"].items()}
    return dict(versions, python="/".join(bed["python"]) or "?")


# ---- claims ---------------------------------------------------------------------------

def holds(verdict):
    """The interval's verdict as a yes / no / unknown about the finding."""
    return {"reproduced": True, "not reproduced": False}.get(verdict)


def answer(row_a, row_b, label_a, label_b):
    """Does the finding hold under A's stack, B's, both or neither? From each run's interval
    verdict; a run whose setup cannot support the claim, or that measured only part of it,
    is named, and the answer is then only what the intervals show."""
    va = row_a.get("interval_verdict", row_a["verdict"])
    vb = row_b.get("interval_verdict", row_b["verdict"])
    missing = [l for l, v in ((label_a, va), (label_b, vb)) if v == "not measured"]
    if missing:
        return "not measured under %s" % " and ".join(missing)
    ha, hb = holds(va), holds(vb)
    if ha is None or hb is None:
        text = "undecided: inconclusive under %s" % " and ".join(
            l for l, h in ((label_a, ha), (label_b, hb)) if h is None)
    elif ha and hb:
        text = "reproduced under both stacks: it holds today"
    elif ha or hb:
        text = "reproduced under %s only" % (label_a if ha else label_b)
    else:
        text = "reproduced under neither stack"
    caveats = ["%s: %s" % (l, r["verdict"]) for l, r in ((label_a, row_a), (label_b, row_b))
               if r["verdict"] not in ("reproduced", "not reproduced", "inconclusive")]
    if caveats:
        return "not judged (%s); the intervals alone: %s" % ("; ".join(caveats), text)
    return text


def direction(row):
    """Whether a ratio claim's measured value lies on the paper's side of 1 (the finding's
    sense, e.g. "slower", whatever its size): True, False, or None where the interval
    straddles 1 or nothing was measured. Without an interval (one profile per cell), the
    value alone."""
    paper, value = row.get("paper"), row.get("measured")
    if not _number(paper) or not _number(value) or paper == 1:
        return None
    low, high = row.get("low"), row.get("high")
    if not (_number(low) and _number(high)) or low == high:
        low = high = value
    above = paper > 1
    if (low > 1) if above else (high < 1):
        return True
    if (high < 1) if above else (low > 1):
        return False
    return None


def direction_text(row_a, row_b, label_a, label_b):
    found = ((label_a, direction(row_a)), (label_b, direction(row_b)))
    if all(d is None for _, d in found):
        return ""
    holding = [l for l, d in found if d]
    undecided = [l for l, d in found if d is None]
    where = ("both" if len(holding) == 2 else "%s only" % holding[0] if holding else "neither")
    if undecided:
        where += " (undecided under %s)" % undecided[0]
    return "; its direction (ratio %s 1) holds under %s" % (
        ">" if row_a["paper"] > 1 else "<", where)


def change(row_a, row_b):
    """B / A of a ratio claim's value, with the interval of the replicates' ratio."""
    if not _number(row_a.get("measured")) or not _number(row_b.get("measured")):
        return math.nan, math.nan, math.nan
    ratio = row_b["measured"] / row_a["measured"]
    if row_a.get("boot") is None or row_b.get("boot") is None:
        return ratio, math.nan, math.nan
    low, high = stats.interval(np.asarray(row_b["boot"]) / np.asarray(row_a["boot"]))
    return ratio, low, high


def claim_rows(a, b):
    rows = []
    for claim_id, row_a in a["claims"].items():
        row_b = b["claims"].get(claim_id)
        if row_b is None:
            continue
        ratio, low, high = change(row_a, row_b)
        said = answer(row_a, row_b, a["label"], b["label"])
        older = [r["label"] for r in (a, b) if r.get("era")]
        if len(older) == 1 and said.endswith("reproduced under %s only" % older[0]):
            said += ": a finding about 2021's software"
        said += direction_text(row_a, row_b, a["label"], b["label"])
        rows.append({"id": claim_id, "text": row_a["text"], "kind": row_a["kind"],
                     "section": row_a.get("section", ""), "paper": row_a["paper"],
                     "a_measured": row_a["measured"], "a_low": row_a.get("low"),
                     "a_high": row_a.get("high"), "a_verdict": row_a["verdict"],
                     "b_measured": row_b["measured"], "b_low": row_b.get("low"),
                     "b_high": row_b.get("high"), "b_verdict": row_b["verdict"],
                     "change": ratio, "change_low": low, "change_high": high,
                     "answer": said})
    return rows


# ---- cells and operators --------------------------------------------------------------

def cell_rows(a, b):
    """Per (benchmark, system): paper-scale execution and steady step under each run, and
    the change B / A of the execution time with its interval."""
    ga = {(g["benchmark"], g["system"]): g for g in a["groups"].to_dict("records")}
    gb = {(g["benchmark"], g["system"]): g for g in b["groups"].to_dict("records")}
    rows = []
    for key in _ordered(set(ga) | set(gb)):
        ra, rb = ga.get(key), gb.get(key)
        row = {"benchmark": key[0], "system": key[1]}
        for side, g in (("a", ra), ("b", rb)):
            ok = g is not None and g["succeeded"] > 0
            row.update({side + "_status": g["status"] if g is not None else "not run",
                        side + "_seconds": g["execution_seconds"] if ok else math.nan,
                        side + "_low": g["ci_low"] if ok else math.nan,
                        side + "_high": g["ci_high"] if ok else math.nan,
                        side + "_step": g["wall_step"] if ok else math.nan})
        row["change"], row["change_low"], row["change_high"] = _boot_change(ra, rb)
        rows.append(row)
    return rows


def _boot_change(ga, gb):
    if not ga or not gb or not ga["succeeded"] or not gb["succeeded"]:
        return math.nan, math.nan, math.nan
    ratio = gb["execution_seconds"] / ga["execution_seconds"]
    if ga.get("execution_boot") is None or gb.get("execution_boot") is None:
        return ratio, math.nan, math.nan
    low, high = stats.interval(gb["execution_boot"] / ga["execution_boot"])
    return ratio, low, high


def operator_rows(a, b):
    """Per (benchmark, system, category): ms per step under each run and the change."""
    def keyed(table):
        return {(r["benchmark"], r["system"], r["category"]): r["seconds"]
                for r in table.to_dict("records")}
    ta, tb = keyed(a["operators"]), keyed(b["operators"])
    rows = []
    for key in sorted(set(ta) | set(tb), key=lambda k: (_order_key(k[:2]), k[2])):
        sa, sb = ta.get(key, math.nan), tb.get(key, math.nan)
        rows.append({"benchmark": key[0], "system": key[1], "category": key[2],
                     "a_ms": sa * 1e3, "b_ms": sb * 1e3,
                     "change": sb / sa if sa and sa == sa and sb == sb else math.nan})
    return rows


def _order_key(key):
    benchmark, system = key
    order = figures.SYSTEM_ORDER
    bench_order = claims.PAPER_BENCHMARKS
    return (bench_order.index(benchmark) if benchmark in bench_order else len(bench_order),
            benchmark, order.index(system) if system in order else len(order), system)


def _ordered(keys):
    return sorted(keys, key=_order_key)


def _number(value):
    return isinstance(value, (int, float)) and value == value


# ---- figures --------------------------------------------------------------------------

def execution_figure(a, b, rows, out_stem):
    """Paper-scale execution time per system-mode (cell_rows), one panel per benchmark, A's
    bar beside B's (hatched), 95% intervals as error bars; a cell that did not succeed is
    marked."""
    benchmarks = list(dict.fromkeys(r["benchmark"] for r in rows))
    fig, axes = plt.subplots(1, len(benchmarks), figsize=(4.8 * len(benchmarks), 3.6),
                             squeeze=False)
    for ax, benchmark in zip(axes[0], benchmarks):
        here = [r for r in rows if r["benchmark"] == benchmark]
        x = np.arange(len(here))
        for offset, side, label, hatch in ((-0.2, "a", a["label"], None),
                                           (0.2, "b", b["label"], "///")):
            heights = np.array([r[side + "_seconds"] for r in here])
            errors = np.nan_to_num(np.vstack([heights - [r[side + "_low"] for r in here],
                                              [r[side + "_high"] for r in here] - heights]
                                             ).clip(min=0))
            ax.bar(x + offset, heights, 0.4, yerr=errors, capsize=2, label=label, hatch=hatch,
                   color=[figures.COLOURS.get(r["system"]) for r in here], edgecolor="black",
                   lw=0.3)
            for xi, r in zip(x + offset, here):
                if not np.isfinite(r[side + "_seconds"]):
                    figures.mark_missing(ax, xi, "%s: %s" % (label, r[side + "_status"]))
        ax.set_yscale("log")
        ax.set_xticks(x)
        ax.set_xticklabels([r["system"] for r in here], rotation=25, ha="right", fontsize=7)
        ax.set_title(benchmark, fontsize=9)
        ax.set_ylabel("seconds at the paper's length")
        ax.legend(fontsize=6, title="plain / hatched", title_fontsize=6)
    fig.suptitle("Execution time: %s beside %s" % (a["label"], b["label"]), fontsize=9)
    fig.tight_layout()
    return figures.save(fig, out_stem)


def operator_figure(a, b, ops, out_stem):
    """Compute operator categories (operator_rows), ms per step, A beside B: a row of panels
    per benchmark, one panel per system-mode."""
    rows = [r for r in ops if r["category"] not in operators.NOT_COMPUTE]
    panels = list(dict.fromkeys((r["benchmark"], r["system"]) for r in rows))
    benchmarks = list(dict.fromkeys(p[0] for p in panels))
    systems = figures.ordered_systems([p[1] for p in panels])
    fig, axes = plt.subplots(len(benchmarks), len(systems), squeeze=False,
                             figsize=(3.4 * len(systems), 3.0 * len(benchmarks)))
    for i, benchmark in enumerate(benchmarks):
        for j, system in enumerate(systems):
            ax = axes[i][j]
            here = [r for r in rows if (r["benchmark"], r["system"]) == (benchmark, system)]
            x = np.arange(len(here))
            ax.bar(x - 0.2, [r["a_ms"] for r in here], 0.4, label=a["label"],
                   color=figures.COLOURS.get(system))
            ax.bar(x + 0.2, [r["b_ms"] for r in here], 0.4, label=b["label"], hatch="///",
                   color=figures.COLOURS.get(system), edgecolor="black", lw=0.3)
            ax.set_xticks(x)
            ax.set_xticklabels([r["category"] for r in here], rotation=45, ha="right",
                               fontsize=5)
            ax.set_title("%s, %s" % (benchmark, system), fontsize=7)
            ax.set_ylabel("ms per step", fontsize=6)
            ax.legend(fontsize=5)
    fig.suptitle("Operator categories: %s (plain) beside %s (hatched)"
                 % (a["label"], b["label"]), fontsize=9)
    fig.tight_layout()
    return figures.save(fig, out_stem)


# ---- the report -----------------------------------------------------------------------

def report_blocks(a, b, rows, cells, ops, pngs):
    la, lb = a["label"], b["label"]
    blocks = [("h1", "Comparison: %s (run %s) beside %s (run %s)"
               % (la, a["run_id"], lb, b["run_id"]))]
    blocks += setup_blocks(a, b)
    blocks += [("h2", "The paper's claims under both stacks"),
               ("p", "Each run's value and 95%% interval and its verdict, as in each run's own "
                     "report; change = %s / %s with the interval of the bootstrap replicates' "
                     "ratio. The answer reads each run's interval alone (reproduced: the "
                     "finding holds; not reproduced: it does not); where a run's setup cannot "
                     "support the claim (not comparable) or measured only part of it, it says "
                     "not judged and what the intervals alone show. A finding reproduced "
                     "only under the stack of the paper's release lines belongs to 2021's "
                     "software." % (lb, la))]
    for kind, title in (("execution", "Execution and communication"),
                        ("operators", "Operators")):
        here = [r for r in rows if (r["kind"] == "operators") == (kind == "operators")]
        if here:
            blocks += [("h3", title), claims_table(here, la, lb)]
    blocks += [("h2", "Cells"), ("img", pngs[0], "Execution time, %s beside %s" % (la, lb)),
               ("p", "Paper-scale execution time (start-up + steady step x the paper's "
                     "remaining steps) with its 95% interval; change = B / A."),
               ("table", ["benchmark", "system", "%s s" % la, "interval", "s/step",
                          "%s s" % lb, "interval", "s/step", "change", "interval"],
                [[r["benchmark"], r["system"],
                  render.number(r["a_seconds"], "%.1f") if r["a_seconds"] == r["a_seconds"]
                  else r["a_status"], render.range_text(r["a_low"], r["a_high"], "%.1f"),
                  render.number(r["a_step"], "%.4f"),
                  render.number(r["b_seconds"], "%.1f") if r["b_seconds"] == r["b_seconds"]
                  else r["b_status"], render.range_text(r["b_low"], r["b_high"], "%.1f"),
                  render.number(r["b_step"], "%.4f"), render.number(r["change"], "%.2fx"),
                  render.range_text(r["change_low"], r["change_high"], "%.2f")] for r in cells])]
    if ops:
        blocks += [("h2", "Operator categories"),
                   ("img", pngs[1], "Operator categories, %s beside %s" % (la, lb)),
                   ("p", "Milliseconds per step and worker (analysis/operators.yml); the "
                         "profilers differ between framework versions (docs/methodology.md, "
                         "What differs per framework version)."),
                   ("table", ["benchmark", "system", "category", "%s ms" % la, "%s ms" % lb,
                              "change"],
                    [[r["benchmark"], r["system"], r["category"], render.number(r["a_ms"], "%.3f"),
                      render.number(r["b_ms"], "%.3f"), render.number(r["change"], "%.2fx")] for r in ops])]
    return blocks


def setup_blocks(a, b):
    la, lb = a["label"], b["label"]
    sa, sb = _stack_facts(a), _stack_facts(b)
    stack = [[k, sa.get(k, "-"), sb.get(k, "-")] for k in sorted(set(sa) | set(sb))]
    era = {True: "the paper's", False: "newer", None: "not recorded"}
    stack.append(["release lines", era[a.get("era")], era[b.get("era")]])
    found = differences(a, b)
    blocks = [("h2", "What differs"),
              ("table", ["stack", la, lb], stack)]
    if found:
        blocks += [("p", "**Warning**: the runs differ in more than the stack; a change below "
                         "may come from these as much as from the software:"),
                   ("list", ["%s: %s under %s, %s under %s" % (k, va, la, vb, lb)
                             for k, va, vb in found])]
    else:
        blocks.append(("p", "The runs differ only in their stack: same inventory, nodes, "
                            "link, size, data, steps, benchmarks and system-modes."))
    shared = [l for l, run in ((la, a), (lb, b)) if run["bed"]["shares_cores"]]
    if shared:
        blocks.append(("p", "Nodes share cores under %s: the frameworks' times check the "
                            "machinery and are not judged (verdict not comparable)."
                            % " and ".join(shared)))
    return blocks


def claims_table(rows, la, lb):
    return ("table", ["claim", "section", "paper", "%s" % la, "interval", "verdict", "%s" % lb,
                      "interval", "verdict", "change", "interval", "answer"],
            [[r["text"], r.get("section", ""), render.value_text(r["paper"]),
              render.value_text(r["a_measured"]),
              render.range_text(r["a_low"], r["a_high"], "%.2f"), r["a_verdict"],
              render.value_text(r["b_measured"]), render.range_text(r["b_low"], r["b_high"], "%.2f"),
              r["b_verdict"], render.number(r["change"], "%.2fx"),
              render.range_text(r["change_low"], r["change_high"], "%.2f"), r["answer"]] for r in rows])
