"""The ledger (analysis/ledger.py, contract/ledger.py) on runs with known numbers: a run added
once however often it is given, in one transaction; a ledger of another schema refused with
nothing changed; each claim pooled across runs by the random-effects model, checked against
the DerSimonian-Laird arithmetic done by hand."""
import math
import re
import sqlite3

import pandas as pd
import pytest

from analysis import ledger, report
from contract import ledger as schema
from contract.errors import UserError
from harness.paths import REPO
from selfcheck import known_run

CELLS = [("lenet5-cifar10", "tensorflow-sync", 265.0), ("lenet5-cifar10", "pytorch-sync", 100.0)]


def analysed(tmp_path, run_id, cpu, isa):
    """A run of three repeats (2% apart, so its claims have intervals to pool), analysed."""
    cells = [known_run.cell(b, s, t * (1 + 0.02 * (r - 1)), repeat=r)
             for b, s, t in CELLS for r in range(3)]
    run = known_run.write_run(tmp_path, cells, run_id=run_id, manifest={
        "started": 1.0e9, "cpu": {"node1": {"model": cpu, "isa": isa}}})
    report.build(run, quiet=True)
    return run


def test_a_run_is_added_once_with_its_machine_cells_and_claims(tmp_path):
    path = tmp_path / "ledger.sqlite"
    run = analysed(tmp_path, "a", "AMD EPYC", ["AVX2", "AVX-512F"])
    key, how = ledger.add(run, path)
    assert how == "added" and ledger.add(run, path) == (key, "already")  # not twice
    db = sqlite3.connect(str(path))
    assert db.execute("SELECT repeats FROM runs").fetchall() == [(3,)]  # from its cells
    (machine, runs), = db.execute("SELECT machine_class, count(*) FROM runs").fetchall()
    assert (machine, runs) == ("AMD EPYC, AVX-512", 1)
    cells = db.execute("SELECT system, seconds FROM cells ORDER BY system").fetchall()
    assert [s for s, _ in cells] == ["pytorch-sync", "tensorflow-sync"]
    assert cells[0][1] == pytest.approx(100.0, rel=0.05)
    claims = dict(db.execute("SELECT claim, value FROM claims WHERE value IS NOT NULL"))
    assert claims["tf_sync_vs_pytorch_sync"] == pytest.approx(2.65, rel=0.05)
    # resumed, its cells run again and analysed anew: the new rows in place of the old, once
    table = run / "analysis" / "claims.csv"
    rows = pd.read_csv(table)
    rows["measured"] = rows["measured"].astype(object)  # text for the claims of an order
    rows.loc[rows["id"] == "tf_sync_vs_pytorch_sync", "measured"] = 3.5
    rows.to_csv(table, index=False)
    assert ledger.add(run, path, again=True) == (key, "replaced")
    assert db.execute("SELECT count(*) FROM runs").fetchone() == (1,)
    assert db.execute("SELECT value FROM claims WHERE claim='tf_sync_vs_pytorch_sync'"
                      ).fetchall() == [(3.5,)]


def test_another_schema_is_refused_and_a_failed_add_leaves_nothing(tmp_path):
    path = tmp_path / "ledger.sqlite"
    run = analysed(tmp_path, "a", "AMD EPYC", ["AVX2"])
    (run / "analysis" / "claims.csv").write_text("id,kind\nbroken")  # a column short
    with pytest.raises(Exception):
        ledger.add(run, path)
    db = sqlite3.connect(str(path))
    assert db.execute("SELECT count(*) FROM runs").fetchone() == (0,)  # all or nothing
    db.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    db.commit()
    before = path.read_bytes()
    with pytest.raises(UserError) as refused:
        ledger.add(run, path)
    assert "schema version 99; this version reads %d" % schema.SCHEMA_VERSION in \
        refused.value.cause
    assert path.read_bytes() == before


def test_runs_are_pooled_by_random_effects_as_derived_by_hand():
    """Three runs of a claim: 2.0, 2.5 and 1.2 with log-scale variances 0.01, 0.01, 0.02 (each
    interval exp(log v +- 1.96 sqrt(var))). By hand (DerSimonian-Laird): the fixed-effect mean
    (100 ln 2 + 100 ln 2.5 + 50 ln 1.2) / 250 = 0.6802; Q = 17.99 on 2 df; C = 250 - 22500/250
    = 160; tau^2 = (17.99 - 2) / 160 = 0.0999; I^2 = 15.99 / 17.99 = 0.889; weights
    1 / (var + tau^2); the pooled log ratio 0.6091 (x1.839), se 0.1941."""
    rows = []
    for value, var in ((2.0, 0.01), (2.5, 0.01), (1.2, 0.02)):
        half = 1.959964 * math.sqrt(var)
        rows.append({"value": value, "low": value * math.exp(-half),
                     "high": value * math.exp(half)})
    found = ledger.pooled(rows)
    assert found["runs"] == 3
    assert found["tau2"] == pytest.approx(0.09990, rel=1e-3)
    assert found["i2"] == pytest.approx(0.8888, rel=1e-3)
    assert found["value"] == pytest.approx(math.exp(0.60912), rel=1e-4)
    assert found["low"] == pytest.approx(math.exp(0.60912 - 1.959964 * 0.19412), rel=1e-3)
    assert found["disagree"]  # Q's p = 0.0001: more spread than the intervals allow
    agreeing = ledger.pooled([dict(r, value=2.0, low=r["low"] / r["value"] * 2.0,
                                   high=r["high"] / r["value"] * 2.0) for r in rows])
    assert agreeing["tau2"] == 0.0 and not agreeing["disagree"]
    assert agreeing["value"] == pytest.approx(2.0)
    # two runs equal but for rounding: Q about 0 and of either sign, where (Q - df) / Q
    # would be a ratio of two roundings; I^2 is 0 wherever Q <= df
    for nudge in (1e-12, -1e-12):
        close = ledger.pooled([dict(rows[0], value=2.0, low=1.8, high=2.2),
                               dict(rows[0], value=2.0 * (1 + nudge), low=1.8, high=2.2)])
        assert close["i2"] == 0.0 and close["tau2"] == 0.0
    # a run of one repeat gives a point (low = high): shown, never pooled (zero variance)
    assert ledger.pooled([dict(rows[0], value=2.0, low=2.0, high=2.0)]) is None


def test_each_claim_is_pooled_per_machine_class_and_over_every_machine(tmp_path):
    path = tmp_path / "ledger.sqlite"
    for run_id, cpu, isa in (("a", "AMD EPYC", ["AVX2", "AVX-512F"]),
                             ("b", "AMD EPYC", ["AVX2", "AVX-512F"]),
                             ("c", "Intel Xeon", ["AVX2", "AVX-512F", "AMX-BF16"])):
        run = analysed(tmp_path, run_id, cpu, isa)
        ledger.add(run, path)
        if cpu == "AMD EPYC":
            ledger.add(run, tmp_path / "one-class.sqlite")
    table = ledger.claims_table(path, ["tf_sync_vs_pytorch_sync"])
    assert list(table.machine) == ["AMD EPYC, AVX-512", "Intel Xeon, AMX", "every machine"]
    assert list(table.runs) == [2, 1, 3]
    assert table.value.iloc[-1] == pytest.approx(2.65, rel=0.05)  # three runs of one ratio
    # each run measured one of the claim's benchmarks: pooled, it is no more than partial
    assert table.verdict.iloc[-1].startswith("partial (3 of 3 runs measured some of its")
    text = ledger.claims_text(path, ["tf_sync_vs_pytorch_sync"])
    assert "tf_sync_vs_pytorch_sync under fixture, fixture size" in text
    assert "every machine | pooled: 3 run(s), tau^2 0" in text and "Intel Xeon, AMX | c | " in text
    # one machine class alone: its row is the every-machine one, not written twice
    one = ledger.claims_table(tmp_path / "one-class.sqlite", ["tf_sync_vs_pytorch_sync"])
    assert list(one.machine) == ["AMD EPYC, AVX-512"] and list(one.runs) == [2]


def test_an_archive_is_imported_once_and_a_changed_one_is_refused(tmp_path):
    """Another machine's run comes as its `invoke artifact` archive: imported once (a second
    time refused: a run counts once); the same archive with one byte of one file changed and
    repacked is refused by its SHA256SUMS; a changed byte of the archive itself, by the digest
    its author published, or unpinned by gzip's own check of the whole stream (tarfile alone
unpacks what comes before the damage); a truncated one, so too. The ledger keeps what it
had."""
    import hashlib
    import io
    import tarfile
    from harness.results import artifact
    origin, here = tmp_path / "other-machine", tmp_path / "results"
    analysed(origin, "a", "Intel Xeon", ["AVX2", "AMX-BF16"])
    archive = artifact.build(origin, "a", junit=tmp_path / "none.xml")
    published = hashlib.sha256(archive.read_bytes()).hexdigest()
    path = here / "ledger.sqlite"
    changed = tmp_path / "changed.tar.gz"
    with tarfile.open(str(archive)) as old, tarfile.open(str(changed), "w:gz") as new:
        for member in old.getmembers():
            data = old.extractfile(member).read() if member.isfile() else None
            if member.name.endswith("records.jsonl"):
                data = data.replace(b'"value": 1.0', b'"value": 2.0', 1)
                member.size = len(data)
            new.addfile(member, io.BytesIO(data) if data is not None else None)
    flipped = tmp_path / "flipped.tar.gz"
    data = bytearray(archive.read_bytes())
    data[len(data) // 2] ^= 0xFF
    flipped.write_bytes(bytes(data))
    truncated = tmp_path / "truncated.tar.gz"
    truncated.write_bytes(archive.read_bytes()[:len(data) // 3])
    for bad, digest, said in ((changed, None, "do not match its SHA256SUMS: a/records.jsonl"),
                              (flipped, published, "not the archive published"),
                              (flipped, None, "is damaged: its compressed stream fails gzip"),
                              (truncated, None, "is damaged: its compressed stream fails")):
        with pytest.raises(UserError) as refused:
            artifact.import_run(bad, here, path, digest)
        assert said in refused.value.cause, (bad.name, refused.value.cause)
    key, run = artifact.import_run(archive, here, path, published)
    assert run.parent == here / artifact.IMPORTED and (run / "manifest.json").is_file()
    with pytest.raises(UserError) as twice:
        artifact.import_run(archive, here, path)
    assert "is in %s already: a run is counted once" % path in twice.value.cause
    db = sqlite3.connect(str(path))
    assert db.execute("SELECT run_key, machine_class, source FROM runs").fetchall() == [
        (key, "Intel Xeon, AMX", "%s sha256:%s (pinned)" % (archive.name, published))]
    # analysed again where it was unpacked: its rows replaced, its provenance kept
    assert ledger.add(run, path, again=True) == (key, "replaced")
    assert db.execute("SELECT source FROM runs").fetchone()[0].endswith("(pinned)")
    (tmp_path / "an-export").mkdir()
    with pytest.raises(UserError, match="a ledger's text export"):
        artifact.import_run(archive, tmp_path / "other", tmp_path / "an-export")
    assert not (tmp_path / "other").exists()  # refused before anything was unpacked


def test_coverage_scores_the_verdict_intervals_by_the_full_runs_beside_them(tmp_path):
    """Machine A: two verdict runs of a setting (CI 90-110 and 100-105; predictions 80-120 and
    95-115) and two paper-size runs of it (100 and 112 s, mean 106): the CIs hold the mean 1 of
    2 times, the predictions hold each full run 4 of 4. Machine B has verdict runs only: not
    scored; nor is a run of A whose nodes shared cores. Clopper-Pearson 95%: 1 of 2 is
    1.3-98.7%, 4 of 4 is 39.8-100%."""
    path = tmp_path / "ledger.sqlite"
    db = ledger.connect(path)
    for key, size, machine, shared in (("v1", "verdict", "A", 0), ("v2", "verdict", "A", 0),
                                       ("f1", "paper", "A", 0), ("f2", "paper", "A", 0),
                                       ("v3", "verdict", "B", 0), ("s1", "verdict", "A", 1)):
        db.execute("INSERT INTO runs (run_key, run_id, size, machine_class, shared_cores) "
                   "VALUES (?,?,?,?,?)", (key, key, size, machine, shared))
    cells = {"v1": (100.0, 90, 110, 80, 120), "v2": (103.0, 100, 105, 95, 115),
             "f1": (100.0, None, None, None, None), "f2": (112.0, None, None, None, None),
             "v3": (50.0, 40, 60, 30, 70),
             "s1": (150.0, 140, 160, 130, 170)}  # nodes sharing cores: not scored
    for key, (seconds, ci_low, ci_high, pred_low, pred_high) in cells.items():
        db.execute("INSERT INTO cells VALUES (?,'current','lenet5-cifar10','pytorch-sync',3,'',"
                   "3,'succeeded',0,?,?,?,?,?)",
                   (key, seconds, ci_low, ci_high, pred_low, pred_high))
    db.commit()
    table = ledger.coverage_table(path).set_index("kind")
    assert list(table.machine) == ["A", "A"]
    assert (table.loc["confidence", "held"], table.loc["confidence", "n"]) == (1, 2)
    assert (table.loc["prediction", "held"], table.loc["prediction", "n"]) == (4, 4)
    assert table.loc["confidence", "low"] == pytest.approx(0.0126, abs=1e-4)
    assert table.loc["prediction", "low"] == pytest.approx(0.3976, abs=1e-4)
    assert table.loc["prediction", "high"] == 1.0
    assert "prediction on A: 4 of 4 held, 100% (95% 40-100%; 1 setting(s))" in \
        ledger.coverage_text(path)
    assert "not yet measured on B" in ledger.coverage_text(path, "B")
    # read back from its text export: the same (an empty link is "", not a NULL that would
    # drop the cells from their setting; an export is a folder, read as a ledger)
    assert ledger.coverage_text(ledger.export(path, tmp_path / "evidence")) == \
        ledger.coverage_text(path)


def test_the_report_quotes_the_coverage_its_machine_class_has_in_the_ledger(tmp_path):
    run = analysed(tmp_path, "a", "AMD EPYC", ["AVX2"])
    text = (run / "analysis" / "report.md").read_text()
    assert "Interval coverage: not yet measured on AMD EPYC, AVX2 (the ledger %s holds no" % (
        tmp_path / schema.FILE) in text
    db = ledger.connect(tmp_path / schema.FILE)
    for key, size, (seconds, low, high) in (("v", "verdict", (100.0, 90, 110)),
                                            ("f", "paper", (104.0, None, None))):
        db.execute("INSERT INTO runs (run_key, size, machine_class) VALUES (?,?,?)",
                   (key, size, "AMD EPYC, AVX2"))
        db.execute("INSERT INTO cells VALUES (?,'current','lenet5-cifar10','pytorch-sync',3,'',"
                   "3,'succeeded',0,?,?,?,?,?)", (key, seconds, low, high, low, high))
    db.commit()
    text = report.build(run, quiet=True)["report"].read_text()
    assert "Interval coverage from the ledger (nominal 95%): confidence on AMD EPYC, AVX2: 1 " \
        "of 1 held" in text


def test_the_text_export_reads_back_as_the_ledger_and_is_stable(tmp_path):
    """What a notebook entry commits: the ledger as CSVs in key order, which every ledger
    reader takes as --ledger, giving the same tables; exported again, the same bytes; added
    to, refused (it is read, not written)."""
    path = tmp_path / "ledger.sqlite"
    for run_id, cpu in (("a", "AMD EPYC"), ("0012", "Intel Xeon")):  # text, not the number 12
        ledger.add(analysed(tmp_path, run_id, cpu, ["AVX2"]), path)
    folder = ledger.export(path, tmp_path / "evidence")
    assert "Intel Xeon, AVX2 | 0012 |" in ledger.claims_text(folder)
    assert sorted(p.name for p in folder.iterdir()) == [
        "cells.csv", "claims.csv", "runs.csv", "schema_version.txt"]
    assert ledger.claims_text(folder) == ledger.claims_text(path)
    again = ledger.export(folder, tmp_path / "again")
    for name in ("runs.csv", "cells.csv", "claims.csv"):
        assert (again / name).read_bytes() == (folder / name).read_bytes(), name
    with pytest.raises(UserError, match="a ledger's text export, which is read"):
        ledger.add(tmp_path / "a", folder)


def test_the_report_sets_the_run_beside_the_ledger_s_earlier_runs(tmp_path):
    """The report's last section: each claim the run measured beside the ledger's earlier runs
    of its stack and size (two here, on two machine classes), pooled; the run itself is not
    among them (it joins the ledger after its report)."""
    path = tmp_path / schema.FILE
    for run_id, cpu in (("a", "AMD EPYC"), ("b", "Intel Xeon")):
        ledger.add(analysed(tmp_path, run_id, cpu, ["AVX2"]), path)
    text = (analysed(tmp_path, "c", "AMD EPYC", ["AVX2"]) / "analysis" / "report.md").read_text()
    section = text.split("## This run beside the ledger's earlier runs")[1]
    line = next(l for l in section.splitlines() if l.startswith("| tf_sync_vs_pytorch_sync |"))
    assert "| 2 (2 machine class(es)) |" in line and line.count("2.6") >= 2, line
    # earlier runs whose claims are points (one repeat): said so, not "no earlier run"
    db = sqlite3.connect(str(path))
    db.execute("UPDATE claims SET low = value, high = value")
    db.commit()
    text = report.build(tmp_path / "c", quiet=True)["report"].read_text()
    assert "each as a point (one repeat and no interval check)" in text


def test_a_ledger_that_cannot_be_written_leaves_the_report_and_says_how_to_add_later(tmp_path,
                                                                                     capsys):
    from harness import commands
    run = analysed(tmp_path, "a", "AMD EPYC", ["AVX2"])
    (tmp_path / "not-a-database.sqlite").write_text("plain text, not SQLite")
    commands.add_to_ledger(run, tmp_path / "not-a-database.sqlite")
    said = capsys.readouterr().out
    assert "ledger: run a was not added to %s (DatabaseError" % (
        tmp_path / "not-a-database.sqlite") in said and "`invoke ledger.add --run a`" in said
    assert (run / "analysis" / "report.md").is_file()


MARKER = re.compile(r"<!-- ledger\.(claims|coverage) (\S+)(?: --claims (\S+))? -->\n```\n(.*?)```",
                    re.S)


def test_the_notebook_s_ledger_tables_are_what_the_committed_exports_give(monkeypatch):
    """Each table of docs/notebook.md under `<!-- ledger.claims FOLDER [--claims IDS] -->` (or
    ledger.coverage) is what `invoke ledger.claims --ledger FOLDER` prints from the export
    committed in FOLDER: the notebook's evidence recomputed from data in the repository."""
    monkeypatch.chdir(REPO)
    found = MARKER.findall((REPO / "docs" / "notebook.md").read_text())
    assert found, "no notebook table from a committed ledger export"
    for kind, folder, chosen, table in found:
        printed = ledger.claims_text(folder, chosen.split(",") if chosen else None) \
            if kind == "claims" else ledger.coverage_text(folder)
        assert table.strip() == printed.strip(), (kind, folder)
