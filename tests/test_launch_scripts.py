"""Planning cells and rendering per-node launch scripts (no training here)."""
import json
import os
import shlex
import subprocess
import textwrap

import pytest

from harness import inventory, launch, matrix, nodes, stacks
from harness.errors import UserError

SHARDS = {"id": "cifar10-synthetic-seed0", "classes": 10, "label_bytes": 1}


def test_smoke_profile_is_one_lenet_cell_of_about_20_steps():
    cells = matrix.plan("smoke", 3)
    assert [(c.benchmark, c.system, c.nodes) for c in cells] == \
        [("lenet5-cifar10", "pytorch-sync", 3)]
    assert cells[0].total_steps == 20 and cells[0].local_batch == 42
    assert 0 < cells[0].warmup_steps < 20


def test_cell_id_is_stable_and_follows_settings():
    a, b = matrix.plan("smoke", 3)[0], matrix.plan("smoke", 3)[0]
    assert a.id == b.id
    assert matrix.plan("smoke", 3, steps=21)[0].id != a.id
    assert matrix.plan("smoke", 3, repeats=2)[1].id != a.id


def test_unknown_names_are_clear():
    with pytest.raises(UserError, match="unknown benchmark 'lenet7'"):
        matrix.plan("smoke", 3, benchmarks="lenet7")
    with pytest.raises(UserError, match="unknown system 'caffe-sync'"):
        matrix.plan("smoke", 3, systems="caffe-sync")
    with pytest.raises(UserError, match="unknown profile"):
        matrix.plan("huge", 3)


def render_local(cell):
    inv = inventory.load("local")
    return launch.prepare(cell, "run1", nodes.connect_all(inv), stacks.load("current"), SHARDS)


def exports(script):
    found = {}
    for line in script.splitlines():
        if line.startswith("export "):
            key, value = line[len("export "):].split("=", 1)
            found[key] = shlex.split(value)[0]
    return found


def test_pytorch_script_carries_the_inventory():
    cell = matrix.plan("smoke", 3)[0]
    procs = render_local(cell)
    assert [(p.node.name, p.role, p.rank) for p in procs] == \
        [("node1", "worker", 0), ("node2", "worker", 1), ("node3", "worker", 2)]
    env = exports(procs[2].script)
    assert env["MASTER_ADDR"] == "127.0.0.1" and env["MASTER_PORT"] == "29500"
    assert env["RANK"] == "2" and env["WORLD_SIZE"] == "3"
    assert env["GLOO_SOCKET_IFNAME"] == "lo" and env["OMP_NUM_THREADS"] == "1"
    home = os.path.expanduser("~")
    assert procs[2].out_dir == home + "/.cache/dlbench/local/node3/runs/run1/%s/worker-2" % cell.id
    assert procs[2].config["shard"].endswith("/node3/data/cifar10-synthetic-seed0/"
                                             "shard-2-of-3.bin")
    assert procs[0].config["threads"] == 1 and procs[0].config["local_batch"] == 42


def test_hostile_paths_cannot_inject_commands(tmp_path):
    """A workdir full of shell syntax stays one literal path in the rendered script."""
    evil = str(tmp_path / "w $(touch INJECTED1) `touch INJECTED2`; touch INJECTED3 '\"")
    inv_file = tmp_path / "inv.yml"
    inv_file.write_text(textwrap.dedent("""\
        all:
          vars: {ansible_connection: local}
          children:
            nodes:
              hosts:
                n1:
                  address: 127.0.0.1
                  cluster_interface: lo
                  vcpus: 1
                  base_port: 31000
                  env_root: /nonexistent/envs
                  workdir: %s
        """) % json.dumps(evil))
    inv = inventory.load(inv_file)
    assert inv.hosts[0].workdir == evil
    cell = matrix.plan("smoke", 1)[0]
    proc = launch.prepare(cell, "run1", nodes.connect_all(inv), stacks.load("current"),
                          SHARDS)[0]
    os.makedirs(proc.out_dir)
    script = tmp_path / "run.sh"
    script.write_text(proc.script)
    subprocess.run(["bash", str(script)], cwd=str(tmp_path), capture_output=True, timeout=30)
    leftovers = [p for p in tmp_path.rglob("INJECTED*")]
    assert leftovers == []
    # the script did run: it reached the python line (absent here) and wrote its exit code
    assert (open(os.path.join(proc.out_dir, "rc")).read().strip()) == "127"
