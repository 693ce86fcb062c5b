"""`invoke explain`'s analysis: each claim's ratio under 2021's software here (the base), under
today's (the end), and each factor's multiplicative effect on it (harness/plan/ladder.py for
the rungs), with 95% intervals; the interaction is what the effects leave unexplained:
end / (base x the path's effects). Writes explain.json, explain.md, claims.csv and a waterfall
figure per claim; `moves(run)` gives the main report its "what moves it" column.

Intervals: a ratio of two settings' bootstrap replicates. Both are drawn with the same seed per
(benchmark, system-mode), so repeat k of one setting is paired with repeat k of the other: the
rounds are interleaved (every setting's repeat k ran in round k), which makes the pairing fair.
"""
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

import registry

from contract import explain_result, manifest as manifests, nodefolder, runfolder
from contract.runfolder import RunFolder
from contract.explain_plan import PLAN, Rung, Setting

from . import claims, compare, figures, render, setup_text, stats, testbed, tidy

FILE = explain_result.FILE


# ---- measuring a setting -------------------------------------------------------------------

def measure(records, manifest, cell_ids, claim_ids):
    """A setting's claims ({id: row}) and each (benchmark, system)'s execution estimate, from
    the records of its cells only (a run holds the cells of several settings)."""
    mine = records[records.cell_id.isin(cell_ids)]
    if mine.empty:
        return {"claims": {}, "times": {}, "disturbed": {}}
    found = compare.evaluate(mine, manifest)
    kept = {k: v for k, v in found["claims"].items() if k in claim_ids}
    return {"claims": kept,
            "times": claims.estimates(found["groups"], "execution_seconds", "execution_boot"),
            "disturbed": left_out_by_disturbance(mine, manifest, kept, claim_ids)}


def left_out_by_disturbance(records, manifest, kept, claim_ids):
    """claim id -> the cells disturbed in both attempts, for each claim that those cells alone
    keep from being measured: it is measured when they are taken as they ran."""
    status = records[records.metric == "status"]
    hit = sorted(status[status.disturbed.fillna("") != ""].cell_id) \
        if "disturbed" in status else []
    if not hit:
        return {}
    missing = [k for k in sorted(claim_ids) if not _finite(_value(kept.get(k)))]
    again = compare.evaluate(records.assign(disturbed=""), manifest)["claims"] if missing else {}
    return {k: hit for k in missing if _finite(_value(again.get(k)))}


# ---- the arithmetic ------------------------------------------------------------------------

def ratio(before, after):
    """after / before of two estimates {measured|value, boot}: (value, low, high, boot)."""
    a, b = _value(before), _value(after)
    if not _finite(a) or not _finite(b) or a == 0:
        return math.nan, math.nan, math.nan, None
    boot = np.asarray(after["boot"], float) / np.asarray(before["boot"], float) \
        if before.get("boot") is not None and after.get("boot") is not None else None
    low, high = stats.interval(boot) if boot is not None else (math.nan, math.nan)
    return b / a, low, high, boot


def _value(row):
    value = row.get("measured", row.get("value")) if row else None
    return float(value) if value is not None else math.nan


def _finite(x):
    return x is not None and x == x and not math.isinf(x)


def clears_one(low, high):
    return _finite(low) and _finite(high) and (low > 1 or high < 1)


def decompose(claim_id, base, end, steps, paper=None):
    """One claim taken apart. base, end: the claim's row under each end; steps: [(rung,
    before row, after row, why not measured)], rung with .factor, .name, .side."""
    row = {"id": claim_id, "paper": paper, "base": _value(base), "end": _value(end),
           "base_low": (base or {}).get("low"), "base_high": (base or {}).get("high"),
           "end_low": (end or {}).get("low"), "end_high": (end or {}).get("high"),
           "effects": []}
    product, product_boot = 1.0, None
    for rung, before, after, why in steps:
        value, low, high, boot = ratio(before, after) if not why else (math.nan,) * 3 + (None,)
        effect = {"factor": rung.factor, "rung": rung.name, "side": rung.side, "value": value,
                  "low": low, "high": high,
                  "why": why or ("" if _finite(value) else "not measured")}
        row["effects"].append(effect)
        if rung.side != "what-if" and _finite(value):  # an unmeasured one: in the remainder
            product *= value
            if boot is not None:
                product_boot = boot if product_boot is None else product_boot * boot
    row["product"] = product
    row["interaction"], row["interaction_low"], row["interaction_high"] = \
        _interaction(base, end, product, product_boot)
    row["sentence"] = sentence(row)
    return row


def _interaction(base, end, product, product_boot):
    """end / (base x product): what the path's effects leave unexplained."""
    if not (_finite(_value(base)) and _finite(_value(end)) and _finite(product)):
        return math.nan, math.nan, math.nan
    value = _value(end) / (_value(base) * product)
    if product_boot is None or base.get("boot") is None or end.get("boot") is None:
        return value, math.nan, math.nan
    low, high = stats.interval(np.asarray(end["boot"], float) /
                               (np.asarray(base["boot"], float) * product_boot))
    return value, low, high


def sentence(row):
    """The factor that moves the claim most, where its interval clears 1."""
    clear = [e for e in row["effects"] if _finite(e["value"]) and clears_one(e["low"], e["high"])]
    if not clear:
        measured = [e for e in row["effects"] if _finite(e["value"])]
        if not measured:
            return "no factor could be measured"
        return "no factor's interval clears 1 (largest: %s x%.2f [%.2f-%.2f])" % _largest(measured)
    return "%s moves it most: x%.2f [%.2f-%.2f]" % _largest(clear)


def _largest(effects):
    top = max(effects, key=lambda e: abs(math.log(e["value"])))
    return top["rung"], top["value"], top["low"], top["high"]


def system_effects(steps_times):
    """Each rung's effect on each system-mode's own execution time, per benchmark: a comparison
    within one framework, fair even where nodes share cores. steps_times: [(rung, before
    times, after times)]."""
    rows = []
    for rung, before, after in steps_times:
        for key in sorted(set(before) & set(after)):
            value, low, high, _ = ratio(before[key], after[key])
            if _finite(value) and value != 1.0:
                rows.append({"rung": rung.name, "benchmark": key[0], "system": key[1],
                             "value": value, "low": low, "high": high})
    return rows


# ---- the explain folder --------------------------------------------------------------------

class SavedPlan(object):
    """The plan `invoke explain` ran, read back from the explain folder's plan.json
    (harness/ladder_run.py writes it): the settings with their stack, run and cells, the
    rungs, the factors and the claims. The analysis reads nothing else of the planner."""

    def __init__(self, path):
        data = json.loads(Path(path).read_text())
        self.runs = (Path(path).parent / data["runs"]).resolve()
        self.repeats, self.factors = data["repeats"], data["factors"]
        self.left_out, self.not_measurable = data["left_out"], data["not_measurable"]
        self.claims = [(claim, benchmarks) for claim, benchmarks in data["claims"]]
        self.base, self.end = Setting(data["base"]), Setting(data["end"])
        self.rungs = [Rung.from_data(r) for r in data["rungs"]]
        self._settings = {Setting(s["levels"]).key: s for s in data["settings"]}
        self._runs = {s["stack"]: s["run"] for s in data["settings"]}

    def settings(self):
        return [Setting(s["levels"]) for s in self._settings.values()]

    def cells_of(self, setting):
        """(stack, cells): each cell with its id and framework."""
        entry = self._settings[setting.key]
        return entry["stack"], [SavedCell(c["id"], c["framework"]) for c in entry["cells"]]

    def run_id(self, stack):
        return self._runs[stack]


class SavedCell(object):
    def __init__(self, id, framework):
        self.id, self.framework = id, framework


def setting_text(setting, factors):
    return ", ".join("%s: %s" % (factors[f].get("text", f), registry.level_name(factors[f], v))
                     for f, v in setting.levels)


def build(folder, quiet=False):
    """Measure every setting from the shared runs, take every claim apart, write the explain
    folder's results beside its plan.json (contract/explain_plan.py PLAN)."""
    out = Path(folder)
    plan = SavedPlan(out / PLAN)
    runs = plan.runs
    measured, applied, beds = {}, [], {}
    loaded = {}
    for setting in plan.settings():
        stack, cells = plan.cells_of(setting)
        run_path = Path(runs) / plan.run_id(stack)
        if stack not in loaded:
            whole = RunFolder(run_path).manifest()
            manifest = manifests.view(whole, manifests.stack_names(whole)[0])
            loaded[stack] = (tidy.load_records(run_path / runfolder.RECORDS), manifest)
            beds[stack] = testbed.describe(manifest)
        records, manifest = loaded[stack]
        ids = {c.id for c in cells}
        measured[setting.key] = measure(records, manifest, ids, {c["id"] for c, _ in plan.claims})
        applied += levels_applied(run_path, setting, plan.factors, cells)
    rows = [claim_row(plan, claim, measured) for claim, _ in plan.claims]
    effects = system_effects([(r, measured[r.before.key]["times"], measured[r.after.key]["times"])
                              for r in plan.rungs])
    result = {"claims": rows, "system_effects": effects, "levels": applied,
              "left_out": plan.left_out, "not_measurable": plan.not_measurable,
              "base": setting_text(plan.base, plan.factors),
              "end": setting_text(plan.end, plan.factors),
              "runs": {s: str(Path(runs) / plan.run_id(s)) for s in loaded}}
    (out / FILE).write_text(json.dumps(explain_result.checked(result), indent=1,
                                       default=_plain))
    pd.DataFrame([{k: v for k, v in r.items() if k not in ("effects", "ladders")}
                  for r in rows]).to_csv(
        out / explain_result.CLAIMS_TABLE, index=False)
    pngs = {r["id"]: waterfall(r, out / ("waterfall_%s" % r["id"]))[0] for r in rows
            if _finite(r["base"]) and _finite(r["end"])}
    for r in rows:
        for name, lad in r["ladders"].items():
            if any(_finite(l["value"]) for l in lad["levels"]):
                pngs[(r["id"], name)] = ladder_figure(r, lad, out / ("ladder_%s_%s" % (
                    r["id"], name)))[0]
    bed = beds.get(plan.cells_of(plan.base)[0]) or next(iter(beds.values()))
    blocks = report_blocks(plan, result, bed, pngs)
    (out / explain_result.MARKDOWN).write_text(render.markdown(blocks))
    (out / runfolder.REPORT_HTML).write_text(render.to_html(blocks, blocks[0][1]))
    if not quiet:
        print("explain: %s\n         %s" % (out / explain_result.MARKDOWN,
                                            out / runfolder.REPORT_HTML))
    return dict(result, path=out)


def _plain(value):
    if isinstance(value, np.ndarray):
        return None  # bootstrap replicates stay out of the file
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    return str(value)


def claim_row(plan, claim, measured):
    base = measured[plan.base.key]["claims"].get(claim["id"])
    end = measured[plan.end.key]["claims"].get(claim["id"])
    steps = rung_steps(plan.rungs, plan.not_measurable, claim["id"], measured)
    row = decompose(claim["id"], base, end, steps, paper=claim.get("value"))
    row["ladders"] = ladders(plan, claim["id"], measured, row["effects"])
    row["text"] = claim["text"]
    row["base_verdict"] = (base or {}).get("verdict")
    row["end_verdict"] = (end or {}).get("verdict")
    row["comparable"] = not any(d in claims.NOT_COMPARABLE for d in
                                (end or base or {}).get("deviations") or [])
    return row


def rung_steps(rungs, not_measurable, claim_id, measured):
    """decompose's steps: (rung, the claim before, after, why it is not measured or '')."""
    steps = []
    for rung in rungs:
        why = not_measurable.get(rung.after.key) or not_measurable.get(rung.before.key)
        before = measured[rung.before.key]["claims"].get(claim_id)
        after = measured[rung.after.key]["claims"].get(claim_id)
        if why:
            why = "not measurable here: %s" % why
        elif not (_finite(_value(before)) and _finite(_value(after))):
            why = left_out_why(claim_id, measured[rung.before.key], measured[rung.after.key])
        steps.append((rung, before, after, why))
    return steps


def left_out_why(claim_id, *settings):
    """'' or, where cells left out as disturbed are what keeps the claim unmeasured, which."""
    hit = sorted({c for s in settings for c in s.get("disturbed", {}).get(claim_id, [])})
    return "%s: %s" % (tidy.LEFT_OUT, ", ".join(hit)) if hit else ""


def ladders(plan, claim_id, measured, effects):
    """factor -> the claim's ratio at each of its levels (the others at 2021's) and the rung
    where it moved most, for every path factor of more than two levels (a release ladder)."""
    out = {}
    for name, factor in plan.factors.items():
        values = registry.level_values(factor)
        if len(values) < 3 or str(factor["paper"]) == str(factor["today"]):
            continue
        levels = []
        for value in values:
            got = measured.get(plan.base.moved(name, value).key, {}).get("claims", {})
            found = got.get(claim_id) or {}
            levels.append({"level": value, "name": registry.level_name(factor, value),
                           "value": _value(found), "low": found.get("low"),
                           "high": found.get("high")})
        mine = [e for e in effects if e["factor"] == name and e["side"] == "path"
                and _finite(e["value"])]
        out[name] = {"text": factor.get("text", name), "levels": levels,
                     "most": dict(zip(("rung", "value", "low", "high"), _largest(mine)))
                     if mine else None}
    return out


def ladder_figure(row, ladder_row, out_stem):
    """The claim's ratio against each level of a ladder, with its 95% interval."""
    import matplotlib.pyplot as plt
    levels = ladder_row["levels"]
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(levels) + 2), 4))
    x = np.arange(len(levels))
    y = np.array([l["value"] for l in levels], float)
    low = np.array([l["low"] if _finite(l["low"]) else v for l, v in zip(levels, y)], float)
    high = np.array([l["high"] if _finite(l["high"]) else v for l, v in zip(levels, y)], float)
    ax.errorbar(x, y, yerr=[y - low, high - y], marker="o", capsize=4, color="#4e79a7",
                label="measured here (95% interval)")
    if row.get("paper"):
        ax.axhline(row["paper"], color="#bab0ac", linestyle="--", label="paper")
    ax.axhline(1.0, color="#999999", linewidth=0.8)
    ax.set_xticks(x)
    ax.set_xticklabels([l["name"] for l in levels], rotation=20, ha="right", fontsize=8)
    return figures.finish(fig, ax, out_stem, "%s: %s" % (row["text"], ladder_row["text"]),
                          "claim's ratio")


def levels_applied(run_path, setting, factors, cells):
    """Each environment factor's level as every process of the setting's cells recorded it
    (result.json `environment`), against the level planned."""
    rows = []
    for name, value in setting.levels:
        variable = factors[name]["apply"].get("environment")
        if not variable:
            continue
        frameworks = factors[name].get("frameworks")
        for cell in cells:
            if frameworks and cell.framework not in frameworks:
                continue
            for result in nodefolder.fetched_results(Path(run_path, cell.id)):
                seen = (json.loads(result.read_text()).get("environment") or {}).get(variable)
                rows.append({"setting": setting.key, "factor": name, "cell": cell.id,
                             "process": "/".join(result.parts[-3:-1]), "planned": value,
                             "recorded": seen, "ok": seen == value})
    return rows


def waterfall(row, out_stem):
    """paper -> 2021 here -> each factor -> interaction -> today, each step labelled with
    its effect."""
    import matplotlib.pyplot as plt
    steps = [e for e in row["effects"] if e["side"] != "what-if" and _finite(e["value"])]
    steps.append({"rung": "interaction", "value": row["interaction"]
                  if _finite(row["interaction"]) else 1.0})
    paper = row.get("paper")
    labels = (["paper"] if paper else []) + ["2021 here"] + [
        e["rung"] + (" (from today)" if e.get("side") == "from today" else "") for e in steps] \
        + ["today"]
    fig, ax = plt.subplots(figsize=(max(6, 1.3 * len(labels) + 1), 4))
    x = 0
    if paper:
        ax.bar(x, paper, color="#bab0ac", label="paper")
        x += 1
    ax.bar(x, row["base"], color="#4e79a7", label="measured here")
    level = row["base"]
    for e in steps:
        x += 1
        stop = level * e["value"]
        ax.bar(x, stop - level, bottom=level, color="#59a14f" if stop < level else "#e15759")
        ax.annotate("x%.2f" % e["value"], (x, max(level, stop)), ha="center",
                    va="bottom", fontsize=8)
        level = stop
    ax.bar(x + 1, row["end"], color="#4e79a7")
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=20, ha="right", fontsize=7)
    return figures.finish(fig, ax, out_stem, row["text"], "claim's ratio")


def _n(value, fmt="%.2f"):
    return fmt % value if _finite(value) else "-"


def _iv(low, high):
    return "%.2f-%.2f" % (low, high) if _finite(low) and _finite(high) else "-"


def report_blocks(plan, result, bed, pngs):
    blocks = [("h1", "Why the numbers differ: each claim taken apart"),
              ("p", "2021 here: %s. Today: %s. Each rung changes one factor; its effect is the "
                    "claim's ratio after / before with the 95%% interval of the paired "
                    "bootstrap (rounds interleaved, %d repeat(s)). The interaction is today / "
                    "(2021 x the path's effects): what one factor at a time does not explain."
                    % (result["base"], result["end"], plan.repeats))]
    blocks += setup_text.setup_section(bed)
    if result["left_out"]:
        blocks += [("p", "Factors left out here:"),
                   ("list", ["%s: %s" % kv for kv in result["left_out"].items()])]
    blocks.append(("h2", "Claims"))
    for row in result["claims"]:
        blocks += claim_blocks(row, pngs.get(row["id"]))
        for name, lad in row["ladders"].items():
            blocks += ladder_blocks(row, lad, pngs.get((row["id"], name)))
    if result["system_effects"]:
        blocks += [("h2", "Each factor within one framework"),
                   ("p", "A rung's effect on a system-mode's own paper-scale execution time: "
                         "the same framework on the same nodes, a fair comparison even where "
                         "nodes share cores."),
                   ("table", ["rung", "benchmark", "system", "effect", "interval"],
                    [[e["rung"], e["benchmark"], e["system"], _n(e["value"]),
                      _iv(e["low"], e["high"])] for e in result["system_effects"]])]
    bad = [l for l in result["levels"] if not l["ok"]]
    blocks += [("h2", "Levels applied"),
               ("p", "%d process(es) recorded the level of an environment factor; %s."
                % (len(result["levels"]), "every one as planned" if not bad else
                   "**%d did not**: %s" % (len(bad), "; ".join(
                       "%s %s: %s planned, %s recorded" % (l["cell"], l["process"],
                                                          l["planned"], l["recorded"])
                       for l in bad[:5]))))]
    return blocks


def claim_blocks(row, png):
    judged = "" if row["comparable"] else (
        " The nodes share cores or their CPUs are emulated: this cross-framework ratio is "
        "not comparable to the paper's; the factors' effects within a framework (below) are.")
    rows = [["paper", _n(row["paper"]), "", ""],
            ["2021 here", _n(row["base"]), _iv(row["base_low"], row["base_high"]),
             row.get("base_verdict") or ""]]
    rows += [[e["rung"] + (" (%s)" % e["side"] if e["side"] != "path" else ""),
              "x" + _n(e["value"]) if _finite(e["value"]) else "-", _iv(e["low"], e["high"]),
              e["why"]] for e in row["effects"]]
    chained = _finite(row["interaction_low"]) and \
        abs(row["interaction_low"] - 1) < 1e-9 and abs(row["interaction_high"] - 1) < 1e-9
    rows += [["interaction (remainder)", "x" + _n(row["interaction"]),
              _iv(row["interaction_low"], row["interaction_high"]),
              "1 by construction: the rungs chain, no setting measures the factors apart"
              if chained else ""],
             ["today", _n(row["end"]), _iv(row["end_low"], row["end_high"]),
              row.get("end_verdict") or ""]]
    blocks = [("h3", row["text"]), ("p", "**%s**.%s" % (row["sentence"], judged)),
              ("table", ["", "value", "95% interval", "verdict / note"], rows)]
    if png:
        blocks.append(("img", png, "Waterfall: %s" % row["text"]))
    return blocks


def ladder_blocks(row, lad, png):
    most = lad["most"]
    said = ("it moved most at %s: x%.2f [%s]" % (most["rung"], most["value"],
                                                 _iv(most["low"], most["high"]))
            if most else "no step of it could be measured")
    blocks = [("p", "**%s, level by level** (the other factors at 2021's): %s." % (
        lad["text"], said)),
        ("table", ["level", "claim's ratio", "95% interval"],
         [[l["name"], _n(l["value"]), _iv(l["low"], l["high"])] for l in lad["levels"]])]
    if png:
        blocks.append(("img", png, "%s against %s" % (row["text"], lad["text"])))
    return blocks


def moves(run_path):
    """claim id -> "what moves it" for the main report, from an explain result in the run's
    folder (explain.json, copied there by invoke explain --run)."""
    path = Path(run_path) / FILE
    if not path.is_file():
        return {}
    rows = explain_result.read(path)["claims"]
    return {r["id"]: r["sentence"] for r in rows}
