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
