"""Planning cells and rendering per-node launch scripts (no training here)."""
import json
import os
import shlex
import subprocess
import textwrap

import pytest

from analysis import tidy
from contract import cellconfig
from harness.nodes import inventory, access as nodes, stacks
from harness.run import launch
from harness.plan import matrix
from harness.paths import REPO
from contract.errors import UserError

SHARDS = {"id": "cifar10-synthetic-seed0", "classes": 10, "label_bytes": 1}


def test_smoke_profile_is_every_system_mode_on_lenet_for_about_10_steps():
    cells = matrix.plan("smoke", 3)
    assert sorted(c.system for c in cells) == sorted(matrix.SYSTEMS)
    assert len(matrix.SYSTEMS) == 5
    assert {(c.benchmark, c.nodes, c.total_steps, c.local_batch) for c in cells} == \
        {("lenet5-cifar10", 3, 12, 42)}
    assert all(0 < c.warmup_steps < 12 for c in cells)


def test_paper_and_quick_profiles_are_tables_iii_and_iv():
    paper = matrix.plan("paper", 3)
    assert len(paper) == 30 and len({(c.benchmark, c.system) for c in paper}) == 30
    assert {(c.epochs, c.steps_per_epoch, c.local_batch * c.nodes, c.data) for c in paper} == \
        {(10, 396, 126, "real")}
    assert {c.input_size for c in paper if c.network == "alexnet"} == {64}
    assert {c.input_size for c in paper if c.network != "alexnet"} == {32}
    quick = matrix.plan("quick", 3)
    assert len(quick) == 30 and {(c.epochs, c.steps_per_epoch) for c in quick} == {(1, 30)}


def test_filters_and_overrides():
    cells = matrix.plan("paper", 3, benchmarks="resnet18-cifar100,alexnet-cifar10",
                        systems="mxnet-async", epochs=2, steps=7)
    assert [(c.benchmark, c.system) for c in cells] == \
        [("resnet18-cifar100", "mxnet-async"), ("alexnet-cifar10", "mxnet-async")]
    assert {(c.epochs, c.steps_per_epoch, c.dataset) for c in cells} == \
        {(2, 7, "cifar100"), (2, 7, "cifar10")}


def test_cell_id_is_stable_and_follows_settings():
    a, b = matrix.plan("smoke", 3)[0], matrix.plan("smoke", 3)[0]
    assert a.id == b.id
    assert matrix.plan("smoke", 3, steps=21)[0].id != a.id
    assert matrix.plan("smoke", 3, repeats=2)[1].id != a.id


def test_a_fault_test_knows_which_repeat_bench_runs_first():
    """The fault tests fault the cell bench runs first and ask that the next one runs. Bench
    draws the order of a run's repeats from its id; planned without that seed, the test
    faulted repeat 0 and, where repeat 1 ran first, 'the next cell' had run before the fault.
    The repeats run as blocks, so repeat 0 is the first cell of every run: the planned order
    is still asked of bench."""
    from types import SimpleNamespace
    from harness.run import lifecycle
    from harness.plan.options import BenchOptions
    from selfcheck import faults
    ids = ["fault-pytorch-sync-%d" % n for n in range(20)]
    orders = {i: faults.run_order(SimpleNamespace(hosts=[1, 2, 3]), i, "pytorch-sync", 200)
              for i in ids}
    assert {cells[0].repeat for cells in orders.values()} == {0}  # block 0 runs first
    for run_id, cells in orders.items():
        options = BenchOptions(size="smoke", systems="pytorch-sync", steps=200, repeats=2)
        planned = lifecycle.plan_cells(options, 3, order_seed=matrix.order_seed(run_id))
        assert [c.id for c in planned] == [c.id for c in cells]  # as bench plans them


def test_the_next_cell_counts_only_if_it_ran_after_the_fault():
    from selfcheck import faults
    faulted = {"status": "failed", "started": 100.0, "ended": 110.0}
    assert faults.next_cell(faulted, {"status": "succeeded", "started": 111.0}) == "succeeded"
    assert faults.next_cell(faulted, {"status": "succeeded", "started": 80.0}) == \
        "ran before the fault"
    assert faults.next_cell(faulted, {"status": "pending"}) == "pending"
    # as status.json keeps them: a time not yet written is null
    assert faults.next_cell(dict(faulted, ended=None), {"status": "succeeded",
                                                        "started": 111.0}) == "succeeded"
    assert faults.next_cell({"status": "pending", "started": None},
                            {"status": "succeeded", "started": 80.0}) == "succeeded"


def test_unknown_names_are_clear():
    with pytest.raises(UserError, match="unknown benchmark 'lenet7'"):
        matrix.plan("smoke", 3, benchmarks="lenet7")
    with pytest.raises(UserError, match="unknown system 'caffe-sync'"):
        matrix.plan("smoke", 3, systems="caffe-sync")
    with pytest.raises(UserError, match="unknown size"):
        matrix.plan("huge", 3)


def render_local(cell):
    inv = inventory.load("local-shared")
    return launch.prepare(cell, "run1", nodes.connect_all(inv), stacks.load("current"), SHARDS)


def exports(script):
    found = {}
    for line in script.splitlines():
        if line.startswith("export "):
            key, value = line[len("export "):].split("=", 1)
            found[key] = shlex.split(value)[0]
    return found


def smoke_cell(system, nodes=3):
    return matrix.plan("smoke", nodes, systems=system)[0]


def test_pytorch_script_carries_the_inventory():
    cell = smoke_cell("pytorch-sync")
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


def test_mxnet_places_scheduler_servers_workers():
    procs = render_local(smoke_cell("mxnet-sync"))
    assert [(p.node.name, p.role, p.rank) for p in procs] == [
        ("node1", "scheduler", 0), ("node1", "server", 0), ("node2", "server", 1),
        ("node3", "server", 2), ("node1", "worker", 0), ("node2", "worker", 1),
        ("node3", "worker", 2)]
    env = exports(procs[5].script)
    assert env["DMLC_ROLE"] == "worker" and env["DMLC_PS_ROOT_URI"] == "127.0.0.1"
    assert env["DMLC_PS_ROOT_PORT"] == "29501" and env["DMLC_NUM_WORKER"] == "3"
    assert env["DMLC_NUM_SERVER"] == "3" and env["DMLC_INTERFACE"] == "lo"
    assert "# KVStore type of the workers: dist_sync" in procs[5].script
    assert "dist_async" in render_local(smoke_cell("mxnet-async"))[5].script
    assert procs[0].config["sharing"] == ["scheduler-0", "server-0", "worker-0"]
    assert procs[5].config["sharing"] == ["server-1", "worker-1"]
    assert not any(p.service for p in procs)


def test_tensorflow_sync_config_from_the_inventory():
    procs = render_local(smoke_cell("tensorflow-sync"))
    assert [(p.role, p.rank) for p in procs] == [("worker", 0), ("worker", 1), ("worker", 2)]
    env = exports(procs[1].script)
    assert json.loads(env["TF_CONFIG"]) == {
        "cluster": {"worker": ["127.0.0.1:29510", "127.0.0.1:29610", "127.0.0.1:29710"]},
        "task": {"type": "worker", "index": 1}}
    assert env["TF_USE_LEGACY_KERAS"] == "1" and env["OMP_NUM_THREADS"] == "1"
    assert "-m bench.tensorflow.train" in procs[1].script


def test_tensorflow_async_chief_ps_and_workers():
    procs = render_local(smoke_cell("tensorflow-async"))
    roles = [(p.node.name, p.role, p.rank, p.service) for p in procs]
    assert roles[0] == ("node1", "chief", 0, False)
    assert roles[1:] == [(n, r, i, True) for r in ("ps", "worker")
                         for i, n in enumerate(("node1", "node2", "node3"))]
    cluster = json.loads(exports(procs[0].script)["TF_CONFIG"])["cluster"]
    assert cluster == {"chief": ["127.0.0.1:29512"],
                       "ps": ["127.0.0.1:29511", "127.0.0.1:29611", "127.0.0.1:29711"],
                       "worker": ["127.0.0.1:29510", "127.0.0.1:29610", "127.0.0.1:29710"]}
    assert "-m bench.tensorflow.train" in procs[0].script
    assert all("-m bench.tensorflow.server" in p.script for p in procs[1:])
    # asynchronous workers each read the whole training set from their own node
    assert procs[0].config["full_data_by_worker"][2].endswith(
        "/node3/data/cifar10-synthetic-seed0/full-of-3.bin")


@pytest.mark.parametrize("system", sorted(matrix.SYSTEMS))
def test_hostile_paths_cannot_inject_commands(tmp_path, system):
    """A workdir full of shell syntax stays one literal path in every rendered script."""
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
    cell = smoke_cell(system, nodes=1)
    procs = launch.prepare(cell, "run1", nodes.connect_all(inv), stacks.load("current"), SHARDS)
    for proc in procs:
        os.makedirs(proc.out_dir)
        script = tmp_path / "run.sh"
        script.write_text(proc.script)
        subprocess.run(["bash", str(script)], cwd=str(tmp_path), capture_output=True,
                       timeout=30)
        # the script did run: it reached the python line (absent here) and wrote its rc
        assert (open(os.path.join(proc.out_dir, "rc")).read().strip()) == "127"
    assert [p for p in tmp_path.rglob("INJECTED*")] == []


def test_a_node_with_cpus_of_its_own_runs_every_role_there():
    """The rendered script pins itself (and so the trainer it starts) to the node's CPUs:
    run its lines up to the trainer, then read the shell's allowed CPUs."""
    inv = inventory.load("local-shared")
    for host in inv.hosts:
        host.cpus = "0"
    procs = launch.prepare(smoke_cell("pytorch-sync"), "run1", nodes.connect_all(inv),
                           stacks.load("current"), SHARDS)
    script = procs[1].script
    assert "taskset -pc 0 $$" in script
    lines = [l for l in script.splitlines() if l.startswith(("export ", "taskset "))]
    out = subprocess.run(["bash", "-c", "\n".join(lines + [
        "grep Cpus_allowed_list /proc/self/status"])], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["Cpus_allowed_list:", "0"]
    # the shipped local inventory pins only where each of the 3 nodes can have a CPU
    shipped = render_local(smoke_cell("pytorch-sync"))[1].script
    assert ("taskset" in shipped) == (len(os.sched_getaffinity(0)) >= 3)


def test_a_stacks_environment_wins_over_the_templates_defaults():
    """The paper stacks turn TF 2.5's oneDNN off (its default then; on, its first step died
    of SIGFPE here); the current stack keeps the template's pinned 1."""
    inv = inventory.load("local-shared")
    cell = smoke_cell("tensorflow-sync")
    for stack, expect in (("paper-py39", "0"), ("paper", "0"), ("current", "1")):
        procs = launch.prepare(cell, "run1", nodes.connect_all(inv), stacks.load(stack), SHARDS)
        assert exports(procs[0].script)["TF_ENABLE_ONEDNN_OPTS"] == expect, stack
        assert procs[0].config["stack_environment"] == (
            {"TF_ENABLE_ONEDNN_OPTS": "0"} if expect == "0" else {})
    with pytest.raises(UserError, match="environment"):
        stacks._environment("x.yml", "tensorflow", {"environment": {"rm -rf": "1"}})


def test_a_factors_level_wins_over_the_stacks_and_threads_can_be_set():
    """invoke explain: oneDNN on under the paper stack (which turns it off), 1 thread."""
    inv = inventory.load("local-shared")
    cell = matrix.plan("smoke", 3, systems="tensorflow-sync", threads=1,
                       environment={"tensorflow": "TF_ENABLE_ONEDNN_OPTS=1;DLBENCH_X=2"})[0]
    procs = launch.prepare(cell, "run1", nodes.connect_all(inv), stacks.load("paper-py39"),
                           SHARDS)
    found = exports(procs[0].script)
    assert (found["TF_ENABLE_ONEDNN_OPTS"], found["DLBENCH_X"]) == ("1", "2")
    assert (found["OMP_NUM_THREADS"], procs[0].config["threads"]) == ("1", 1)


@pytest.mark.parametrize("system", list(matrix.SYSTEMS))
def test_every_cell_json_has_exactly_the_keys_the_trainers_read(system):
    """contract/cellconfig.py lists the keys; what the controller writes must match."""
    for proc in render_local(smoke_cell(system)):
        assert cellconfig.check(json.loads(json.dumps(proc.config))) is not None


def test_a_missing_unknown_or_mistyped_key_is_named(tmp_path):
    config = json.loads(json.dumps(render_local(smoke_cell("pytorch-sync"))[0].config))
    del config["local_batch"]
    config["batch"] = 42
    config["lr"] = "fast"
    path = tmp_path / "cell.json"
    path.write_text(json.dumps(config))
    with pytest.raises(ValueError) as error:
        cellconfig.read(str(path))
    assert "missing key 'local_batch'" in str(error.value)
    assert "unknown key 'batch'" in str(error.value)
    assert "key 'lr' is str, expected int or float" in str(error.value)


def test_the_verdict_profile_runs_three_repeats_as_randomized_blocks():
    """Independent repeats as randomized complete blocks: every cell's repeat r
    before any cell's repeat r + 1, each block in a random order drawn from the run's seed
    (the same seed, the same order: a resumed or audited run can be replayed); 3 x 2 x 16
    steps (LeNet-5 2 x 64: 3 x 128), no more than one run of the old ceiling of 4 x 40
    but for LeNet-5, whose steps are 15-25 ms."""
    plan = lambda seed: [c.id for c in matrix.plan(  # noqa: E731
        "verdict", 3, benchmarks="lenet5-cifar10,resnet18-cifar10", order_seed=seed)]
    cells = matrix.plan("verdict", 3, benchmarks="lenet5-cifar10,resnet18-cifar10")
    assert len(cells) == 30 and [c.repeat for c in cells] == [0] * 10 + [1] * 10 + [2] * 10
    assert plan(7) == plan(7) != plan(8) and sorted(plan(7)) == sorted(c.id for c in cells)
    seeded = matrix.plan("verdict", 3, order_seed=7)
    assert [c.repeat for c in seeded] == sorted(c.repeat for c in seeded)  # blocks
    blocks = [[(c.benchmark, c.system) for c in seeded if c.repeat == r] for r in range(3)]
    unseeded = matrix.plan("verdict", 3)[:len(blocks[0])]
    assert blocks[0] != [(c.benchmark, c.system) for c in unseeded]  # shuffled in a block
    assert blocks[0] != blocks[1] and sorted(blocks[0]) == sorted(blocks[1])  # each its own
    # 3 x 32 steps, within the old ceiling; LeNet-5's 2 x 64 time about two seconds of steps
    steps = {(c.benchmark, c.total_steps) for c in cells}
    assert steps == {("lenet5-cifar10", 128), ("resnet18-cifar10", 32)}
    # the first epoch keeps the measured steps MSER-5 needs to look for a warm-up at all
    assert min(c.steps_per_epoch - c.warmup_steps for c in cells) >= 3 * tidy.MSER_BATCH
    assert {c.repeat for c in matrix.plan("smoke", 3, order_seed=7)} == {0}
    assert len(matrix.plan("verdict", 3, repeats=1)) == 30


def test_the_profiles_steps_in_the_docs_are_the_profiles_own():
    """The README and docs/ state the verdict size's shape by hand: a change
    of its steps or repeats that leaves them behind fails here."""
    assert matrix.shape("verdict") == \
        "3 independent repeats of 2 x 16 steps each, 2 x 64 for LeNet-5"
    assert (matrix.shape("smoke"), matrix.shape("paper")) == ("12 steps", "10 x 396 steps")
    for doc in ("README.md", "docs/reproducing.md", "docs/usage.md"):
        assert matrix.shape("verdict") in (REPO / doc).read_text(), doc


def test_the_tests_calibrate_their_passes_without_the_least_second(monkeypatch):
    """The suite sets DLBENCH_CALIBRATION_SECONDS=0 (tests/conftest.py): 10 passes, not a
    second of them; a run without it gets TRAINING's second; a bad value is refused."""
    (cell,) = matrix.plan("smoke", 3, systems="pytorch-sync")
    assert {p.config["calibration_seconds"] for p in render_local(cell)} == {0.0}
    monkeypatch.delenv(launch.CALIBRATION_VARIABLE)
    assert {p.config["calibration_seconds"] for p in render_local(cell)} == {1.0}
    monkeypatch.setenv(launch.CALIBRATION_VARIABLE, "-1")
    with pytest.raises(UserError, match="DLBENCH_CALIBRATION_SECONDS=-1 .* at least 0"):
        launch.calibration_seconds()


def test_slow_nodes_are_sampled_less_often():
    """Emulated VMs (22x slower: a lease of 22 x 30 s) sample every 11 s, not every 0.5 s:
    each sample walks the process table on the VM's one emulated vCPU."""
    assert launch.sample_interval(launch.LEASE_SECONDS) == launch.TRAINING["sample_interval"]
    assert launch.sample_interval(22 * launch.LEASE_SECONDS) == pytest.approx(11.0)
    # and run no calibration pass, not 2 warm-up passes and 10 timed: each worker in turn,
    # on an emulated vCPU (forward and backward are then not measured)
    (cell,) = matrix.plan("smoke", 3, systems="mxnet-sync")
    inv = inventory.load("local-shared")
    slow = launch.prepare(cell, "run1", nodes.connect_all(inv), stacks.load("current"), SHARDS,
                          lease=22 * launch.LEASE_SECONDS)
    assert {(p.config["calibration_steps"], p.config["calibration_seconds"]) for p in slow} == \
        {(0, 0)}
    ordinary = render_local(cell)
    assert {p.config["calibration_steps"] for p in ordinary} == {10}
    # the verdict size's repeats calibrate 5 passes each (15 over its 3 repeats)
    verdict = matrix.plan("verdict", 3, systems="mxnet-sync", benchmarks="lenet5-cifar10")[0]
    assert {p.config["calibration_steps"] for p in render_local(verdict)} == {5}
    assert verdict.profile_steps == 5


def test_workers_calibrate_together_only_where_the_probe_found_no_sharing():
    """At once only on "no sharing found": sharing, "not ruled out", no probe, and emulated
    nodes (3x or more slower) keep the calibration in turn; the choice reaches cell.json."""
    from harness.run import stall
    clean = {"shared": False, "undecided": []}
    assert launch.calibrate_together(clean)
    assert not launch.calibrate_together(dict(clean, shared=True))
    assert not launch.calibrate_together(dict(clean, undecided=["node1"]))
    assert not launch.calibrate_together(None)
    (cell,) = matrix.plan("smoke", 2, systems="pytorch-sync")
    vm = stall.Bounds(setup=1.0, step=1.0, source="test", slowness=22.0)
    assert not launch.calibrate_together(clean, vm)
    # three nodes the inventory puts on two CPUs: in turn whatever one probe read
    assert not launch.calibrate_together(clean, None, nodes.connect_all(
        inventory.load("local-shared")))
    assert {p.config["calibrate_together"] for p in render_local(cell)} == {False}
    inv = inventory.load("local")
    together = launch.prepare(cell, "run1", nodes.connect_all(inv), stacks.load("current"),
                              SHARDS, together=True)
    assert {p.config["calibrate_together"] for p in together} == {True}
