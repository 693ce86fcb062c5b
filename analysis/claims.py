"""The paper's claims (analysis/reference/paper.yml) beside the measured values, each with a
95% confidence interval of the quantity the claim states (a setting's expected paper-length
time, or the ratio of two: analysis/stats.py expected_time) and a verdict, the test of that
interval against the band, the paper's value x/ (1 + tolerance), symmetric in log space
("2.65x slower" and "0.38x as fast" judged alike):

  reproduced      the whole interval lies inside the band
  not reproduced  the whole interval lies outside it
  inconclusive    the interval straddles an edge of the band (or the values are below the
                  floor); the basis says about how many repeats would likely decide it
  partial (k of n)  a claim averaged over n benchmarks was measured on only k of them
  not comparable  the setup cannot support the claim (nodes sharing cores); value still shown
  not measured    no measurement

Beside it, for a ratio claim, the direction alone ("TensorFlow slower"): holds, contradicted
or unclear by the same interval against 1; not judged where the verdict is partial or not
comparable (the measured part's direction is in the basis). A claim averaged over benchmarks
takes the geometric mean of the per-benchmark ratios (the paper does not say how it averaged;
the arithmetic mean is in the basis). Every row names the deviations of the setup from the
paper's that bear on it (testbed.py).
"""
import functools
import re
from pathlib import Path

import numpy as np
import yaml

import registry
from contract import paper

from . import stats
from .tidy import PAPER_STEPS

REFERENCE = Path(__file__).resolve().parent / "reference" / "paper.yml"
PAPER_BENCHMARKS = list(paper.BENCHMARKS)  # Table III, in its order
# which deviations of the setup bear on which kind of claim; any claim that compares
# frameworks' times is "not comparable" on nodes that share cores or whose CPUs are emulated
BEARING = {
    "execution": ["shared_cores", "sharing_unsure", "emulated_cpu", "cpu", "threads", "nodes",
                  "memory", "versions", "python", "link", "data", "page_cache", "steps",
                  "epochs"],
    "communication": ["shared_cores", "sharing_unsure", "emulated_cpu", "threads", "nodes",
                      "versions", "link", "steps"],
    "operators": ["shared_cores", "sharing_unsure", "emulated_cpu", "cpu", "threads",
                  "versions", "python"],
    # a worker's memory: its data (a shard, or the whole set), its model, the input cache
    "memory": ["versions", "python", "data", "page_cache", "steps", "epochs"],
}
# deviations that bear on these kinds of claim, and only on the claims that compare one of
# their `systems` (system-modes)
SYSTEM_BEARING = {"tf_kernels": ("execution", "communication", "operators"),
                  "kernels": ("execution", "communication", "operators"),
                  "placement": ("execution", "communication"),
                  "async_communication": ("communication",)}
# deviations that bear on these kinds of claim, and only on the claims about one of their
# `benchmarks`
BENCHMARK_BEARING = {"parameters": ("communication",)}
NOT_COMPARABLE = ("shared_cores", "emulated_cpu")


COVERAGE = REFERENCE.parent / "coverage.yml"


def coverage_text(path=COVERAGE):
    """One sentence: how many of the paper's statements the claims cover, and why the others
    are not (the first words of each `why`, counted)."""
    statements = yaml.safe_load(Path(path).read_text())["statements"]
    encoded = sum(1 for s in statements if s.get("encoded"))
    reasons = {}
    for s in statements:
        if not s.get("encoded"):
            kind = re.split(r"[:(]", s["why"])[0].strip()
            reasons[kind] = reasons.get(kind, 0) + 1
    return ("Coverage of the paper (`analysis/reference/coverage.yml`, each with its quote): "
            "%d statements (sections V-A to VII in full, but for sentences that only point to a "
            "figure or another section; Tables II-V; the abstract's figures and setup facts of "
            "III-A and IV); %d "
            "encoded as claims (above, and the operator claims in their own section); "
            "%d not: %s." % (len(statements), encoded, len(statements) - encoded, "; ".join(
                "%d %s" % (n, k) for k, n in sorted(reasons.items(), key=lambda i: -i[1]))))


def load_reference(path=REFERENCE):
    return yaml.safe_load(Path(path).read_text())


def context_of(reference, testbed=None):
    """What every verdict is judged with: the tolerance, the floors, the setup's deviations."""
    return {"tolerance": reference["default_tolerance"],
            "deviations": (testbed or {}).get("deviations", []),
            "floors": reference.get("floors", {}),
            "memory_margin": reference.get("memory_margin", 0.10)}


def evaluate(groups, reference=None, testbed=None, steady_steps=PAPER_STEPS - 1):
    """One row per claim: id, text, section, paper, measured, low, high, tolerance, verdict,
    basis, deviations."""
    reference = reference or load_reference()
    context = context_of(reference, testbed)
    execution = estimates(groups, "execution_seconds", "execution_boot")
    communication = estimates(groups, "communication_total", "communication_boot",
                              per_step=steady_steps)
    rows = [ratio_claim(c, execution, PAPER_BENCHMARKS, context, "execution")
            for c in reference.get("headline", [])]
    for claim in reference.get("sections", []):  # `measure: communication`: that phase
        rows.append(_section_claim(claim, communication if claim.get("measure") ==
                                   "communication" else execution, context))
    table_v = reference.get("table_v", {})
    for claim in table_v.get("claims", []):
        rows.append(_table_v_claim(claim, communication, table_v["benchmarks"], context))
    peaks = memory_peaks(groups)
    rows += [memory_claim(c, peaks, context) for c in reference.get("memory", [])]
    return rows


def memory_peaks(groups):
    """(benchmark, system) -> a worker's peak RSS (MB), the largest over the group's repeats."""
    if "worker_peak_rss_mb" not in groups:
        return {}
    ok = groups[(groups.succeeded > 0) & groups.worker_peak_rss_mb.notna()]
    return {(r.benchmark, r.system): r.worker_peak_rss_mb for r in ok.itertuples()}


def memory_claim(claim, peaks, context):
    """`more` use more memory than `than` (section V-G): every pair, on every benchmark where
    both ran, ordered by a worker's peak RSS beyond the margin -> reproduced; any pair the other
    way beyond it -> not reproduced; else inconclusive. The paper gives no figure."""
    margin = context["memory_margin"]
    row = _row(claim, "more: " + ", ".join(claim["more"]), margin, context, "memory")
    pairs = [(b, m, t, peaks[(b, m)] / peaks[(b, t)]) for (b, m) in sorted(peaks)
             if m in claim["more"] for t in claim["than"] if (b, t) in peaks]
    systems = set(claim["more"]) | set(claim["than"])
    seen = {s for _, m, t, _ in pairs for s in (m, t)}
    if not pairs:
        return dict(row, verdict="not measured", basis="no benchmark with both sides")
    verdict = "not reproduced" if any(r < 1 / (1 + margin) for *_, r in pairs) else (
        "reproduced" if all(r > 1 + margin for *_, r in pairs) else "inconclusive")
    basis = "peak RSS ratios (more / than), ordered beyond %.0f%%: %s" % (100 * margin, "; ".join(
        "%s %s/%s %.2f" % (b, m, t, r) for b, m, t, r in pairs))
    within = sum(1 for *_, r in pairs if 1 / (1 + margin) <= r <= 1 + margin)
    found = dict(row, measured=min(r for *_, r in pairs), basis=basis, decide=(
        "no number of repeats would decide it (an order of peak memory, no interval: %d of %d "
        "pairs within the %.0f%% margin)" % (within, len(pairs), 100 * margin)
        if verdict == "inconclusive" else ""))
    return _judge(found, verdict, len(seen), len(systems))


def estimates(groups, column, boot_column, per_step=None):
    """(benchmark, system) -> {value, boot, per_step} for groups with a succeeded repeat.
    per_step: the steps the value spans, for the floor check (None: a per-step value)."""
    ok = groups[groups.succeeded > 0]
    out = {}
    for r in ok.to_dict("records"):
        value = r[column]
        if value is None or value != value:
            continue
        boot = r.get(boot_column)
        out[(r["benchmark"], r["system"])] = {
            "value": value, "boot": boot if boot is not None else stats.constant(value),
            "per_step": value / per_step if per_step else value,
            "k": r.get("succeeded", 1), "df": r.get("interval_df") or 0}
    return out


def point(value):
    """A plain number as an estimate without spread (operator profiles without repeats)."""
    return {"value": value, "boot": stats.constant(value), "per_step": value}


def ratio_claim(claim, values, benchmarks, context, kind):
    """numerator / denominator on each benchmark where both ran, aggregated; a denominator
    may be a list (every MXNet mode: each (benchmark, mode) is one ratio)."""
    tol = claim.get("tolerance", context["tolerance"])
    row = _row(claim, claim["value"], tol, context, kind)
    num, dens = claim["numerator"], sides(claim["denominator"])
    pairs = [(b, d) for b in benchmarks for d in dens if (b, num) in values and (b, d) in values]
    if not pairs:
        return dict(row, verdict="not measured", basis="no benchmark with both system-modes")
    floor = context["floors"].get(_floor_key(kind))
    usable = [(b, d) for b, d in pairs if not floor or min(
        values[(b, num)]["per_step"], values[(b, d)]["per_step"]) >= floor]
    below = sorted({b for b, d in pairs if (b, d) not in usable})
    if not usable:
        return dict(row, verdict="inconclusive", basis="below the floor of %g s per step: %s"
                    % (floor, ", ".join(below)))
    ratios = {(b, d): (values[(b, num)]["value"] / values[(b, d)]["value"],
                       values[(b, num)]["boot"] / values[(b, d)]["boot"]) for b, d in usable}
    how = claim.get("aggregate", "geometric mean")
    pick = np.max if how == "max" else geometric_mean
    value = float(pick([r[0] for r in ratios.values()]))
    boot = pick(np.vstack([r[1] for r in ratios.values()]), axis=0)
    low, high = stats.interval(boot)
    arithmetic = "" if how == "max" or len(ratios) < 2 else \
        " (arithmetic mean %.2f)" % np.mean([r[0] for r in ratios.values()])
    done = sorted({b for b, _ in usable})
    basis = "%s of %s/%s over %d of %d benchmark(s)%s: %s%s" % (
        how, num, ",".join(dens), len(done), len(benchmarks), arithmetic,
        ", ".join("%s%s %.2f" % (b, "" if len(dens) == 1 else " " + d, r[0])
                  for (b, d), r in ratios.items()),
        "; below the floor: " + ", ".join(below) if below else "")
    direction = direction_verdict(low, high, claim["value"])
    if len(dens) > 1:
        modes, direction = every_mode(ratios, claim["value"])
        basis += "; " + modes
    verdict = band_verdict(low, high, claim["value"], tol)
    decide = to_decide(low, high, value, band(claim["value"], tol),
                       [values[(b, s)] for b, d in usable for s in (num, d)]) \
        if verdict == "inconclusive" else ""
    basis += "; " + decide if decide else ""
    found = dict(row, measured=value, low=low, high=high, basis=basis, boot=boot,
                 direction=direction, decide=decide)
    return _judge(found, verdict, len(done), len(benchmarks))


def sides(named):
    """A claim's side as a list: one system-mode, or several (every mode of a framework)."""
    return list(named) if isinstance(named, (list, tuple)) else [named]


def every_mode(ratios, paper):
    """For a claim over several modes ("in every training mode"): each (benchmark, mode)'s
    direction by its 95% interval; the claim's direction holds only if it holds for every one,
    is contradicted if any one is. (basis text, direction)."""
    found = {key: direction_verdict(*stats.interval(boot), paper)
             for key, (_, boot) in ratios.items()}
    words = set(found.values())
    direction = "contradicted" if "contradicted" in words else (
        "holds" if words == {"holds"} else "unclear")
    return "in every mode: %s" % ", ".join(
        "%s %s %s" % (b, d, word) for (b, d), word in found.items()), direction


def to_decide(low, high, value, edges, estimates):
    """What would likely decide an inconclusive interval: about how many repeats of each cell,
    the spread staying as measured (stats.repeats_to_decide)."""
    k = min(int(e.get("k") or 1) for e in estimates)
    df = min(int(e.get("df") or 0) for e in estimates)
    if not df:
        return "run-to-run variation not measured: --repeats 3 or more would measure it"
    more = stats.repeats_to_decide(low, high, value, edges, k, df)
    if more is None:
        return ("no number of repeats would likely decide it (the value lies %s the band's "
                "edge)" % ("on" if value in edges else "too near"))
    return "about %d repeats of each cell (now %d) would likely decide it" % (more, k)


def geometric_mean(values, axis=None):
    """The mean of ratios that treats x and 1/x alike: exp of the mean log (one ratio: itself,
    whatever its sign)."""
    values = np.asarray(values, dtype=float)
    if len(values) == 1:
        return values[0] if axis is not None else float(values[0])
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.exp(np.mean(np.log(values), axis=axis))


def band(paper, tolerance):
    """(low, high) of the tolerance band: paper / (1 + tol) to paper x (1 + tol)."""
    return paper / (1 + tolerance), paper * (1 + tolerance)


def band_verdict(low, high, paper, tolerance):
    """reproduced / not reproduced / inconclusive: the interval against the band."""
    if low != low or high != high:
        return "not measured"
    lo, hi = band(paper, tolerance)
    if lo <= low and high <= hi:
        return "reproduced"
    if high < lo or low > hi:
        return "not reproduced"
    return "inconclusive"


def direction_verdict(low, high, paper):
    """Whether the ratio lies on the paper's side of 1 (the numerator slower where the paper's
    value is over 1): holds, contradicted, or unclear (the interval holds 1)."""
    if low != low or high != high or paper == 1:
        return ""
    above = paper > 1
    if (low > 1) if above else (high < 1):
        return "holds"
    if (high < 1) if above else (low > 1):
        return "contradicted"
    return "unclear"


def _judge(row, verdict, measured, of):
    """The interval's verdict, unless the setup cannot support the claim or only some of its
    benchmarks were measured; the interval's own verdict then stays in the basis (and in
    `interval_verdict`, which a comparison of two runs reads)."""
    row = dict(row, interval_verdict=verdict)
    seen = ", direction %s" % row["direction"] if row.get("direction") else ""
    if any(d["key"] in NOT_COMPARABLE for d in row["deviation_list"]):  # partial stays seen
        return dict(row, verdict="not comparable" + (" (partial, %d of %d)" % (measured, of)
                                                      if measured < of else ""),
                    direction=_not_judged(row, measured, of),
                    basis="%s; the interval alone: %s%s" % (row["basis"], verdict, seen))
    if measured < of:
        return dict(row, verdict="partial (%d of %d)" % (measured, of),
                    direction=_not_judged(row, measured, of),
                    basis="%s; on those: %s%s" % (row["basis"], verdict, seen))
    return dict(row, verdict=verdict)


def _not_judged(row, measured, of):
    """The direction column of a claim the run cannot judge: an average over benchmarks seen
    on some of them only (V-A makes LeNet-5 the exception to its ranking of the frameworks),
    or a setup that cannot support it. What the measured part said stays in the basis."""
    if not row.get("direction"):
        return ""
    return "not judged" + (" (%d of %d)" % (measured, of) if measured < of else "")


def _floor_key(kind):
    return {"communication": "communication_s_per_step",
            "operators": "operator_s_per_step"}.get(kind)


def _section_claim(claim, values, context):
    if "value" in claim:
        return ratio_claim(claim, values, claim["benchmarks"], context,
                           claim.get("measure", "execution"))
    benchmark = claim["benchmarks"][0]
    here = {s: v for (b, s), v in values.items() if b == benchmark}
    row = _row(claim, None, None, context, "execution")
    if "fastest" in claim:
        return _order(row, here, [claim["fastest"]], "fastest")
    if "faster" in claim:  # one system-mode against the named others only
        pair = {s: v for s, v in here.items() if s in [claim["faster"]] + claim["than"]}
        if len(pair) < 1 + len(claim["than"]):
            pair = {}  # both sides or nothing: "not measured", never a one-sided order
        return _order(dict(row, paper="faster: %s than %s" % (claim["faster"], ", ".join(
            claim["than"]))), pair, [claim["faster"]], "fastest")
    return _order(dict(row, paper="slowest: " + ", ".join(claim["slower_than_all_others"])),
                  here, claim["slower_than_all_others"], "slower than the others")


def _table_v_claim(claim, values, benchmarks, context):
    pooled = {}
    for system in {s for (b, s) in values}:
        found = [values[(b, system)] for b in benchmarks if (b, system) in values]
        if found:
            pooled[("table-v", system)] = {
                "value": float(np.mean([f["value"] for f in found])),
                "boot": np.mean([f["boot"] for f in found], axis=0),
                "per_step": min(f["per_step"] for f in found), "count": len(found),
                # its repeats and degrees of freedom: the fewest of the benchmarks it averages
                "k": min(f.get("k") or 1 for f in found),
                "df": min(f.get("df") or 0 for f in found)}
    if "value" in claim:
        row = ratio_claim(claim, pooled, ["table-v"], context, "communication")
        counts = [pooled[("table-v", claim[k])]["count"] for k in ("numerator", "denominator")
                  if ("table-v", claim[k]) in pooled]
        partial = counts and min(counts) < len(benchmarks)
        if partial and row["verdict"] == "not comparable":
            row = dict(row, verdict="not comparable (partial, %d of %d)" % (
                min(counts), len(benchmarks)),
                direction=_not_judged(row, min(counts), len(benchmarks)))
        elif partial and "interval_verdict" in row:  # inconclusive too: partial is seen first
            row = _judge(row, row["interval_verdict"], min(counts), len(benchmarks))
        return row
    here = {s: v for (b, s), v in pooled.items() if s in claim["among"]}
    return _order(_row(claim, None, None, context, "communication"), here, [claim["least"]],
                  "least communication")


def _order(row, values, systems, what):
    """`systems` are claimed to be the smallest ('fastest', 'least') or, for 'slower than the
    others', the largest. Each pair (claimed, other) is judged by the interval of their
    ratio: every pair separated the claimed way -> reproduced; any pair separated the other
    way -> not reproduced; else inconclusive."""
    if row.get("paper") is None:
        row["paper"] = "%s: %s" % (what, ", ".join(systems))
    others = [s for s in values if s not in systems]
    if not others or any(s not in values for s in systems):
        return dict(row, verdict="not measured",
                    basis="measured: %s" % (", ".join(sorted(values)) or "nothing"))
    largest = what == "slower than the others"
    separated, against = [], []
    for claimed in systems:
        for other in others:
            low, high = stats.interval(values[other]["boot"] / values[claimed]["boot"])
            if largest:
                low, high = 1 / high, 1 / low
            separated.append(low > 1)
            against.append(high < 1)
    verdict = "not reproduced" if any(against) else (
        "reproduced" if all(separated) else "inconclusive")
    ranking = ", ".join("%s %.3g" % (s, v["value"]) for s, v in
                        sorted(values.items(), key=lambda i: i[1]["value"]))
    found = dict(row, measured=ranking, basis="smallest first: %s; pairs separated by their "
                 "95%% intervals: %d of %d" % (ranking, sum(separated), len(separated)))
    return _judge(found, verdict, 1, 1)


def _bears(deviation, claim, kind):
    if deviation["key"] in BENCHMARK_BEARING:
        return kind in BENCHMARK_BEARING[deviation["key"]] and bool(
            set(deviation.get("benchmarks") or ()) & set(claim.get("benchmarks") or
                                                         PAPER_BENCHMARKS))
    if deviation["key"] in SYSTEM_BEARING:
        return kind in SYSTEM_BEARING[deviation["key"]] and bool(
            set(deviation.get("systems") or ()) & claim_systems(claim))
    return deviation["key"] in BEARING[kind]


def claim_systems(claim):
    """The system-modes a claim compares: every one for a ranking ("the fastest", "slower
    than the others"), which measures them all."""
    if claim.get("fastest") or claim.get("slower_than_all_others"):
        return set(registry.systems())
    found = {s for k in ("numerator", "denominator", "faster", "least") if claim.get(k)
             for s in sides(claim[k])}
    return found | set(claim.get("more") or ()) | set(claim.get("than") or ()) | \
        set(claim.get("among") or ())


def _row(claim, paper, tolerance, context, kind):
    bearing = [d for d in context["deviations"] if _bears(d, claim, kind)]
    text = claim["text"] + (" (the package's reading: %s)" % claim["reading"]
                            if claim.get("reading") else "")
    return {"id": claim["id"], "text": text, "section": claim.get("section", ""),
            "paper": paper, "measured": None, "low": None, "high": None,
            "tolerance": tolerance, "kind": kind, "deviation_list": bearing,
            # one key once: a deviation of two system-modes (placement) is two entries
            "deviations": "; ".join(dict.fromkeys(d["key"] for d in bearing))}



# ---- short words for a claim (the forest plots, what would decide) ----------------------

SHORT_NETWORKS = {"lenet5": "LeNet-5", "alexnet": "AlexNet", "resnet18": "ResNet-18",
                  "resnet50": "ResNet-50"}


def reference_claims():
    """Every claim of the reference, in the paper's order: the headline, the sections', Table
    V's, memory's and the operators'."""
    found = load_reference()
    return found.get("headline", []) + found.get("sections", []) + \
        (found.get("table_v") or {}).get("claims", []) + found.get("memory", []) + \
        found.get("operators", [])


@functools.lru_cache(maxsize=1)
def reference_by_id():
    return {c["id"]: c for c in reference_claims()}


def system_words(system):
    """'TensorFlow sync', 'PyTorch' (a framework of one mode: its name alone)."""
    entry = registry.system(system)
    modes = [s for s in registry.systems().values() if s["framework"] == entry["framework"]]
    name = registry.frameworks()[entry["framework"]]["name"]
    return name if len(modes) == 1 else "%s %s" % (name, entry["mode"])


def benchmark_words(benchmarks):
    """'LeNet-5', 'ResNet-18' (both of its datasets), 'ResNet-50/C100'."""
    by_network = {}
    for benchmark in benchmarks:
        network, dataset = benchmark.split("-", 1)
        by_network.setdefault(network, []).append(dataset)
    every = {}
    for benchmark in PAPER_BENCHMARKS:
        network, dataset = benchmark.split("-", 1)
        every.setdefault(network, []).append(dataset)
    datasets_seen = {d for ds in by_network.values() for d in ds}
    if len(by_network) > 1 and len(datasets_seen) == 1 and all(
            n.startswith("resnet") for n in by_network):
        return "ResNets/C%s" % datasets_seen.pop().replace("cifar", "")
    words = []
    for network, datasets in by_network.items():
        name = SHORT_NETWORKS.get(network, network)
        words += [name] if sorted(datasets) == sorted(every.get(network, [])) else [
            "%s/C%s" % (name, d.replace("cifar", "")) for d in datasets]
    return ", ".join(words)


def short_label(claim):
    """(id, words a reader can scan): 'LeNet-5: MXNet sync / TensorFlow sync' (numerator /
    denominator), 'Table V comm.: ...'; an order or memory claim: its own text."""
    where = claim.get("benchmarks")
    place = "6 benchmarks" if not where else benchmark_words(where)
    if claim.get("category"):
        place += " " + claim["category"].replace("_", " ")
    elif claim.get("measure") == "communication" or "comm" in claim["id"]:
        place += " comm."
    if claim["id"].startswith("comm_"):
        place = "Table V comm."
    num, den = claim.get("numerator"), claim.get("denominator")
    if num and den:
        dens = sides(den)
        what = "%s / %s" % (system_words(num), system_words(dens[0]) if len(dens) == 1 else
                            registry.frameworks()[registry.system(dens[0])["framework"]]["name"])
    else:  # an order or memory claim: its own words are short
        return claim["id"], claim["text"]
    return claim["id"], "%s: %s" % (place, what)


def label(claim_id):
    """A claim's short words, by id (the id itself where the reference has no such claim)."""
    found = reference_by_id().get(claim_id)
    return short_label(found)[1] if found else claim_id

