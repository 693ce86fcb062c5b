"""The paper's frameworks trained for real beside today's: stacks paper-py39 (TensorFlow
2.5.0, torch 1.7.1, MXNet 1.7.0 on Debian 11's python3.9, unpacked into the env root by the
playbook as the user who runs it) and current provisioned on the local cluster, one run of
the five system-modes under both (the stack a factor of the run, as the verdict size runs
it), the versions read back from the records, and the report that sets the two side by
side."""
import json
import os
import re
from pathlib import Path

import pytest

from harness.nodes import inventory, stacks
from harness.plan.matrix import SYSTEMS
from tests.conftest import invoke

pytestmark = pytest.mark.cluster
STACKS = "paper-py39,current"


@pytest.fixture(scope="module")
def paper_run(tmp_path_factory):
    first = invoke("provision", "--stacks", STACKS)
    # the paper stack's second time (today's is fault-bench's, tests/test_faults.py)
    again = invoke("provision", "--stack", "paper-py39")
    results = tmp_path_factory.mktemp("paper-py39")
    bench = invoke("bench", "--stacks", STACKS, "--results", str(results))
    invoke("collect", "--results", str(results))
    invoke("analyze", "--results", str(results))
    (run,) = [p for p in results.iterdir() if p.is_dir()]
    records = [json.loads(l) for l in (run / "records.jsonl").read_text().splitlines()]
    return {"first": first.stdout, "again": again.stdout, "bench": bench.stdout, "run": run,
            "records": records}


def test_provisioning_the_paper_stack_twice_changes_nothing_the_second_time(paper_run):
    nodes = len(inventory.load("local").hosts)
    found = re.findall(r"provisioned in [\d.]+ s: changed=(\d+) over %d nodes" % nodes,
                       paper_run["again"])
    assert found == ["0"], paper_run["again"][-2000:]


def test_five_system_modes_train_on_the_papers_frameworks(paper_run):
    status = {(r["system"], r["stack"]): r["status"] for r in paper_run["records"]
              if r["metric"] == "status"}
    assert status == {(s, k): "succeeded" for s in SYSTEMS for k in STACKS.split(",")}, status
    # the timed steps, calibration and profiled steps came back (tensorflow-async's wall
    # step is its chief's)
    for system in SYSTEMS:
        metrics = {r["metric"] for r in paper_run["records"]
                   if r["system"] == system and r["role"] in ("worker", "chief")}
        assert {"wall_step", "forward", "backward", "operator"} <= metrics, (system, metrics)


def test_versions_read_back_from_the_records_are_the_papers(paper_run):
    found = {}
    for r in paper_run["records"]:
        if r["stack"] != "paper-py39":
            continue
        for name, version in (r.get("versions") or {}).items():
            found.setdefault(name, set()).add(version)
    assert found["tensorflow"] == {"2.5.0"}
    assert found["torch"] == {"1.7.1"}
    assert {v.split(".post")[0] for v in found["mxnet"]} == {"1.7.0"}
    assert found["numpy"] == {"1.19.5"}
    manifest = json.loads((paper_run["run"] / "manifest.json").read_text())
    pythons = {env["python"] for envs in manifest["installed"]["paper-py39"].values()
               for env in envs.values()}
    assert pythons == {"3.9.2"}  # Debian 11's, not another python3.9 on PATH


def test_the_report_puts_the_papers_releases_first_and_todays_beside(paper_run):
    text = (paper_run["run"] / "analysis" / "report.md").read_text()
    first = text.split("## Every claim under both stacks")[0]
    assert first.index("Under paper-py39 (TensorFlow 2.5.0") < first.index(
        "Under current (TensorFlow 2.21.0")
    assert "claim(s) whose verdict differs between the two" in first
    assert (paper_run["run"] / "analysis" / "claims_two_stacks.png").is_file()


def test_the_report_names_the_pins_that_differ_from_the_papers(paper_run):
    text = (paper_run["run"] / "analysis" / "paper-py39" / "report.md").read_text()
    assert "- **versions**: torch 1.7.1 (paper:" in text
    assert "- **python**: Python 3.9.2 (paper: 3.6.9)" in text
    assert "tensorflow: 2.5.0 (paper 2.5.0)" in text


def test_the_python_is_debians_unpacked_in_the_env_root_with_its_sources(paper_run):
    """No system Python: each env's interpreter is the one unpacked into the env root, and
    SOURCES there names every package it came from, with its SHA256."""
    host = inventory.load("local").hosts[0]
    root = Path(os.path.expanduser(host.env_root))
    stack = stacks.load("paper-py39")
    unpacked = root / "python3.9-bullseye-3.9.2-1"
    for env in stack.envs.values():
        config = (root / env.dirname / "pyvenv.cfg").read_text()
        assert "home = %s/usr/bin" % unpacked in config, config
    sources = (unpacked / "SOURCES").read_text().splitlines()
    assert sorted(line.split()[1].split("_")[0] for line in sources) == sorted(
        package.split("=")[0] for package in stack.debian["packages"])
    assert all(re.search(r" SHA256:[0-9a-f]{64}$", line) for line in sources), sources
