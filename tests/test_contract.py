"""contract/: the layouts and the record schema every part names through it."""
import json

import pytest

from contract import nodefolder, records
from selfcheck import known_run


def test_a_record_takes_its_unit_from_the_schema_and_refuses_an_unknown_metric():
    base = {"cell_id": "c", "node": "node1"}
    assert records.record(base, "peak_rss_mb", 512.0) == dict(base, metric="peak_rss_mb",
                                                              value=512.0, unit="MB")
    assert records.record(base, "operator", 0.01, op_path="conv")["unit"] == "s/step"
    with pytest.raises(KeyError, match="peak_rss_gb"):
        records.record(base, "peak_rss_gb", 0.5)


def test_the_known_runs_write_records_of_the_schema(tmp_path):
    run = known_run.write_run(tmp_path, [known_run.cell("lenet5-cifar10", "pytorch-sync", 100.0,
                                                        interference={"steal": 0.01})])
    rows = [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines()]
    assert rows and all(r["unit"] == records.METRICS[r["metric"]] for r in rows)
    assert {r["unit"] for r in rows if r["metric"] == "steal"} == {"share"}


def test_a_role_folder_is_under_the_run_and_the_cell():
    assert nodefolder.role_dir("/w", "r1", "c1", "worker", 2) == "/w/runs/r1/c1/worker-2"
    assert nodefolder.data_dir("/w", "s1") == "/w/data/s1"
    assert nodefolder.code_dir("~/x") == "~/x/code"


def test_every_manifest_key_the_package_reads_or_writes_is_in_the_contract(tmp_path):
    """contract/manifest.py lists manifest.json's keys: a key read anywhere in the package
    (manifest.get("x"), manifest["x"]) is one of them, and writing another is refused."""
    import re
    import pytest
    from contract import manifest
    from contract.runfolder import RunFolder
    from harness.paths import REPO
    read = set()
    for folder in ("analysis", "harness", "selfcheck"):
        for path in (REPO / folder).rglob("*.py"):
            read |= set(re.findall(r'manifest(?:\.get\(|\[)"([a-z_]+)"', path.read_text()))
    assert len(read) >= 20 and read <= set(manifest.KEYS), sorted(read - set(manifest.KEYS))
    with pytest.raises(ValueError, match="unknown key.*colour"):
        RunFolder(tmp_path / "r").write_manifest({"run_id": "r", "colour": "red"})


def test_one_reader_gives_every_format_s_manifest_the_size_as_size(tmp_path):
    """Format 3 writes the run's size as `size` ('profile' is the operator profile's word);
    a manifest of formats 1 and 2 said `profile`, and RunFolder.manifest reads it as `size`,
    format 1's one stack as `stacks` too. Written back, it is format 3."""
    from contract import manifest as manifests
    from contract.runfolder import RunFolder
    two = {"results_format": 2, "run_id": "r", "profile": "verdict",
           "stacks": [{"name": "current"}]}
    one = {"results_format": 1, "run_id": "r", "profile": "smoke", "stack": {"name": "x"},
           "installed": {"node1": {}}}
    assert manifests.upgraded(two) == {"results_format": 3, "run_id": "r", "size": "verdict",
                                       "stacks": [{"name": "current"}]}
    upgraded = manifests.upgraded(one)
    assert upgraded["size"] == "smoke" and "profile" not in upgraded
    assert upgraded["stacks"] == [{"name": "x"}] and upgraded["installed"] == {"x": {"node1": {}}}
    run = tmp_path / "r"
    run.mkdir()
    (run / "manifest.json").write_text(json.dumps(two))
    folder = RunFolder(run)
    assert folder.manifest()["size"] == "verdict"
    folder.write_manifest(folder.manifest())
    assert json.loads((run / "manifest.json").read_text())["results_format"] == manifests.FORMAT
    now = {"results_format": 3, "size": "paper"}
    assert manifests.upgraded(now) is now
