"""The paper's claims (analysis/reference/paper.yml) beside the measured values, with a verdict
each: agrees, disagrees, or not measured."""
from pathlib import Path

import yaml

REFERENCE = Path(__file__).resolve().parent / "reference" / "paper.yml"
PAPER_BENCHMARKS = ["lenet5-cifar10", "alexnet-cifar10", "resnet18-cifar10",
                    "resnet18-cifar100", "resnet50-cifar10", "resnet50-cifar100"]


def load_reference(path=REFERENCE):
    return yaml.safe_load(Path(path).read_text())


def evaluate(groups, reference=None):
    """One row per claim: id, text, section, paper, measured, tolerance, verdict, basis."""
    reference = reference or load_reference()
    tolerance = reference.get("default_tolerance", 0.25)
    execution = _values(groups, "execution_seconds")
    communication = _values(groups, "communication_total")
    rows = [ratio_claim(c, execution, PAPER_BENCHMARKS, tolerance)
            for c in reference.get("headline", [])]
    for claim in reference.get("sections", []):
        rows.append(_section_claim(claim, execution, tolerance))
    table_v = reference.get("table_v", {})
    for claim in table_v.get("claims", []):
        rows.append(_table_v_claim(claim, communication, table_v["benchmarks"], tolerance))
    return rows


def _values(groups, column):
    """(benchmark, system) -> value, for groups with at least one succeeded repeat."""
    ok = groups[groups.succeeded > 0]
    return {(r.benchmark, r.system): getattr(r, column) for r in ok.itertuples()}


def ratio_claim(claim, values, benchmarks, default_tol):
    tol = claim.get("tolerance", default_tol)
    ratios = {b: values[(b, claim["numerator"])] / values[(b, claim["denominator"])]
              for b in benchmarks
              if (b, claim["numerator"]) in values and (b, claim["denominator"]) in values}
    row = _row(claim, claim["value"], tol)
    if not ratios:
        return dict(row, verdict="not measured", basis="no benchmark with both system-modes")
    how = claim.get("aggregate", "mean")
    measured = max(ratios.values()) if how == "max" else sum(ratios.values()) / len(ratios)
    agrees = abs(measured / claim["value"] - 1) <= tol
    basis = "%s of %s/%s over %d of %d benchmark(s): %s" % (
        how, claim["numerator"], claim["denominator"], len(ratios), len(benchmarks),
        ", ".join("%s %.2f" % (b, r) for b, r in ratios.items()))
    return dict(row, measured=measured, verdict="agrees" if agrees else "disagrees",
                basis=basis)


def _section_claim(claim, values, default_tol):
    if "value" in claim:
        return ratio_claim(claim, values, claim["benchmarks"], default_tol)
    benchmark = claim["benchmarks"][0]
    here = {s: v for (b, s), v in values.items() if b == benchmark}
    row = _row(claim, None, None)
    if "fastest" in claim:
        return _order(row, here, claim["fastest"], lambda s, v: v == min(here.values()),
                      "fastest")
    slow = claim["slower_than_all_others"]
    others = [v for s, v in here.items() if s not in slow]
    return _order(dict(row, paper="slowest: " + ", ".join(slow)), here, slow,
                  lambda s, v: others and all(v > o for o in others), "slower than the others",
                  need_all=True)


def _table_v_claim(claim, values, benchmarks, default_tol):
    means = {}
    for system in {s for (b, s) in values}:
        found = [values[(b, system)] for b in benchmarks if (b, system) in values]
        if found:
            means[system] = sum(found) / len(found)
    if "value" in claim:
        pooled = {("table-v", s): v for s, v in means.items()}
        return ratio_claim(claim, pooled, ["table-v"], default_tol)
    here = {s: v for s, v in means.items() if s in claim["among"]}
    return _order(_row(claim, None, None), here, claim["least"],
                  lambda s, v: v == min(here.values()), "least communication")


def _order(row, values, systems, holds, what, need_all=False):
    systems = [systems] if isinstance(systems, str) else systems
    if row.get("paper") is None:
        row["paper"] = "%s: %s" % (what, ", ".join(systems))
    if not values or any(s not in values for s in systems) or len(values) < 2:
        return dict(row, verdict="not measured",
                    basis="measured: %s" % (", ".join(sorted(values)) or "nothing"))
    ok = [holds(s, values[s]) for s in systems]
    agrees = all(ok) if need_all else any(ok)
    ranking = ", ".join("%s %.3g" % (s, v) for s, v in sorted(values.items(), key=lambda i: i[1]))
    return dict(row, measured=ranking, verdict="agrees" if agrees else "disagrees",
                basis="fastest first: " + ranking)


def _row(claim, paper, tolerance):
    return {"id": claim["id"], "text": claim["text"], "section": claim.get("section", ""),
            "paper": paper, "measured": None, "tolerance": tolerance}
