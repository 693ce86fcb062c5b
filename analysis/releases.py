"""One run under the paper's release lines and today's (`--stacks`, the verdict and paper
sizes' default: every cell under each stack, the stack a factor of every random block). Its
first screen answers the two questions a reviewer asks, in order: does the paper's software,
run as the paper says, give its result (the tally under the stack of the paper's release
lines, IV-A)? Does the finding still hold with today's releases (the tally under today's)?
Then every claim whose verdict differs between the two: the change (today's ratio over the
ratio under the paper's release lines, with its interval) and what moves it, as measured in
the run: each framework's release on its own cells.

A claim's ratio compares two system-modes, which run in processes of their own, so that today's
ratio over the paper's is the numerator's release effect over the denominator's, each that
system-mode's time under today's stack over its time under the paper's (the package's reading: the
two share only the machine, which the random blocks spread over both). A framework whose
kernels differ between the stacks (registry `kernels_deviation`) changed them with its
release here: what is the release and what the kernels is `invoke explain --factors <that
factor>`, whose cost the screen states. Each stack's own full report lies in
analysis/<stack>/.
"""
import numpy as np
import pandas as pd

import registry

from contract import analysis_folder, manifest as manifests, runfolder

from . import answer, claims, compare, figures, render, stats

FRAMEWORKS = registry.frameworks()
# what explain's repeats of each setting cost, as the verdict size's (its default 3)
EXPLAIN_REPEATS = 3


def build(run_path, manifest, records, built, out, quiet=False):
    """The side-by-side report of a run of several stacks: built, stack -> its own report's
    summary (report.build_stack). Writes out/report.md and report.html."""
    sides = ordered_sides(manifest, records)
    older, newer = sides[0], sides[-1]
    rows = compare.claim_rows(older, newer)
    cells = compare.cell_rows(older, newer)
    spent = stack_seconds(run_path, manifest)
    effects = {r["id"]: moves(r, older, newer, spent) for r in rows
               if r["a_verdict"] != r["b_verdict"]}
    png = figures.claims_forest_two(
        [(older["label"], older["claims"]), (newer["label"], newer["claims"])],
        [claims.short_label(c) for c in claims.reference_claims()], out / "claims_two_stacks")[0]
    blocks = first_screen(manifest, sides, rows, effects, png, built, spent)
    blocks += [("h2", "Every claim under both stacks"),
               compare.claims_table([r for r in rows if r["kind"] != "operators"],
                                    older["label"], newer["label"]),
               ("h3", "Operator claims"),
               compare.claims_table([r for r in rows if r["kind"] == "operators"],
                                    older["label"], newer["label"]),
               ("h2", "Each system-mode's release effect"),
               ("p", "Paper-scale execution time under each stack, and today's over the paper "
                     "release lines' "
                     "with its 95% interval: the release effect each claim's change is made "
                     "of."),
               cells_table(cells, older["label"], newer["label"])]
    blocks += compare.setup_blocks(older, newer)
    (out / runfolder.REPORT).write_text(render.markdown(blocks))
    (out / runfolder.REPORT_HTML).write_text(render.to_html(blocks, blocks[0][1]))
    pd.DataFrame([{k: v for k, v in r.items() if k != "boot"} for r in rows]).to_csv(
        out / analysis_folder.TWO_STACKS_TABLE, index=False)
    verdicts = "; ".join("%s: %s" % (s["label"], answer.tally(
        [c for c in s["claims"].values() if c["kind"] != "operators"])) for s in sides)
    disturbed = "; ".join("%s: %s" % (name, b["disturbed"]) for name, b in built.items()
                          if b.get("disturbed"))
    if not quiet:
        print("report:  %s\n         %s\nper stack: %s" % (
            out / runfolder.REPORT, out / runfolder.REPORT_HTML,
            ", ".join(str(b["report"]) for b in built.values())))
    first = built[older["label"]]
    return {"report": out / runfolder.REPORT, "html": out / runfolder.REPORT_HTML,
            "figures": [png] + [f for b in built.values() for f in b["figures"]],
            "verdicts": verdicts, "disturbed": disturbed, "layout": first.get("layout"),
            "against_paper": first.get("against_paper"), "stacks": built}


def ordered_sides(manifest, records):
    """Each stack's view of the run, evaluated (compare.evaluate), the paper's release lines
    first, then in the run's order."""
    sides = []
    for name in manifests.stack_names(manifest):
        view = manifests.view(manifest, name)
        found = compare.evaluate(records[records["stack"] == name], view)
        sides.append(dict(found, label=name, run_id=manifest.get("run_id"), manifest=view,
                          era=compare.paper_era(found["bed"])))
    return sorted(sides, key=lambda s: 0 if s["era"] else 1)


# ---- what moves a claim ---------------------------------------------------------------

def moves(row, older, newer, spent):
    """What moves a claim between the stacks, as measured: [(framework words, effect on the
    ratio, low, high)], each side's release effect (the denominator's inverted: its effect
    on the ratio), and the kernels' note where TensorFlow is in the claim."""
    claim = claims.reference_by_id().get(row["id"])
    if not claim or not claim.get("numerator") or not claim.get("denominator"):
        return {"effects": [], "note": "an order or memory claim: its ranking under each "
                                       "stack is in the table below"}
    column = "execution"
    if row["kind"] == "communication":
        column = "communication"
    if row["kind"] == "operators":
        return {"effects": [], "note": "an operator claim: its category's time under each "
                                       "stack is in each stack's report"}
    benchmarks = claim.get("benchmarks") or claims.PAPER_BENCHMARKS
    effects = []
    for side, systems in (("numerator", [claim["numerator"]]),
                          ("denominator", claims.sides(claim["denominator"]))):
        for system in systems:
            found = release_effect(system, benchmarks, older, newer, column)
            if found:
                value, low, high = found if side == "numerator" else \
                    (1 / found[0], 1 / found[2], 1 / found[1])
                effects.append((release_words(system, older, newer), value, low, high))
    systems = [claim["numerator"]] + claims.sides(claim["denominator"])
    note = kernels_note(row["id"], systems, benchmarks, spent, newer["label"])
    return {"effects": effects, "note": note}


def release_effect(system, benchmarks, older, newer, column="execution"):
    """(value, low, high): a system-mode's time under the newer stack over the older, the
    geometric mean over the benchmarks both measured, with the bootstrap replicates' interval;
    None where neither pair was measured."""
    value_key = "execution_seconds" if column == "execution" else "communication_total"
    boot_key = "execution_boot" if column == "execution" else "communication_boot"
    a = claims.estimates(older["groups"], value_key, boot_key)
    b = claims.estimates(newer["groups"], value_key, boot_key)
    pairs = [(b[(x, system)], a[(x, system)]) for x in benchmarks
             if (x, system) in a and (x, system) in b]
    if not pairs:
        return None
    value = claims.geometric_mean([n["value"] / o["value"] for n, o in pairs])
    boot = claims.geometric_mean(np.vstack([n["boot"] / o["boot"] for n, o in pairs]), axis=0)
    low, high = stats.interval(boot)
    return float(value), float(low), float(high)


def release_words(system, older, newer):
    """'TensorFlow 2.5.0 -> 2.21.0 (tensorflow-sync)'."""
    framework = registry.system(system)["framework"]
    entry = FRAMEWORKS[framework]
    key = entry["version"]["name"]
    versions = ["/".join(side["bed"]["versions"].get(key, {}).get("run") or ["?"])
                for side in (older, newer)]
    return "%s %s -> %s (%s)" % (entry["name"], versions[0], versions[1],
                                 claims.system_words(system))


def kernels_note(claim_id, systems, benchmarks, spent, newer_label):
    """Where a framework of the claim runs other kernels under today's stack than under the
    paper's (registry `kernels_deviation`: TensorFlow's, Eigen -> oneDNN), they changed with
    its release here: the command that measures them apart, and about how long it takes
    (this run's cells of the claim's benchmarks: that framework's twice, the others once,
    explain's repeats each)."""
    factors = registry.factors()
    moved = {}
    for system in systems:
        name = FRAMEWORKS[registry.system(system)["framework"]].get("kernels_deviation")
        if name in factors and str(factors[name]["paper"]) != str(factors[name]["today"]):
            moved.setdefault(name, []).append(system)
    notes = []
    each = mean_seconds(spent)
    for name, own in moved.items():
        factor = factors[name]
        seconds = EXPLAIN_REPEATS * sum((2 if s in own else 1) * each.get((b, s, newer_label), 0.0)
                                        for b in benchmarks for s in systems)
        notes.append("%s (%s -> %s) changed with the release: not measured apart, `invoke "
                     "explain --claims %s --factors %s --size verdict --benchmarks %s`, about "
                     "%.0f min" % (factor["text"], registry.level_name(factor, factor["paper"]),
                                   registry.level_name(factor, factor["today"]), claim_id, name,
                                   ",".join(benchmarks), max(1.0, seconds / 60)))
    return "; ".join(notes)


def stack_seconds(run_path, manifest):
    """(benchmark, system, stack) -> the seconds each launch of its cells took in this run
    (attempts set aside included: what the run cost)."""
    from contract.runfolder import RunFolder
    names = manifests.stack_names(manifest)
    folder = RunFolder(run_path)
    found = {}
    for status in list(folder.statuses()) + list(folder.set_aside_statuses()):
        settings = status.get("settings") or {}
        if status.get("seconds") and settings.get("benchmark"):
            key = (settings["benchmark"], settings["system"], settings.get("stack") or names[0])
            found.setdefault(key, []).append(status["seconds"])
    return found


def mean_seconds(spent):
    return {k: float(np.mean(v)) for k, v in spent.items()}


# ---- the first screen -----------------------------------------------------------------

def first_screen(manifest, sides, rows, effects, png, built, spent):
    older, newer = sides[0], sides[-1]
    blocks = [("h1", "Reproduction report: run %s, the paper's release lines and today's"
               % manifest.get("run_id")),
              ("p", run_line(manifest, sides, spent) + evidence(manifest, sides))]
    for side, question in ((older, "Does the paper's software give its results?"),
                           (newer, "Do they hold with today's releases?")):
        blocks.append(("p", "**%s** Under %s: %s" % (question, stack_words(side),
                                                      tally_text(side))))
    differ = [r for r in rows if r["id"] in effects]
    blocks.append(("p", "**%d claim(s) whose verdict differs between the two.** Change: "
                        "today's ratio over the paper release lines', with its 95%% interval. "
                        "What moves it, as "
                        "measured in this run: each framework's release on its own cells, "
                        "its effect on the claim's ratio (the package's reading: the two "
                        "system-modes of a claim share only the machine)." % len(differ)))
    if differ:
        blocks.append(("table", ["claim", "section", "paper", older["label"], newer["label"],
                                 "change", "what moves it (measured)", "not measured apart"],
                       [differ_row(r, effects[r["id"]], older, newer) for r in differ]))
    blocks.append(("img", png, "Each claim's ratio and 95% interval under both stacks, "
                              "against the paper's value and the tolerance band"))
    common = answer.common_deviations(list(older["claims"].values()))
    expected = [k for k in common if k not in ("versions", "python", "tf_kernels", "kernels")]
    if expected:
        blocks += [("p", "Deviations of the setup this run did not measure, and what each is "
                         "expected to do (the package's expectation, not a measurement):"),
                   ("list", answer.deviation_items(expected, older["bed"]))]
    blocks.append(("p", "Each stack's full report (figures, breakdowns, Table V, memory, "
                        "operators, consistency): %s." % ", ".join(
                            "[%s](%s/%s)" % (name, name, runfolder.REPORT) for name in built)))
    return blocks


def evidence(manifest, sides):
    """What the verdicts rest on, where it is less than a measurement: the smoke size, or
    cells of one repeat whose run-to-run variation nothing measured (each stack's report
    says each in full)."""
    notes = []
    if manifest.get("size") == "smoke":
        notes.append(" **The smoke size checks the machinery; it is not a measurement.**")
    if any(answer.indicative(side["groups"]) for side in sides):
        notes.append(" **Verdicts indicative:** run-to-run variation was not measured "
                     "(one repeat per cell; `--size verdict` runs 3).")
    return "".join(notes)


def stack_words(side):
    """'paper-py39 (TensorFlow 2.5.0, ...; Python 3.9.2; not the paper's: PyTorch 1.7.1 for
    1.7.0, Python 3.9.2 for 3.6.9, IV-A)': a stack of the paper's release lines names where
    its versions are not the paper's own."""
    bed = side["bed"]
    versions = ", ".join("%s %s" % (FRAMEWORKS[f]["name"], "/".join(
        bed["versions"].get(FRAMEWORKS[f]["version"]["name"], {}).get("run") or ["?"]))
        for f in FRAMEWORKS)
    python = "/".join(bed["python"]) or "?"
    paper = bed.get("paper") or {}
    apart = ["%s %s for %s" % (FRAMEWORKS[f]["name"], "/".join(v["run"]), v["paper"])
             for f in FRAMEWORKS for v in [bed["versions"].get(FRAMEWORKS[f]["version"]["name"])]
             if v and v["run"] and not any(r.split("+")[0].startswith(v["paper"])
                                             for r in v["run"])]
    if paper.get("python") and python != paper["python"]:
        apart.append("Python %s for %s" % (python, paper["python"]))
    return "%s (%s; Python %s%s)" % (side["label"], versions, python,
                                     "; not the paper's: %s, IV-A" % ", ".join(apart)
                                     if apart and side.get("era") else "")


def tally_text(side):
    found = list(side["claims"].values())
    main = [c for c in found if c["kind"] != "operators"]
    ops = [c for c in found if c["kind"] == "operators"]
    halves = half_widths(main)
    width = " The %d ratio claims' median half-width: %.1f%% (the verdict size's goal: 10%%)." \
        % (len(halves), 100 * float(np.median(halves))) if halves else ""
    return "%s; the operator claims: %s.%s%s" % (answer.tally(main), answer.tally(ops) or "none",
                                                 answer.directions(main), width)


def half_widths(rows):
    """Each ratio claim's 95% interval's half-width over its value."""
    return [(r["high"] - r["low"]) / 2.0 / r["measured"] for r in rows
            if isinstance(r.get("paper"), (int, float)) and isinstance(r.get("measured"), float)
            and r["measured"] and r.get("low") is not None and r.get("high") is not None
            and r["low"] == r["low"] and r["high"] == r["high"]]


def run_line(manifest, sides, spent):
    """One line: size, the matrix, repeats, nodes, the stacks, and each stack's time against
    its settings at the paper's length (the verdict size's budget: 5% each)."""
    benchmarks, systems, repeats, hosts = answer.run_shape(manifest)
    shares, total, total_paper = [], 0.0, 0.0
    for side in sides:
        paper = side["groups"].execution_seconds.dropna().sum() if len(side["groups"]) else 0
        took = sum(sum(v) for k, v in spent.items() if k[2] == side["label"])
        total, total_paper = total + took, total_paper + paper
        shares.append("%s %.1f min%s" % (side["label"], took / 60, " (%.1f%% of its settings "
                                         "at the paper's length)" % (100 * took / paper)
                                         if paper else ""))
    if total_paper:
        shares.append("together %.1f min, %.1f%% of %.0f min" % (
            total / 60, 100 * total / total_paper, total_paper / 60))
    return ("**What was run:** the %s size, %d system-mode(s) x %d benchmark(s), %d repeat(s), "
            "on %d %s node(s); every cell under each of %d stacks, the stack a factor of every "
            "random block; the cells took %s." % (
                manifest.get("size"), len(systems), len(benchmarks), repeats, len(hosts),
                (manifest.get("inventory") or {}).get("name", "?"), len(sides),
                ", ".join(shares)))


def differ_row(row, moved, older, newer):
    claim = dict(claims.reference_by_id().get(row["id"]) or {"id": row["id"]})
    effects = "; ".join("%s: x%.2f [%.2f-%.2f]" % e for e in moved["effects"]) or "-"
    return [claims.short_label(claim)[1], claim.get("section", ""), render.value_text(row["paper"]),
            verdict_text(row, "a"), verdict_text(row, "b"),
            "%s [%s]" % (render.number(row["change"], "x%.2f"),
                         render.range_text(row["change_low"], row["change_high"])),
            effects, moved["note"] or "-"]


def verdict_text(row, side):
    """'1.39 [1.29-1.48] reproduced'."""
    value = row[side + "_measured"]
    shown = render.value_text(value) if not isinstance(value, float) or value == value else "-"
    interval = render.range_text(row.get(side + "_low"), row.get(side + "_high"))
    return "%s%s %s" % (shown, "" if interval == "-" else " [%s]" % interval,
                        row[side + "_verdict"])


def cells_table(cells, la, lb):
    return ("table", ["benchmark", "system", "%s s" % la, "%s s" % lb, "%s / %s" % (lb, la),
                      "interval"],
            [[r["benchmark"], r["system"], render.number(r["a_seconds"], "%.1f"),
              render.number(r["b_seconds"], "%.1f"), render.number(r["change"], "%.2f"),
              render.range_text(r["change_low"], r["change_high"])] for r in cells])
