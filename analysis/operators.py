"""Operator profiles (paper Figs. 5, 7, 10): raw operator records -> canonical categories
(analysis/operators.yml), a table per benchmark and system-mode, coverage per framework, the
names left in `other`, and the paper's operator claims with verdicts."""
import re
from pathlib import Path

import pandas as pd
import yaml

import registry

TABLE = Path(__file__).resolve().parent / "operators.yml"
# the paper's operator figures: figure -> benchmarks it shows
FIGURES = {"fig5": ["lenet5-cifar10"], "fig7": ["alexnet-cifar10"],
           "fig10": ["resnet18-cifar10", "resnet50-cifar10"]}
NOT_COMPUTE = ("data", "communication", "framework_overhead", "other")


def load_table(path=TABLE):
    raw = yaml.safe_load(Path(path).read_text())
    table = {"categories": raw["categories"], "backward_forms": set(raw["backward_forms"])}
    for framework in registry.frameworks():
        spec = raw.get(framework)
        if spec is None:
            raise ValueError("%s has no rules for %s (registry/systems.yml names it): add its "
                             "operator names" % (path, framework))
        unknown = [c for _, c in spec["rules"] if c not in raw["categories"]]
        if unknown:
            raise ValueError("%s: %s maps to unknown categories %s" % (path, framework, unknown))
        scope = spec.get("backward_scope")
        table[framework] = {"rules": [(re.compile(p), c) for p, c in spec["rules"]],
                            "backward_scope": re.compile(scope) if scope else None}
    return table


def categorize(table, framework, path):
    """The category of one operator path (outermost name first)."""
    spec = table[framework]
    category = None
    for name in reversed(path):
        category = next((c for pattern, c in spec["rules"] if pattern.search(name)), None)
        if category:
            break
    if category is None:
        return "other"
    scope = spec["backward_scope"]
    if scope and category in table["backward_forms"] and any(scope.search(n) for n in path):
        return category + "_backward"
    return category


def categorised(records, table=None):
    """The operator records with a `category` column."""
    table = table or load_table()
    ops = records[records.metric == "operator"].copy()
    if ops.empty:
        return ops.assign(category=[])
    ops["category"] = [categorize(table, f, p) for f, p in zip(ops.framework, ops.op_path)]
    return ops


def category_table(ops, cells):
    """Seconds per step per (benchmark, system, category): per cell, every process's operator
    time (servers included) over the cell's workers; then the mean over repeats (each
    repeat's value kept in `per_repeat`)."""
    if ops.empty:
        return pd.DataFrame(columns=["benchmark", "system", "category", "seconds",
                                     "per_repeat"])
    # keyed by cell id: mapping ids onto a positional index divided nothing (it summed the
    # workers' times)
    workers = cells.set_index("cell_id").workers.clip(lower=1)
    per_cell = ops.groupby(["cell_id", "benchmark", "system", "category"],
                           as_index=False).value.sum()
    per_cell["seconds"] = per_cell.value / per_cell.cell_id.map(workers)
    grouped = per_cell.groupby(["benchmark", "system", "category"]).seconds
    table = grouped.mean().reset_index()
    table["per_repeat"] = grouped.agg(list).values  # the intervals' input (evaluate_claims)
    return table


def coverage(ops):
    """Per framework: operator seconds in a canonical category (not `other`) / all, leaving
    out communication: concurrent KVStore requests and collectives overlap each other and the
    compute, so their summed durations are not operator time (MXNet's would swamp the rest)."""
    rows = []
    for framework, group in ops[ops.category != "communication"].groupby("framework"):
        total = group.value.sum()
        known = group[group.category != "other"].value.sum()
        rows.append({"framework": framework, "operator_ms_per_step": total * 1e3,
                     "coverage": known / total if total else float("nan")})
    return pd.DataFrame(rows)


def unknown_names(ops, limit=15):
    """The operator names left in `other`, most time first, per framework."""
    other = ops[ops.category == "other"].copy()
    if other.empty:
        return pd.DataFrame(columns=["framework", "operator", "ms_per_step"])
    other["operator"] = [p[-1] if len(p) else "" for p in other.op_path]
    table = other.groupby(["framework", "operator"], as_index=False).value.sum()
    table["ms_per_step"] = table.value * 1e3
    table = table.sort_values("ms_per_step", ascending=False)
    return table.groupby("framework").head(limit)[["framework", "operator", "ms_per_step"]]


def overhead(records):
    """Per cell: profiled step / timed step (wall, un-instrumented): the profiler's cost."""
    def per_cell(metric):
        rows = records[(records.metric == metric) & (records.role.isin(["worker", "chief"]))]
        return rows.groupby(["cell_id", "benchmark", "system"]).value.mean()
    profiled, timed = per_cell("profiled_step"), per_cell("wall_step")
    table = pd.concat({"profiled_step": profiled, "timed_step": timed}, axis=1).dropna()
    table["ratio"] = table.profiled_step / table.timed_step
    return table.reset_index()


def evaluate_claims(table, reference=None, testbed=None):
    """The paper's operator claims (reference `operators:`): ratio of one category's time per
    step between two system-modes, with a verdict (analysis/claims.py's rules). A profile
    holds totals, not per-step samples: the interval comes from repeats (a t interval of
    their mean); with one repeat there is none, and the basis says so."""
    from . import claims
    reference = reference or claims.load_reference()
    context = claims.context_of(reference, testbed)
    rows = []
    for claim in reference.get("operators", []):
        here = table[(table.category == claim["category"]) & (table.seconds > 0)]
        values = {(r["benchmark"], r["system"]): _estimate(r) for r in here.to_dict("records")}
        row = claims.ratio_claim(claim, values, claim["benchmarks"], context, "operators")
        repeats = min([len(v["repeats"]) for v in values.values()] or [0])
        if repeats < 2:
            row = dict(row, basis=row["basis"] + "; no interval: one profile per cell")
        rows.append(row)
    return rows


def _estimate(row):
    """A category's time with bootstrap replicates over its repeats."""
    from . import stats
    repeats = row.get("per_repeat")
    repeats = list(repeats) if isinstance(repeats, (list, tuple)) else [row["seconds"]]
    rng = stats.rng_for("%s/%s/%s" % (row["benchmark"], row["system"], row["category"]))
    # the interval of the repeats' mean: what the claim is about
    boot = stats.over_repeats([stats.constant(v) for v in repeats], rng, one_more=False)
    return {"value": row["seconds"], "boot": boot, "per_step": row["seconds"],
            "repeats": repeats, "k": len(repeats), "df": len(repeats) - 1}
