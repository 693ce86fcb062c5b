"""`invoke artifact`: one archive per run for artifact evaluation, and `--verify` of one.

The archive <results>/<run-id>-artifact.tar.gz holds the whole run folder (manifest, records,
status files, every process's logs and results, the report in md and html, figures), and:
  ENVIRONMENTS.json  each node's environments as installed: every package, its version and
                     the sha256 of its RECORD (bench/common/envinfo.py), so that a rebuilt
                     environment can be checked against the one that ran
  PROVENANCE.json    the commit the run was made from and whether the tree was dirty, the
                     commit that made the archive, and the test results found (junit XML)
  ARTIFACT.md        the ACM badges requested (Available, Functional, Results Reproduced)
                     and the evidence offered for each; a committee awards badges, this
                     file awards none: which tests ran and passed here, which claims were
                     reproduced, not reproduced or inconclusive, and the setup's deviations
  SHA256SUMS         of every other file
`--verify PATH` checks the sums, rebuilds the report from the archived records and manifest,
and compares it with the archived report.md, line by line.
"""
import gzip
import hashlib
import io
import json
import shutil
import tarfile
import tempfile
import time
import zlib
import xml.etree.ElementTree as ET
from pathlib import Path

from . import run_manifest
from contract import manifest as manifests
from contract import runfolder
from contract.runfolder import RunFolder
from contract.errors import UserError
from ..paths import REPO

JUNIT = REPO / "results" / "tests" / "junit.xml"  # written by `make test`
SUMS = "SHA256SUMS"
COVERAGE_LINE = "Interval coverage"  # analysis/ledger.py coverage_text


def build(results, run_id=None, junit=JUNIT):
    run = run_manifest.run_dir(results, run_id)
    run_manifest.check_format(run)
    manifest = RunFolder(run).manifest()
    report = run / runfolder.ANALYSIS / runfolder.REPORT
    if not report.is_file():
        raise UserError("run %s has no report" % run.name,
                        "run `invoke analyze --run %s` first" % run.name)
    tests = junit_summary(junit)
    extra = {
        "ENVIRONMENTS.json": json.dumps(manifest.get("installed") or {}, indent=1,
                                        sort_keys=True),
        "PROVENANCE.json": json.dumps({
            "run": run.name, "run_commit": manifest.get("git"),
            "archived_by": run_manifest.git_state(),
            "archived_at": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
            "tests": tests}, indent=1, sort_keys=True),
        "ARTIFACT.md": badges(run, manifest, tests),
    }
    files = sorted(p for p in run.rglob("*") if p.is_file())
    sums = [(_sha256(p.read_bytes()), "%s/%s" % (run.name, p.relative_to(run).as_posix()))
            for p in files]
    sums += [(_sha256(text.encode()), "%s/%s" % (run.name, name))
             for name, text in sorted(extra.items())]
    extra[SUMS] = "".join("%s  %s\n" % pair for pair in sums)
    archive = Path(results) / ("%s-artifact.tar.gz" % run.name)
    with tarfile.open(str(archive), "w:gz") as tar:
        for path in files:
            tar.add(str(path), arcname="%s/%s" % (run.name, path.relative_to(run).as_posix()))
        for name, text in sorted(extra.items()):
            _add_text(tar, "%s/%s" % (run.name, name), text)
    print("artifact: %s (%d files, %.1f MB)" % (archive, len(files) + len(extra),
                                               archive.stat().st_size / 1e6))
    return archive


def verify(path):
    """Sums, then the report rebuilt from the archive's records: identical but for the lines
    that carry the time the report was made, up to the section that sets the run beside a
    ledger (the ledger is not in the archive). Returns the differing lines ([] = verified)."""
    from analysis import report
    path = Path(path)
    if not path.is_file():
        raise UserError("no archive %s" % path, "give the path `invoke artifact` printed")
    with tempfile.TemporaryDirectory() as tmp:
        _extract(path, Path(tmp))
        (run,) = [p for p in Path(tmp).iterdir() if p.is_dir()]
        bad = check_sums(run)
        if bad:
            raise UserError("%d file(s) in %s do not match SHA256SUMS: %s"
                            % (len(bad), path.name, ", ".join(bad[:5])),
                            "the archive was changed or damaged: make it again")
        sums = len((run / SUMS).read_text().splitlines())
        archived = _from_records((run / runfolder.ANALYSIS / runfolder.REPORT).read_text())
        rebuilt = _from_records(
            report.build(run, quiet=True, out=run / "verify")["report"].read_text())
    differing = [(a, b) for a, b in zip(archived.splitlines(), rebuilt.splitlines())
                 if a != b and not _timestamped(a)]
    if len(archived.splitlines()) != len(rebuilt.splitlines()):
        differing.append(("%d lines" % len(archived.splitlines()),
                          "%d lines" % len(rebuilt.splitlines())))
    print("%s: %d file sums ok; report rebuilt from the archived records: %s"
          % (path.name, sums, "identical" if not differing
             else "%d line(s) differ" % len(differing)))
    return differing


IMPORTED = "imported"  # <results>/imported/<run>-<archive digest>/: the runs of archives


def import_run(path, results, ledger, digest=None):
    """An archive of a run (from `invoke artifact`, perhaps another machine's) into the ledger:
    its own sha256 against `digest` where given, its files against its SHA256SUMS, its results
    format against this version's; unpacked into <results>/imported/, its analysis made where
    the archive has none the ledger reads, then added once. Returns (key, the run's folder).
    SHA256SUMS proves integrity only: whoever changed a file could have rebuilt the sums, and
    such an archive cannot be told from the original; `digest`, the archive's sha256 as its
    author published it, ties it to that copy."""
    from analysis import ledger as ledgers, report
    path = Path(path)
    if not path.is_file():
        raise UserError("no archive %s" % path, "give the path of an `invoke artifact` archive")
    ledgers.refuse_export(ledger)  # before anything is unpacked
    found = _sha256(path.read_bytes())
    if digest and found != digest.strip().lower():
        raise UserError("%s has sha256 %s, not the %s given: it is not the archive published"
                        % (path.name, found, digest), "fetch the archive again from its author")
    Path(results).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=str(Path(results))) as tmp:
        run = _unpacked(path, Path(tmp))
        run_manifest.check_format(run)
        key = manifests_key(run)
        if ledgers.known(ledger, key):
            raise UserError("the run of %s (run %s, key %s) is in %s already: a run is counted "
                            "once" % (path.name, run.name, key, ledger), "nothing to do")
        target = Path(results) / IMPORTED / ("%s-%s" % (run.name, found[:12]))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(str(target), ignore_errors=True)
        shutil.move(str(run), str(target))
    if not ledgers.analysed(target):
        report.build(target, quiet=True)
    key, _ = ledgers.add(target, ledger, source="%s sha256:%s%s" % (
        path.name, found, " (pinned)" if digest else ""))
    print("imported %s (sha256 %s%s): run %s, key %s, into %s; unpacked in %s"
          % (path.name, found[:12], ", the digest given" if digest else
             ", its SHA256SUMS alone: integrity, not authorship", target.name, key, ledger,
             target))
    return key, target


def manifests_key(run):
    from contract import ledger as schema
    return schema.run_key(RunFolder(run).manifest())


def _whole_stream(path):
    """Read the archive's compressed stream to its end, where gzip checks its CRC and length:
    tarfile alone stops quietly at the first damaged header and unpacks what came before."""
    try:
        with gzip.open(str(path), "rb") as stream:
            while stream.read(1 << 20):
                pass
    except (OSError, EOFError, zlib.error) as exc:
        raise UserError("%s is damaged: its compressed stream fails gzip's own check (%s)"
                        % (path, exc), "fetch it again, or make it again with `invoke "
                        "artifact --run RUN`")


def _extract(path, into):
    """The archive unpacked into `into`, once its whole stream has passed gzip's check."""
    _whole_stream(path)
    try:
        with tarfile.open(str(path), "r:gz") as tar:
            _safe_extract(tar, into)
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        raise UserError("%s is not a readable artifact (%s)" % (path, exc),
                        "fetch it again, or make it again with `invoke artifact --run RUN`")


def _unpacked(path, into):
    """The run folder of the archive, unpacked into `into`, its sums checked."""
    _extract(path, into)
    runs = [p for p in into.iterdir() if p.is_dir()]
    if len(runs) != 1 or not (runs[0] / SUMS).is_file():
        raise UserError("%s is not an artifact of one run (no %s)" % (path, SUMS),
                        "give an archive that `invoke artifact` made")
    bad = check_sums(runs[0])
    if bad:
        raise UserError("%d file(s) in %s do not match its SHA256SUMS: %s"
                        % (len(bad), path.name, ", ".join(bad[:5])),
                        "the archive was changed or damaged: fetch it again")
    return runs[0]


def check_sums(run):
    bad = []
    for line in (run / SUMS).read_text().splitlines():
        digest, name = line.split("  ", 1)
        target = run.parent / name
        if not target.is_file() or _sha256(target.read_bytes()) != digest:
            bad.append(name)
    return bad


def junit_summary(path):
    """{passed, failed, skipped, errors, tests: [names passed]} from a junit XML, or None."""
    path = Path(path)
    if not path.is_file():
        return None
    root = ET.parse(str(path)).getroot()
    cases = root.iter("testcase")
    out = {"passed": [], "failed": [], "skipped": []}
    for case in cases:
        name = "%s::%s" % (case.get("classname"), case.get("name"))
        kinds = {child.tag for child in case}
        kind = ("failed" if kinds & {"failure", "error"} else
                "skipped" if "skipped" in kinds else "passed")
        out[kind].append(name)
    return out


def badges(run, manifest, tests):
    """ARTIFACT.md: the run against the ACM badges; the claims and deviations as the report
    judges them (analysis/compare.load evaluates them the same way)."""
    from analysis import compare
    sides = [compare.load(run, stack) for stack in manifests.stack_names(manifest)]
    git = manifest.get("git") or {}
    lines = ["# Artifact of run %s" % run.name, "",
             "The badges requested of an artifact evaluation committee, which awards them, "
             "and the evidence this archive offers for each. No badge is claimed here.", "",
             "## Available (requested)", "",
             "This archive, with SHA256SUMS over every file; the package at commit %s%s. "
             "The badge needs the artifact on a permanent public archive with a DOI "
             "(Zenodo, for one): this archive alone does not meet it until it is deposited "
             "there." % (git.get("commit"), " (with uncommitted changes)"
                         if git.get("dirty") else ""),
             "", "Every framework environment of every node is in ENVIRONMENTS.json: each "
             "package, its version and a digest of the files it installed (`record_sha256`). "
             "To check a rebuild, run `<env>/bin/python -m bench.common.envinfo` from the "
             "package's folder and compare its `record_sha256` with the archived one.",
             "", "## Functional (requested)", ""]
    if tests:
        lines.append("Tests run on this setup (`make test`): %d passed, %d failed, %d skipped."
                     % (len(tests["passed"]), len(tests["failed"]), len(tests["skipped"])))
        lines += ["- failed: %s" % t for t in tests["failed"]]
    else:
        lines.append("No test results found on this setup (`make test` writes "
                     "results/tests/junit.xml): not shown to be functional here.")
    lines += ["", "## Results Reproduced (requested)", ""]
    for found in sides:
        lines += results_reproduced(found, len(sides) > 1)
    return "\n".join(lines) + "\n"


def results_reproduced(found, named):
    """One stack's claims and deviations, as its report judges them; named: the stack said
    (a run of several)."""
    claims = list(found["claims"].values())
    tally = {}
    for c in claims:
        word = c["verdict"].split(" (")[0]
        tally[word] = tally.get(word, 0) + 1
    under = " under stack %s" % found["label"] if named else ""
    lines = ["The paper's claims in this run%s: %s." % (under, ", ".join(
                 "%d %s" % (n, w) for w, n in sorted(tally.items()))), "",
             "| claim | verdict |", "|---|---|"]
    lines += ["| %s | %s |" % (c["text"], c["verdict"]) for c in claims]
    lines += ["", "Deviations of this setup from the paper's%s (they bear on the verdicts):"
              % under, ""]
    lines += ["- **%s**: %s" % (d["key"], d["text"]) for d in found["bed"]["deviations"]] or \
        ["- none recorded"]
    return lines + [""]


def _from_records(text):
    """The report's lines that the archive's records decide: all before the section that
    reads the ledger of the machine that made the report."""
    from analysis.ledger import BESIDE_HEADING
    lines = text.splitlines()
    cut = [i for i, line in enumerate(lines) if line.lstrip("# ") == BESIDE_HEADING]
    return "\n".join(lines[:cut[0]] if cut else lines)


def _timestamped(line):
    """Lines that say when, or with what, the report was made rather than what the run
    measured: provenance with the time, and the interval coverage the ledger of the machine
    that made the report gave (a rebuilt report reads another ledger, or none)."""
    return "UTC" in line or line.startswith(COVERAGE_LINE)


def _safe_extract(tar, target):
    """Refuse members that would land outside the target (absolute paths, ..) or are links."""
    for member in tar.getmembers():
        dest = (target / member.name).resolve()
        if not str(dest).startswith(str(target.resolve()) + "/") or member.issym() or \
                member.islnk():
            raise UserError("artifact member %r points outside the archive" % member.name,
                            "do not trust this archive")
    tar.extractall(str(target))


def _add_text(tar, name, text):
    data = text.encode()
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), int(time.time()), 0o644
    tar.addfile(info, io.BytesIO(data))


def _sha256(data):
    return hashlib.sha256(data).hexdigest()
