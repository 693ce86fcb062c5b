"""The ledger of every analysed run (contract/ledger.py): add a run from its folder once its
analysis is written, and read back each claim's measurements across runs, machines and
stacks, pooled.

Pooling: each run's claim is a ratio with a 95% interval; on the log scale its standard error
is the interval's width / (2 x 1.96). The runs of one stack are pooled by a random-effects
meta-analysis (DerSimonian and Laird 1986, by statsmodels' combine_effects, tau^2 truncated at
0 as they define it), which gives the pooled ratio,
its interval, tau^2 (the variance between runs beyond their own) and I^2 (the share of the
spread that is between runs); Cochran's Q test says when the runs disagree more than their
intervals allow (p < 0.05). The pooled interval is judged against the claim's band as one run's
is (analysis/claims.py band_verdict)."""
import json
import math
import sqlite3
import time
from pathlib import Path

import numpy as np
import pandas as pd

from contract import analysis_folder, ledger as schema, manifest as manifests
from contract.errors import UserError
from contract.runfolder import ANALYSIS, RunFolder

from . import claims, testbed

Z95 = 1.959964
DISAGREE_P = 0.05


def connect(path):
    """The ledger at `path`, made with this version's schema where new; one of another
    version is refused (a UserError), never read or written. A folder is a ledger's text
    export (export()), read into memory."""
    path = Path(path)
    if path.is_dir():
        return _from_export(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(str(path))
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if not tables:
        with db:
            for name, columns in schema.TABLES.items():
                db.execute("CREATE TABLE %s (%s)" % (name, columns))
            db.execute("INSERT INTO meta VALUES ('schema_version', ?)",
                       (str(schema.SCHEMA_VERSION),))
        return db
    found = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() \
        if "meta" in tables else None
    if found is None or found[0] != str(schema.SCHEMA_VERSION):
        db.close()
        raise UserError("%s is a ledger of schema version %s; this version reads %d"
                        % (path, found[0] if found else "unknown", schema.SCHEMA_VERSION),
                        "give another --ledger, or use the package version that wrote it")
    return db


def add(run_path, ledger_path, source=None, again=False):
    """The run's cells and claims into the ledger, in one transaction (all or nothing);
    returns (run key, "added"), or where the ledger has the run already, (run key, "already"),
    or with `again` (the run analysed anew from its own folder: resumed, or read by a newer
    analysis) its earlier rows replaced, (run key, "replaced"). A run is never counted twice."""
    run_path = Path(run_path)
    refuse_export(ledger_path)
    manifest = RunFolder(run_path).manifest()
    key = schema.run_key(manifest)
    db = connect(ledger_path)
    try:
        there = db.execute("SELECT source FROM runs WHERE run_key=?", (key,)).fetchone()
        if there and not again:
            return key, "already"
        source = there[0] if there else source  # an import's digest stays its provenance
        with db:
            for table in ("claims", "cells", "runs"):
                db.execute("DELETE FROM %s WHERE run_key=?" % table, (key,))
            _insert(db, key, run_path, manifest, source)
        return key, "replaced" if there else "added"
    finally:
        db.close()


def _insert(db, key, run_path, manifest, source):
    db.execute("INSERT INTO runs VALUES (%s)" % ",".join("?" * 15),
               run_row(key, manifest, source or str(run_path)))
    for stack, folder in stack_folders(run_path, manifest):
        db.executemany("INSERT INTO cells VALUES (%s)" % ",".join("?" * 14),
                       cell_rows(key, stack, folder))
        db.executemany("INSERT INTO claims VALUES (%s)" % ",".join("?" * 11),
                       claim_rows(key, stack, folder))


def refuse_export(ledger_path):
    """A text export (a folder) is read as a ledger, never written to."""
    if Path(ledger_path).is_dir():
        raise UserError("%s is a ledger's text export, which is read, not added to"
                        % ledger_path, "add to a .sqlite ledger, then `invoke ledger.export`")


def known(ledger_path, key):
    """Whether the ledger has the run of that key."""
    db = connect(ledger_path)
    try:
        return db.execute("SELECT 1 FROM runs WHERE run_key=?", (key,)).fetchone() is not None
    finally:
        db.close()


def analysed(run_path):
    """Whether the run's analysis has what the ledger reads (this version's claims table)."""
    try:
        stack_folders(Path(run_path), RunFolder(run_path).manifest())
    except UserError:
        return False
    return True


# ---- the text form: what the notebook's measurements are committed as -----------------------

EXPORTED = ("runs", "cells", "claims")
VERSION_FILE = "schema_version.txt"


EXPORT_ORDER = {"runs": "run_key", "cells": "run_key, stack, benchmark, system, nodes, link",
                "claims": "run_key, stack, claim"}  # each table's primary key


def export(ledger_path, folder):
    """The ledger as text git can diff: one CSV per table, rows in key order, and the schema
    version; per-cell summaries, not the runs' raw logs. Returns the folder."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    db = connect(ledger_path)
    try:
        for table in EXPORTED:
            pd.read_sql_query("SELECT * FROM %s ORDER BY %s" % (table, EXPORT_ORDER[table]),
                              db).to_csv(
                folder / ("%s.csv" % table), index=False, float_format="%.10g")
    finally:
        db.close()
    (folder / VERSION_FILE).write_text("%d\n" % schema.SCHEMA_VERSION)
    return folder


def _from_export(folder):
    """An export read into an in-memory ledger; one of another version refused."""
    version = (folder / VERSION_FILE).read_text().strip() if (folder / VERSION_FILE).is_file() \
        else None
    if version != str(schema.SCHEMA_VERSION):
        raise UserError("%s is not a ledger export of schema version %d (%s)"
                        % (folder, schema.SCHEMA_VERSION, version or "no %s" % VERSION_FILE),
                        "give a folder `invoke ledger.export` wrote with this version")
    db = sqlite3.connect(":memory:")
    for name, columns in schema.TABLES.items():
        db.execute("CREATE TABLE %s (%s)" % (name, columns))
    db.execute("INSERT INTO meta VALUES ('schema_version', ?)", (version,))
    for table in EXPORTED:
        # an empty field is NULL in a number column and "" in a text one (a cell's link), as
        # the ledger held them: a NULL link would drop the cell from its setting's group
        columns = _columns(table)
        numbers = [name for name, kind in columns if kind in ("REAL", "INTEGER")]
        rows = pd.read_csv(folder / ("%s.csv" % table), keep_default_na=False,
                           na_values={name: [""] for name in numbers},
                           dtype={name: str for name, kind in columns if kind == "TEXT"})
        rows.to_sql(table, db, if_exists="append", index=False)
    return db


def _columns(table):
    """(name, type) of the table's columns, from its schema in contract/ledger.py."""
    parts = [p.split() for p in schema.TABLES[table].split(",")]
    return [(p[0], p[1]) for p in parts if len(p) >= 2 and not p[0].startswith(("PRIMARY", "("))]


def stack_folders(run_path, manifest):
    """(stack, its analysis folder) of each stack of the run; a UserError where the run has no
    analysis yet."""
    names = manifests.stack_names(manifest)
    top = run_path / ANALYSIS
    found = [(names[0], top)] if len(names) == 1 else [(n, top / n) for n in names]
    missing = [str(f) for _, f in found if not (f / analysis_folder.CLAIMS_TABLE).is_file()]
    if missing:
        raise UserError("run %s has no analysis to add to the ledger (%s)"
                        % (run_path.name, ", ".join(missing)),
                        "run `invoke analyze --run %s` first" % run_path.name)
    return found


def machine(manifest):
    """(CPU model, ISA level, machine class) of the run's first node, as the processes saw it."""
    cpu = next(iter((manifest.get("cpu") or {}).values()), {}) or {}
    model, isa = cpu.get("model") or "unknown CPU", isa_level(cpu.get("isa") or [])
    return model, isa, "%s, %s" % (model, isa)


def run_row(key, manifest, source):
    bed = testbed.describe(manifests.view(manifest, manifests.stack_names(manifest)[0]))
    # the size's default leaves the option None: the run's cells say how many it planned
    repeats = (manifest.get("options") or {}).get("repeats") or \
        1 + max([c.get("repeat", 0) for c in manifest.get("cells") or []], default=0)
    return (key, manifest.get("run_id"), manifest.get("started"), manifest.get("size"),
            repeats, json.dumps(manifests.stack_names(manifest))) + machine(manifest) + (
            json.dumps(manifest.get("kernels") or {}, sort_keys=True),
            bed.get("layout"),
            int(any(d["key"] == "shared_cores" for d in bed.get("deviations", []))),
            json.dumps(manifest.get("contention") or {}, sort_keys=True, default=str), source,
            time.time())


def isa_level(isa):
    """The widest vector extension a CPU has, the part of it that moves TensorFlow's kernels:
    AMX, AVX-512 or AVX2 (or what it names)."""
    for level, prefix in (("AMX", "AMX"), ("AVX-512", "AVX-512"), ("AVX2", "AVX2")):
        if any(flag.startswith(prefix) for flag in isa):
            return level
    return isa[0] if isa else "unknown ISA"


def cell_rows(key, stack, folder):
    groups = pd.read_csv(folder / analysis_folder.GROUPS_TABLE)
    out = []
    for g in groups.itertuples():
        out.append((key, stack, g.benchmark, g.system, int(g.nodes), _text(g.link),
                    int(g.repeats), g.status, int(g.disturbed), _number(g.execution_seconds),
                    _number(g.ci_low), _number(g.ci_high), _number(getattr(g, "pred_low", None)),
                    _number(getattr(g, "pred_high", None))))
    return out


def claim_rows(key, stack, folder):
    table = pd.read_csv(folder / analysis_folder.CLAIMS_TABLE)
    return [(key, stack, c.id, c.kind, _number(c.paper), _number(c.tolerance),
             _number(c.measured), _number(c.low), _number(c.high), _text(c.verdict),
             _text(c.interval_verdict)) for c in table.itertuples()]


def _number(value):
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def _text(value):
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)


# ---- each claim across runs ----------------------------------------------------------------

def measurements(ledger_path):
    """Every measured ratio claim of every run, one row each, with its run's machine."""
    db = connect(ledger_path)
    try:
        return pd.read_sql_query(
            "SELECT c.claim, c.stack, c.kind, c.paper, c.tolerance, c.value, c.low, c.high, "
            "c.verdict, r.run_id, r.run_key, r.size, r.machine_class, r.layout, r.shared_cores "
            "FROM claims c JOIN runs r USING (run_key) ORDER BY c.claim, c.stack, r.started", db)
    finally:
        db.close()


def pooled(rows):
    """The random-effects pooling of one claim's runs (rows: value, low, high, all > 0):
    {runs, value, low, high, tau2, i2, q_p, disagree} on the ratio scale; with one run, that
    run's interval and no heterogeneity."""
    from statsmodels.stats.meta_analysis import combine_effects
    usable = [r for r in rows if _has_interval(r)]
    if not usable:
        return None
    logs = [math.log(r["value"]) for r in usable]
    variances = [((math.log(r["high"]) - math.log(r["low"])) / (2 * Z95)) ** 2 for r in usable]
    if len(usable) == 1:
        return {"runs": 1, "value": usable[0]["value"], "low": usable[0]["low"],
                "high": usable[0]["high"], "tau2": None, "i2": None, "q_p": None,
                "disagree": False}
    with np.errstate(all="ignore"):  # its own arithmetic with a negative tau^2 (below)
        found = combine_effects(np.array(logs), np.array(variances), method_re="dl",
                                use_t=False)
    # DerSimonian and Laird's tau^2 is max(0, (Q - df) / C); statsmodels leaves it negative
    # where Q < df, which would shrink the variances: there it is 0, the fixed-effect model
    tau2 = max(0.0, float(found.tau2))
    with np.errstate(all="ignore"):  # and its other (HKSJ) intervals, not used here
        row = found.summary_frame().loc["random effect" if tau2 > 0 else "fixed effect"]
    q_p = float(found.test_homogeneity().pvalue)
    return {"runs": len(usable), "value": math.exp(row["eff"]),
            "low": math.exp(row["ci_low"]), "high": math.exp(row["ci_upp"]),  # normal, log
            "tau2": tau2, "i2": _i_squared(float(found.q), len(usable) - 1), "q_p": q_p,
            "disagree": q_p < DISAGREE_P}


def _i_squared(q, df):
    """Higgins and Thompson's I^2 = (Q - df) / Q, 0 where Q <= df: runs that agree to
    rounding give a Q of about 0, of either sign, and a ratio of two roundings."""
    return (q - df) / q if q > df else 0.0


def _positive(*values):
    return all(v is not None and v == v and v > 0 for v in values)


def _points_only(rows):
    """Whether rows that pooled() left with nothing had measured ratios (points, low = high)."""
    return any(_positive(r["value"], r["low"], r["high"]) for r in rows)


def _has_interval(row):
    """A measured ratio with an interval of some width: a run of one repeat and no interval
    check gives a point (low = high), whose zero variance would outweigh every other run."""
    return _positive(row["value"], row["low"], row["high"]) and row["high"] > row["low"]


NO_INTERVAL = "not pooled: no run with an interval (one repeat and no interval check each)"


NOT_POOLED = ("not comparable", "not measured")  # a run's verdict that keeps it out


def claims_table(ledger_path, chosen=None):
    """One row per (claim, stack, size, machine class) and, where runs of more than one
    class are in, per (claim, stack, size) over every machine: the runs pooled, those left
    out (not comparable: their nodes shared cores; not measured; a point without an
    interval), the pooled ratio and interval, tau^2, I^2, whether the runs disagree beyond
    their intervals, and the pooled interval's verdict against the claim's band. Sizes are
    kept apart: a smoke run checks the machinery, a verdict or paper run measures. chosen:
    claim ids (None: every one)."""
    rows = measurements(ledger_path)
    if chosen:
        rows = rows[rows.claim.isin(chosen)]
    out = []
    for (claim, stack, size), group in rows.groupby(["claim", "stack", "size"], sort=True):
        first = group.iloc[0]
        parts = [(m, g) for m, g in group.groupby("machine_class")]
        if len(parts) > 1:  # one class's row is already the every-machine one
            parts.append(("every machine", group))
        for machine, part in parts:
            kept = part[~part.verdict.fillna("").str.startswith(NOT_POOLED)]
            found = pooled(kept.to_dict("records"))
            if found is None:
                if _points_only(kept.to_dict("records")):
                    out.append(dict(claim=claim, stack=stack, size=size, machine=machine,
                                    paper=first.paper, runs=0, left_out=len(part),
                                    value=None, low=None, high=None, tau2=None, i2=None,
                                    q_p=None, disagree=False, verdict=NO_INTERVAL))
                continue
            found["left_out"] = len(part) - found["runs"]
            verdict = claims.band_verdict(found["low"], found["high"], first.paper,
                                          first.tolerance) if first.tolerance == \
                first.tolerance and first.paper == first.paper else ""
            partial = kept.verdict.fillna("").str.startswith("partial").sum()
            if partial:  # runs that measured some of the claim's benchmarks: no more here
                verdict = "partial (%d of %d runs measured some of its benchmarks); the " \
                          "pooled interval alone: %s" % (partial, len(kept), verdict)
            if found["disagree"]:
                verdict += " (the runs disagree beyond their intervals)"
            out.append(dict(found, claim=claim, stack=stack, size=size, machine=machine,
                            paper=first.paper, verdict=verdict))
    return pd.DataFrame(out)


def claims_text(ledger_path, chosen=None):
    """Each claim's block: every run's measurement, one row each, grouped by stack, size and
    machine class, then the pooled rows (claims_table)."""
    table = claims_table(ledger_path, chosen)
    if table.empty:
        return "the ledger %s holds no measured claim yet (`invoke analyze` adds each run)" % (
            ledger_path)
    runs = measurements(ledger_path)
    lines = []
    for (claim, stack, size), pools in table.groupby(["claim", "stack", "size"], sort=True):
        lines += ["", "%s under %s, %s size (paper %.3g)" % (claim, stack, size,
                                                             pools.paper.iloc[0]),
                  "machine | run | ratio (95%) | verdict", "--- | --- | --- | ---"]
        mine = runs[(runs["claim"] == claim) & (runs["stack"] == stack) & (runs["size"] == size)]
        for r in mine.sort_values(["machine_class", "run_id"]).itertuples():
            lines.append("%s | %s | %s | %s" % (r.machine_class, r.run_id,
                                               _ratio(r.value, r.low, r.high), r.verdict))
        for r in pools.itertuples():
            lines.append("%s | pooled: %d run(s)%s, tau^2 %s, I^2 %s | %s | %s" % (
                r.machine, r.runs, ", %d left out" % r.left_out if r.left_out else "",
                "-" if r.tau2 is None or r.tau2 != r.tau2 else "%.3g" % r.tau2,
                "-" if r.i2 is None or r.i2 != r.i2 else "%.0f%%" % (100 * r.i2),
                _ratio(r.value, r.low, r.high) if r.runs else "-", r.verdict))
    return "\n".join(lines[1:])


def _ratio(value, low, high):
    if value is None or value != value:
        return "not measured"
    return "%.3g (%.3g-%.3g)" % (value, low, high)


# ---- the intervals' coverage, scored by the full-length runs the ledger holds ----------------

KINDS = (("confidence", "ci_low", "ci_high"), ("prediction", "pred_low", "pred_high"))
SETTING = ("stack", "benchmark", "system", "nodes", "link", "machine_class")


def coverage_table(ledger_path):
    """Per interval kind and machine class: how often the verdict size's 95% intervals held
    what each is about, scored by the paper-size cells of the same setting, stack and machine
    class (each a full-length run, not used to make the interval): the confidence interval of
    the expected time against the mean of those full runs; the prediction of one more run
    against each full run. Rows: kind, machine, n, held, coverage, low, high (Clopper-Pearson
    95%), settings (how many settings had both)."""
    cells = _cells(ledger_path)
    tally = {}
    for key, group in cells.groupby(list(SETTING), sort=True, dropna=False):
        verdict = group[group["size"] == "verdict"]
        full = group[(group["size"] == "paper") & (group.disturbed == 0)].seconds
        if verdict.empty or full.empty:
            continue
        for kind, low, high in KINDS:
            targets = [full.mean()] if kind == "confidence" else list(full)
            for v in verdict.itertuples():
                lo, hi = getattr(v, low), getattr(v, high)
                if lo != lo or hi != hi or lo is None:
                    continue
                entry = tally.setdefault((kind, key[-1]), {"n": 0, "held": 0, "settings": set()})
                entry["n"] += len(targets)
                entry["held"] += sum(lo <= t <= hi for t in targets)
                entry["settings"].add(key[:-1])
    return pd.DataFrame([_proportion(kind, machine, e) for (kind, machine), e in
                         sorted(tally.items())],
                        columns=["kind", "machine", "n", "held", "coverage", "low", "high",
                                 "settings"])


def _cells(ledger_path):
    db = connect(ledger_path)
    try:
        return pd.read_sql_query(
            "SELECT c.*, r.size, r.machine_class FROM cells c JOIN runs r USING (run_key) "
            "WHERE c.status = 'succeeded' AND c.seconds IS NOT NULL "
            "AND NOT coalesce(r.shared_cores, 0)", db)  # shared cores: not this machine's time
    finally:
        db.close()


def _proportion(kind, machine, entry):
    from statsmodels.stats.proportion import proportion_confint
    low, high = proportion_confint(entry["held"], entry["n"], alpha=0.05, method="beta")
    return {"kind": kind, "machine": machine, "n": entry["n"], "held": entry["held"],
            "coverage": entry["held"] / float(entry["n"]), "low": float(low),
            "high": float(high), "settings": len(entry["settings"])}


def coverage_text(ledger_path, machine=None):
    """The coverage as sentences (of one machine class, or all); says so where the ledger has
    no verdict run beside a paper-size one of the same setting."""
    try:
        table = coverage_table(ledger_path) if Path(ledger_path).exists() else pd.DataFrame()
    except UserError as exc:  # another version's ledger: the report is still made
        return "Interval coverage: the ledger %s could not be read (%s)" % (ledger_path,
                                                                           exc.cause)
    if machine is not None and not table.empty:
        table = table[table.machine == machine]
    if table.empty:
        return ("Interval coverage: not yet measured%s (the ledger %s holds no verdict-size "
                "run beside a paper-size run of the same setting, stack and machine class)"
                % (" on %s" % machine if machine else "", ledger_path))
    return "Interval coverage from the ledger (nominal 95%%): %s." % "; ".join(
        "%s on %s: %d of %d held, %.0f%% (95%% %.0f-%.0f%%; %d setting(s))" % (
            r.kind, r.machine, r.held, r.n, 100 * r.coverage, 100 * r.low, 100 * r.high,
            r.settings) for r in table.itertuples())


# ---- the report's page: this run beside the ledger's earlier ones --------------------------

BESIDE_HEADING = "This run beside the ledger's earlier runs"

def beside_blocks(ledger_path, rows, manifest):
    """The report's section: each claim this run measured beside the ledger's earlier runs of
    the same stack and size (this run is added after its report is made: not among them),
    pooled as `invoke ledger.claims` pools them."""
    head = [("h2", BESIDE_HEADING)]
    stack, size = manifests.stack_names(manifest)[0], manifest.get("size")
    try:
        earlier = measurements(ledger_path) if Path(ledger_path).exists() else pd.DataFrame()
    except UserError as exc:
        return head + [("p", "The ledger %s could not be read (%s)." % (ledger_path, exc.cause))]
    if not earlier.empty:
        earlier = earlier[(earlier["stack"] == stack) & (earlier["size"] == size) &
                          (earlier["run_id"] != manifest.get("run_id"))]
    table, points = [], 0
    for row in rows:
        mine = earlier[earlier["claim"] == row["id"]] if not earlier.empty else earlier
        kept = mine[~mine.verdict.fillna("").str.startswith(NOT_POOLED)] if len(mine) else mine
        records = kept.to_dict("records")
        found = pooled(records) if records else None
        points += not found and _points_only(records)
        if found:
            table.append([row["id"], _ratio(row.get("measured"), row.get("low"), row.get("high")),
                          "%d (%d machine class(es))" % (found["runs"],
                                                         kept.machine_class.nunique()),
                          _ratio(found["value"], found["low"], found["high"]),
                          "-" if found["i2"] is None else "%.0f%%" % (100 * found["i2"]),
                          "yes" if found["disagree"] else "no"])
    if not table and points:
        return head + [("p", "The ledger (%s) holds earlier runs of stack %s at the %s size "
                             "that measured %d of these claims, each as a point (one repeat "
                             "and no interval check): listed by `invoke ledger.claims`, not "
                             "pooled (docs/methodology.md, \"Pooling runs\")."
                        % (ledger_path, stack, size, points))]
    if not table:
        return head + [("p", "The ledger (%s) holds no earlier run of stack %s at the %s size "
                             "with these claims measured: `invoke ledger.claims` will pool "
                             "this run with the next ones." % (ledger_path, stack, size))]
    return head + [("p", "Each claim this run measured, beside the earlier runs of stack %s at "
                         "the %s size in the ledger (%s), pooled by random effects "
                         "(docs/methodology.md, \"Pooling runs\"); `invoke ledger.claims` shows "
                         "them run by run and by machine class." % (stack, size, ledger_path)),
                   ("table", ["claim", "this run", "earlier runs", "their pooled ratio (95%)",
                              "I^2", "they disagree beyond their intervals"], table)]
