"""`--inventory slurm` without a cluster: what is read from Slurm's environment, and the
errors that name what is missing."""
import pytest

from harness.nodes import inventory
from harness.clusters import allocation
from contract.errors import UserError


@pytest.mark.parametrize("text, nodes, expected", [
    ("4(x3)", 3, [4, 4, 4]),
    ("8,4(x2)", 3, [8, 4, 4]),
    ("2", 1, [2]),
])
def test_cpus_per_node_from_slurms_compressed_list(monkeypatch, text, nodes, expected):
    monkeypatch.setenv("SLURM_JOB_CPUS_PER_NODE", text)
    assert allocation.cpus_per_node("7", nodes) == expected


def test_the_shipped_slurm_inventory_asks_for_its_interface_first(monkeypatch):
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    with pytest.raises(UserError) as error:
        inventory.load("slurm")  # inventory/slurm.yml names no interface: checked first
    assert "cluster_interface" in str(error.value)


def test_without_an_interface_the_inventory_asks_for_one(tmp_path, monkeypatch):
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    path = tmp_path / "slurm.yml"
    path.write_text("all:\n  vars:\n    ansible_connection: slurm\n    workdir: ~/w/{host}\n"
                    "    env_root: ~/e\n    base_port: 29500\n")
    with pytest.raises(UserError, match="`cluster_interface` is missing"):
        inventory.load(str(path))


def test_no_job_id_is_named(tmp_path, monkeypatch):
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    path = tmp_path / "slurm.yml"
    path.write_text("all:\n  vars:\n    ansible_connection: slurm\n    cluster_interface: eth0\n"
                    "    workdir: ~/w/{host}\n    env_root: ~/e\n    base_port: 29500\n")
    with pytest.raises(UserError, match="not inside a Slurm allocation"):
        inventory.load(str(path))


def test_collect_outside_the_allocation_reads_the_recorded_hosts_as_files(tmp_path,
                                                                         monkeypatch):
    """A batch run collected after its job ended: the hosts its manifest recorded, read here
    (Slurm's shared filesystem); inside an allocation the inventory would ask Slurm."""
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    path = tmp_path / "slurm.yml"
    path.write_text("all:\n  vars:\n    ansible_connection: slurm\n    cluster_interface: eth0\n"
                    "    workdir: ~/w/{host}\n    env_root: ~/e\n    base_port: 29500\n")
    recorded = [{"name": "c1", "address": "10.0.0.1", "connection": "slurm",
                 "cluster_interface": "eth0", "vcpus": 4, "workdir": "~/w/c1",
                 "base_port": 29500, "cpus": ""}]
    inv = inventory.for_collect(str(path), {"inventory": {"hosts": recorded}})
    (host,) = inv.hosts
    assert (host.name, host.connection, host.workdir, host.env_root) == ("c1", "local",
                                                                       "~/w/c1", "~/e")
    with pytest.raises(UserError, match="names no hosts"):
        inventory.for_collect(str(path), {})
    assert inventory.for_collect("local", {}).hosts[0].connection == "local"  # loaded as is


# --- from outside an allocation: --partition and --sbatch ---------------------------------

def test_the_time_limit_is_the_plans_estimate_with_a_margin_and_timeouts_for_the_unknown():
    from harness.plan import matrix
    from harness.clusters import slurm_jobs
    cells = matrix.plan("smoke", 3, systems="pytorch-sync,mxnet-sync")
    rows = [(cells[0], 600.0, "earlier"), (cells[1], None, None)]
    expected = 600 * 1.5 + cells[1].default_timeout() * 1.5
    assert slurm_jobs.time_limit_minutes(rows) == -(-int(expected) // 60) + 10
    assert slurm_jobs.slurm_time(1500) == "1-01:00:00"
    assert slurm_jobs.slurm_time(19) == "0-00:19:00"


def test_the_batch_script_starts_the_run_once_and_resumes_it_after(tmp_path):
    from harness import commands
    from harness.plan.options import BenchOptions
    request = commands.SlurmRequest(BenchOptions(
        inventory="slurm", stack="current", size="smoke", results=tmp_path, run="batch1",
        systems="pytorch-sync", timeout=300, repeats=1, fail_fast=True, partition="short"))
    assert request.allocation()[0] == 3
    script = request.write_batch()["script"].read_text()
    assert "#SBATCH --nodes=3\n" in script and "#SBATCH --partition=short\n" in script
    first, resumed = [line for line in script.splitlines() if "bench --inventory" in line][::-1]
    assert "--systems pytorch-sync" in first and "--systems" not in resumed
    for line in (first, resumed):  # the cell timeout and the flags hold for both
        assert "--timeout 300" in line and "--fail-fast" in line and line.endswith(
            "--run batch1")
    assert "if [ -f %s ]" % (tmp_path / "batch1" / "manifest.json") in script


# --- Slurm's accounting (sacct) in the records ---------------------------------------------

@pytest.mark.parametrize("text, seconds", [
    ("00:00:02", 2.0), ("00:00.326", 0.326), ("01:02:03", 3723.0), ("1-00:00:10", 86410.0),
    ("", None), ("INVALID", None)])
def test_slurm_durations_are_read_as_seconds(text, seconds):
    from harness.clusters import sacct
    assert sacct.seconds(text) == (pytest.approx(seconds) if seconds is not None else None)


def test_sacct_rows_become_records_beside_psutils(tmp_path):
    """A cell whose two roles were job steps 7.1 and 7.2: their sacct lines become
    slurm_elapsed_s, slurm_cpu_s and slurm_max_rss_mb records (MaxRSS in MiB, as psutil's);
    a step with no figures gives none; a process Slurm did not run gets no Slurm record."""
    import json
    from harness.results import run_records
    from harness.clusters import sacct
    from contract.runfolder import CellStatus, RunFolder
    cell = tmp_path / "c1"
    for node, role, step in (("node1", "worker-0", "7.1"), ("node2", "worker-1", "7.2"),
                             ("node3", "worker-2", "")):
        folder = cell / node / role
        folder.mkdir(parents=True)
        (folder / "result.json").write_text(json.dumps({
            "config": {"node": node, "role": "worker", "rank": int(role[-1])},
            "peak_rss_mb": 300.0}))
        if step:
            (folder / sacct.STEP_FILE).write_text(step + "\n")
    assert sorted(sacct.steps(cell)) == ["7.1", "7.2"]
    (cell / sacct.FILE).write_text(
        "JobID|JobName|NodeList|State|ExitCode|Elapsed|TotalCPU|MaxRSS\n"
        "7.1|dlbench-role|node1|CANCELLED|0:15|00:01:05|01:02.500|307200K\n"
        "7.2|dlbench-role|node2|COMPLETED|0:0|00:00:30|00:10.000|\n")
    RunFolder(tmp_path).write_manifest({"run_id": "r", "cells": [{"id": "c1"}]})
    RunFolder(tmp_path).save_status(CellStatus("c1", status="succeeded"), 0.0)
    got = {(r["node"], r["metric"]): (r["value"], r.get("slurm_state"))
           for r in run_records.build_records(tmp_path) if r.get("source") == "sacct"}
    assert got == {("node1", "slurm_elapsed_s"): (65.0, "CANCELLED"),
                   ("node1", "slurm_cpu_s"): (62.5, "CANCELLED"),
                   ("node1", "slurm_max_rss_mb"): (300.0, "CANCELLED"),
                   ("node2", "slurm_elapsed_s"): (30.0, "COMPLETED"),
                   ("node2", "slurm_cpu_s"): (10.0, "COMPLETED")}


def test_a_cluster_without_accounting_is_said_so(tmp_path, monkeypatch):
    """sacct failing (no slurmdbd) is a line in the output, not silence, and no file."""
    from harness.clusters import sacct
    folder = tmp_path / "c1" / "node1" / "worker-0"
    folder.mkdir(parents=True)
    (folder / sacct.STEP_FILE).write_text("7.1\n")
    (tmp_path / "bin").mkdir()
    fake = tmp_path / "bin" / "sacct"
    fake.write_text("#!/bin/sh\necho 'sacct: error: Slurm accounting storage is disabled' >&2\n"
                    "exit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", "%s:%s" % (fake.parent, __import__("os").environ["PATH"]))
    line = sacct.keep(tmp_path, ["c1"], wait=0)
    assert "accounting storage is disabled" in line and "no Slurm figures" in line
    assert not (tmp_path / "c1" / sacct.FILE).exists()
    assert sacct.keep(tmp_path, ["c2"]) is None  # no job step in the cell: nothing to say


def test_slurm_bench_table_compares_cells_and_steps_each_way(tmp_path):
    """Two runs each way with known cell times and steps: medians, the ratio, the spread."""
    from contract.runfolder import CellStatus, RunFolder
    from selfcheck import launchers

    def run(name, seconds, step):
        folder = RunFolder(tmp_path / name)
        folder.write_manifest({"started": 100.0, "ended": 100.0 + seconds + 5})
        folder.save_status(CellStatus("c1", status="succeeded", seconds=seconds,
                                      settings={"system": "pytorch-sync"}), 0.0)
        folder.write_records([{"metric": "wall_step", "role": "worker", "system": "pytorch-sync",
                               "value": step}])
        return folder.path
    runs = {"ssh": [run("s0", 10.0, 0.020), run("s1", 14.0, 0.030)],
            "slurm": [run("t0", 9.0, 0.021), run("t1", 9.0, 0.019)]}
    lines = launchers.table(runs)
    row = [l for l in lines if l.startswith("| pytorch-sync")][0]
    assert row == "| pytorch-sync | 12.0 | 9.0 | 0.75 | 25.0 (20.0-30.0) | 20.0 (19.0-21.0) |"
    assert "| all cells | 12.0 | 9.0 | 0.75 |" in "\n".join(lines)
    assert lines[-1].startswith("run wall time: SSH 15, 19 s, Slurm 14, 14 s")


def test_ansible_gets_the_allocations_nodes_written_out(tmp_path, monkeypatch):
    """inventory/slurm.yml lists no hosts: provisioning hands Ansible the allocation's nodes,
    each with the variables the harness resolved ({host} filled in), in the `nodes` group the
    playbook plays on, reached by the slurm connection with modules piped; an SSH inventory
    is passed as it is."""
    import json
    from harness.nodes import provision
    monkeypatch.setenv("DLBENCH_CACHE", str(tmp_path))
    path = tmp_path / "slurm.yml"
    path.write_text("all:\n  vars:\n    ansible_connection: slurm\n    cluster_interface: ib0\n"
                    "    workdir: ~/w/{host}\n    env_root: ~/e\n    base_port: 29500\n"
                    "    vcpus: 4\n")
    monkeypatch.setattr(allocation, "hosts", lambda p, v: [
        (n, dict(v, address="10.0.0.%d" % i, slurm_job="42",
                 workdir=v["workdir"].replace("{host}", n))) for i, n in ((1, "c1"), (2, "c2"))])
    inv = inventory.load(str(path))
    written = provision.ansible_inventory(inv)
    hosts = json.loads(written.read_text())["all"]["children"]["nodes"]["hosts"]
    assert sorted(hosts) == ["c1", "c2"]
    assert hosts["c2"]["workdir"] == "~/w/c2" and hosts["c2"]["ansible_connection"] == "slurm"
    assert hosts["c1"]["slurm_job"] == "42" and hosts["c1"]["ansible_pipelining"] is True
    assert "through Slurm job steps (srun --overlap in allocation 42" in provision.route(inv)
    local = inventory.load("local")
    assert provision.ansible_inventory(local) == local.path
    assert provision.route(local) == "over local processes"
