"""The artifact bundle (harness/results/artifact.py) on a hand-made run: built, verified (sums, and the
report rebuilt from the archived records, identical), and refused when changed or hostile."""
import io
import tarfile

import pytest

from analysis import claims, report
from selfcheck import known_run
from harness.results import artifact
from contract.errors import UserError

JUNIT = """<testsuites><testsuite name="pytest">
<testcase classname="tests.test_a" name="test_ok"/>
<testcase classname="tests.test_a" name="test_bad"><failure message="x"/></testcase>
<testcase classname="tests.test_b" name="test_skip"><skipped/></testcase>
</testsuite></testsuites>"""


@pytest.fixture()
def archive(tmp_path):
    cells = [known_run.cell(b, s, t) for b in claims.PAPER_BENCHMARKS
             for s, t in (("pytorch-sync", 100.0), ("tensorflow-sync", 265.0))]
    run = known_run.write_run(tmp_path, cells, run_id="r1", memory_rows=3)
    report.build(run, quiet=True)
    junit = tmp_path / "junit.xml"
    junit.write_text(JUNIT)
    return artifact.build(tmp_path, "r1", junit=junit)


def members(path):
    with tarfile.open(str(path), "r:gz") as tar:
        return {m.name: m for m in tar.getmembers()}, tar


def read(path, name):
    with tarfile.open(str(path), "r:gz") as tar:
        return tar.extractfile(name).read().decode()


def test_the_bundle_holds_the_run_and_says_what_it_shows(archive):
    names = set(members(archive)[0])
    for name in ("manifest.json", "records.jsonl", "analysis/report.md", "analysis/report.html",
                 "SHA256SUMS", "ARTIFACT.md", "ENVIRONMENTS.json", "PROVENANCE.json"):
        assert "r1/" + name in names, name
    text = read(archive, "r1/ARTIFACT.md")
    assert "1 passed, 1 failed, 1 skipped" in text and "failed: tests.test_a::test_bad" in text
    # requested, with the evidence: a committee awards badges, and Available needs a DOI
    assert "## Available (requested)" in text and "No badge is claimed here." in text
    assert "permanent public archive with a DOI" in text
    assert "| Synchronous: TensorFlow is slower than PyTorch by 2.65x on average (the package's " \
        "reading: averaged over all six benchmarks (the paper does not say which it averaged)) " \
        "| reproduced |" in text
    assert len(read(archive, "r1/SHA256SUMS").splitlines()) == len(names) - 1


def test_verify_rebuilds_the_same_report(archive):
    assert artifact.verify(archive) == []


def test_a_changed_file_is_found(archive, tmp_path):
    changed = tmp_path / "changed.tar.gz"
    with tarfile.open(str(archive), "r:gz") as src, tarfile.open(str(changed), "w:gz") as dst:
        for member in src.getmembers():
            data = src.extractfile(member).read() if member.isfile() else None
            if member.name == "r1/records.jsonl":
                data = data.replace(b"265.0", b"200.0")
                member.size = len(data)
            dst.addfile(member, io.BytesIO(data) if data is not None else None)
    with pytest.raises(UserError, match="do not match SHA256SUMS: r1/records.jsonl"):
        artifact.verify(changed)


def test_a_member_outside_the_archive_is_refused(tmp_path):
    hostile = tmp_path / "hostile.tar.gz"
    with tarfile.open(str(hostile), "w:gz") as tar:
        info = tarfile.TarInfo("../../escaped.txt")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"hi"))
    with pytest.raises(UserError, match="points outside the archive"):
        artifact.verify(hostile)
    assert not (tmp_path.parent / "escaped.txt").exists()


def test_a_run_of_two_stacks_is_bundled_and_verified(tmp_path):
    """A run under the paper's release lines and today's: the badges name each stack's
    claims, and the side-by-side report is rebuilt the same from the archive."""
    from tests.test_releases import two_stack_run
    run = two_stack_run(tmp_path, ["lenet5-cifar10", "resnet18-cifar10"])
    report.build(run, quiet=True)
    path = artifact.build(tmp_path, run.name, junit=tmp_path / "none.xml")
    text = read(path, "%s/ARTIFACT.md" % run.name)
    assert "The paper's claims in this run under stack paper-py39: " in text
    assert "The paper's claims in this run under stack current: " in text
    assert artifact.verify(path) == []
