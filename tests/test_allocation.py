"""`--inventory slurm` without a cluster: what is read from Slurm's environment, and the
errors that name what is missing."""
import pytest

from harness import inventory
from harness.clusters import allocation
from harness.errors import UserError


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


# --- from outside an allocation: --partition and --sbatch ---------------------------------

def test_the_time_limit_is_the_plans_estimate_with_a_margin_and_timeouts_for_the_unknown():
    from harness import matrix
    from harness.clusters import slurm_jobs
    cells = matrix.plan("smoke", 3, systems="pytorch-sync,mxnet-sync")
    rows = [(cells[0], 600.0, "earlier"), (cells[1], None, None)]
    expected = 600 * 1.5 + cells[1].default_timeout() * 1.5
    assert slurm_jobs.time_limit_minutes(rows) == -(-int(expected) // 60) + 10
    assert slurm_jobs.slurm_time(1500) == "1-01:00:00"
    assert slurm_jobs.slurm_time(19) == "0-00:19:00"


def test_the_batch_script_starts_the_run_once_and_resumes_it_after(tmp_path):
    from harness import commands
    request = commands.SlurmRequest(
        "slurm", "current", "smoke", tmp_path, "batch1",
        {"benchmarks": None, "systems": "pytorch-sync", "epochs": None, "steps": None,
         "data": None, "timeout": 300, "repeats": 1, "network": None, "nodes": None,
         "profile_steps": None}, {"fail_fast": True, "retry_failed": False, "force": False})
    assert request.size()[0] == 3
    script = request.write_batch("short", submit=False)["script"].read_text()
    assert "#SBATCH --nodes=3\n" in script and "#SBATCH --partition=short\n" in script
    first, resumed = [line for line in script.splitlines() if "bench --inventory" in line][::-1]
    assert "--systems pytorch-sync" in first and "--systems" not in resumed
    for line in (first, resumed):  # the cell timeout and the flags hold for both
        assert "--timeout 300" in line and "--fail-fast" in line and line.endswith(
            "--run batch1")
    assert "if [ -f %s ]" % (tmp_path / "batch1" / "manifest.json") in script
