"""End to end on the local cluster: real ansible-playbook, real DDP over Gloo, three workers.

Runs the user's own commands (`invoke provision bench collect analyze`) as subprocesses.
"""
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from harness.paths import REPO

pytestmark = pytest.mark.cluster
INVOKE = os.path.join(os.path.dirname(sys.executable), "invoke")
PHASES = ("step", "loading", "forward", "backward", "communication")


def invoke(*args, check=True):
    result = subprocess.run([INVOKE, *args], cwd=str(REPO), capture_output=True, text=True,
                            timeout=1200)
    if check and result.returncode != 0:
        raise AssertionError("invoke %s failed (%d):\n%s\n%s" % (
            " ".join(args), result.returncode, result.stdout[-3000:], result.stderr[-3000:]))
    return result


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    results = tmp_path_factory.mktemp("results")
    invoke("provision")
    bench = invoke("bench", "--results", str(results))
    invoke("collect", "--results", str(results))
    analyze = invoke("analyze", "--results", str(results))
    (run,) = [p for p in results.iterdir() if p.is_dir()]
    return {"run": run, "bench_out": bench.stdout, "analyze_out": analyze.stdout}


def results_of(run):
    return {p.parent.parent.name: json.loads(p.read_text())
            for p in run.glob("*/*/worker-*/result.json")}


def test_cell_succeeded_and_every_worker_reported_every_phase(smoke_run):
    run = smoke_run["run"]
    (status_file,) = run.glob("*/status.json")
    status = json.loads(status_file.read_text())
    assert status["status"] == "succeeded", status
    results = results_of(run)
    assert sorted(results) == ["node1", "node2", "node3"]
    for node, result in results.items():
        summary = result["summary"]
        assert result["status"] == "succeeded"
        for phase in PHASES:
            assert summary[phase] is not None and math.isfinite(summary[phase]), (node, phase)
        assert summary["step"] > 0 and summary["forward"] > 0 and summary["backward"] > 0
        assert summary["warmup_steps"] == 3 and summary["measured_steps"] == 17
        assert len(result["steps"]) == 20
        assert result["versions"]["torch"].startswith("2.13.0")
        assert result["parameters"] == 62006  # LeNet-5 on 32x32x3, 10 classes


def test_all_ranks_trained_together(smoke_run):
    results = results_of(smoke_run["run"])
    assert sorted(r["config"]["rank"] for r in results.values()) == [0, 1, 2]
    assert {r["config"]["world_size"] for r in results.values()} == {3}
    assert len({len(r["steps"]) for r in results.values()}) == 1


def test_memory_log_and_no_stray_processes(smoke_run):
    run = smoke_run["run"]
    status = json.loads(next(run.glob("*/status.json")).read_text())
    for proc in status["processes"]:
        assert not psutil.pid_exists(proc["pid"]) or \
            psutil.Process(proc["pid"]).status() == psutil.STATUS_ZOMBIE
    for memory in run.glob("*/*/worker-*/memory.csv"):
        rows = memory.read_text().splitlines()
        assert rows[0].startswith("time,elapsed_s,rss_mb")
        assert len(rows) >= 3
        assert any(",train," in row for row in rows[1:])


def test_records_manifest_and_report(smoke_run):
    run = smoke_run["run"]
    records = [json.loads(l) for l in (run / "records.jsonl").read_text().splitlines()]
    metrics = {(r["metric"], r["rank"]) for r in records}
    for phase in PHASES:
        assert {(phase, rank) for rank in (0, 1, 2)} <= metrics
    assert all(r["system"] == "pytorch-sync" and r["run_id"] == run.name for r in records)
    # gradients crossed the interface: at least one model's worth of bytes per step (62,006
    # float32 parameters); on the local cluster `lo` carries all three workers' traffic
    sent = [r["value"] for r in records if r["metric"] == "net_bytes_sent_per_step"]
    assert len(sent) == 3 and min(sent) > 62006 * 4
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["git"]["commit"]
    assert manifest["installed"]["node1"]["pytorch"]["packages"]["torch"].startswith("2.13.0")
    assert manifest["host_facts"]["node2"]["cpu_count"] >= 1
    report = (run / "analysis" / "report.md").read_text()
    assert "torch 2.13.0" in report and "succeeded" in report
    for ext in ("png", "pdf"):
        assert (run / "analysis" / ("fig3_execution_time." + ext)).stat().st_size > 1000
    assert str(run / "analysis" / "report.md") in smoke_run["analyze_out"]


def test_provision_rerun_changes_nothing(smoke_run):
    out = invoke("provision").stdout
    assert "changed=0 over 3 nodes" in out


def test_expected_errors_exit_2_without_traceback():
    result = invoke("bench", "--inventory", "no-such-cluster", check=False)
    assert result.returncode == 2
    assert "inventory 'no-such-cluster' not found" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    result = invoke("bench", "--steps", "zero", "--dry-run", check=False)
    assert result.returncode == 2 and "--steps must be a whole number" in result.stderr


def test_dry_run_touches_no_node(tmp_path):
    result = invoke("bench", "--dry-run", "--results", str(tmp_path))
    assert "1 cell(s)" in result.stdout
    assert result.stdout.count("export MASTER_PORT=29500") == 3
    assert list(tmp_path.iterdir()) == []


def test_timeout_stops_every_worker_and_keeps_the_record(smoke_run, tmp_path):
    """A cell that overruns its timeout is failed, killed on every node by pid, and recorded."""
    result = invoke("bench", "--results", str(tmp_path), "--epochs", "100", "--timeout", "12",
                    check=False)
    assert result.returncode == 0, result.stderr  # a failed cell is reported, not a crash
    (run,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    status = json.loads(next(run.glob("*/status.json")).read_text())
    assert status["status"] == "failed" and status["reason"].startswith("timeout after 12 s")
    assert len(status["processes"]) == 3
    for proc in status["processes"]:
        assert not psutil.pid_exists(proc["pid"]) or \
            psutil.Process(proc["pid"]).status() == psutil.STATUS_ZOMBIE
    # what the workers measured before the stop was fetched
    memory = list(run.glob("*/*/worker-*/memory.csv"))
    assert len(memory) == 3 and all(len(m.read_text().splitlines()) > 2 for m in memory)
    records = [json.loads(l) for l in (run / "records.jsonl").read_text().splitlines()]
    assert [r["value"] for r in records if r["metric"] == "status"] == [0.0]
