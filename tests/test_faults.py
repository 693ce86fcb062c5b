"""Failures on the local cluster, for real: a worker killed mid-cell in each system-mode, an
interrupted run resumed, bad input of every kind, and a port or a shard that pre-flight must
catch. After every fault: the cell is failed within the bound, no process of the run is left on
any node, what was measured is intact, and the next cell runs."""
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from harness.nodes import inventory, access as nodes_mod
from harness.plan import matrix
from contract import runfolder
from contract.errors import EXIT_INCOMPLETE
from selfcheck import faults
from harness.paths import REPO
from tests.conftest import INVOKE, LEASE, SHORT_LEASE, invoke

pytestmark = pytest.mark.cluster
DETECTION_BOUND = 10.0  # s from the kill to the cell marked failed
# The freeze bound shortened to its floor (harness/run/settings.py), so that a test of a stall
# does not wait out a bound sized for a busy machine (the lease likewise: tests/conftest.py)
FROZEN = 10.0
NODES = len(inventory.load("local").hosts)


# fault-bench's own table, its no-op provisioning and the cell after a fault, for one
# system-mode: every mode's and every role's faults are the fixed campaign's
# (test_every_role_killed_and_stopped_is_named), `invoke fault-bench` runs all five
FAULT_SYSTEMS = ("pytorch-sync",)


@pytest.fixture(scope="module")
def fault_bench(provisioned, tmp_path_factory):
    results = tmp_path_factory.mktemp("faults")
    out = invoke("fault-bench", "--systems", ",".join(FAULT_SYSTEMS),
                 "--results", str(results)).stdout
    (report,) = results.glob("fault-bench-*.json")
    return {"out": out, "rows": json.loads(report.read_text())["rows"]}


@pytest.mark.parametrize("system", FAULT_SYSTEMS)
def test_a_killed_worker_fails_the_cell_fast_and_leaves_nothing(fault_bench, system):
    (row,) = [r for r in fault_bench["rows"] if r.get("system") == system]
    assert row["killed_at"], "the worker was never seen training"
    assert row["status"] == "failed" and "node2/worker-1" in row["reason"], row["reason"]
    assert row["detection"] <= DETECTION_BOUND, row
    assert row["strays"] == 0
    assert row["next_cell"] == "succeeded"
    # what the faulted cell measured before the fault is kept, and the run's records are whole
    run = Path(row["run"])
    records = [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines()]
    assert sorted(r["value"] for r in records if r["metric"] == "status") == [0.0, 1.0]
    (faulted,) = [s.cell_id for s in runfolder.RunFolder(run).statuses()
                  if s["status"] == "failed"]
    assert list((run / faulted).glob("node1/*/memory.csv"))


def test_the_fault_table_is_printed_after_a_provisioning_rerun_that_changes_nothing(
        fault_bench):
    """fault-bench provisions the local cluster again first: the one no-op re-run of the
    current stack in the suite (the paper stack's is tests/test_paper_stack.py)."""
    (rerun,) = [r for r in fault_bench["rows"] if r["fault"] == "no-op provisioning re-run"]
    assert rerun["changed"] == 0, rerun
    assert "provisioned in" in fault_bench["out"] and "changed=0 over %d nodes" % NODES \
        in fault_bench["out"]
    for system in FAULT_SYSTEMS:
        assert "%s: worker on node 2 killed" % system in fault_bench["out"]


def test_an_interrupted_run_resumes_with_only_its_unfinished_cells(provisioned, tmp_path):
    run_id = "interrupted"
    command = [INVOKE, "bench", "--run", run_id, "--systems", "pytorch-sync,mxnet-sync",
               "--steps", "200", "--results", str(tmp_path)]
    bench = subprocess.Popen(command, cwd=str(REPO), stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    cells = matrix.plan("smoke", NODES, systems="pytorch-sync,mxnet-sync", steps=200)
    second = tmp_path / run_id / cells[1].id / "status.json"
    deadline = time.monotonic() + 300
    while runfolder.read_json(second, {}).get("status") != "running" or \
            not runfolder.read_json(second, {}).get("processes"):
        assert time.monotonic() < deadline and bench.poll() is None, bench.stdout.read()
        time.sleep(0.2)
    bench.send_signal(signal.SIGINT)  # Ctrl-C
    out = bench.communicate(timeout=120)[0]
    assert bench.returncode == 130, out
    assert "Traceback" not in out and "invoke bench --run %s" % run_id in out
    first = tmp_path / run_id / cells[0].id
    assert runfolder.read_json(first / "status.json")["status"] == "succeeded"
    status = runfolder.read_json(second)
    assert (status["status"], status["reason"]) == ("failed", "interrupted")
    nodes = nodes_mod.connect_all(inventory.load("local"))
    assert sum(len(p) for p in faults.strays(nodes, run_id).values()) == 0
    kept = {p: p.stat().st_mtime for p in first.rglob("*") if p.is_file()}

    out = invoke("bench", "--run", run_id, "--results", str(tmp_path)).stdout
    assert "1 cell(s) to run; kept: 1 succeeded" in out
    assert "cell 1/1" in out and cells[1].id in out and cells[0].id not in out.split("cell 1/1")[1]
    assert {p: p.stat().st_mtime for p in first.rglob("*") if p.is_file()} == kept
    assert runfolder.read_json(second)["status"] == "succeeded"
    assert (tmp_path / run_id / ".attempts" / (cells[1].id + ".1") / "status.json").is_file()
    out = invoke("bench", "--run", run_id, "--results", str(tmp_path)).stdout
    assert "nothing left to run" in out


def test_a_worker_lost_in_the_profiled_steps_keeps_the_cells_timing(provisioned, tmp_path):
    """TensorFlow's profiler has aborted a worker in stop(), after its timed steps: the cell
    keeps every worker's timing and says that its operator profile is incomplete."""
    from harness import commands
    run_id, system = "lost-in-profile", "tensorflow-sync"
    nodes = nodes_mod.connect_all(inventory.load("local"))
    (cell,) = matrix.plan("smoke", NODES, systems=system, profile_steps=300)
    killer = faults.KillWhenTraining("node1", "node2", cell.id, phase="profile")
    # enough profiled steps (seconds) for the kill to come while they run
    commands.bench_named("local", "current", "smoke", str(tmp_path), run=run_id,
                         systems=system, profile_steps=300, hooks=[killer])
    assert killer.killed_at
    status = runfolder.read_json(tmp_path / run_id / cell.id / "status.json")
    assert status["status"] == "succeeded", status
    # every death seen in the same poll names itself, in process order: the killed worker's
    # peer may exit (1) in the round that sees the kill
    assert status["warning"].startswith("operator profile incomplete: "), status
    assert "node2/worker-1 exited with 137" in status["warning"], status
    assert status["detected"] - killer.killed_at < DETECTION_BOUND
    assert sum(len(p) for p in faults.strays(nodes, run_id).values()) == 0
    invoke("analyze", "--results", str(tmp_path), "--run", run_id)
    run = tmp_path / run_id
    records = [json.loads(l) for l in (run / "records.jsonl").read_text().splitlines()]
    timed = {r["rank"] for r in records if r["metric"] == "step_samples"}
    assert timed == set(range(NODES))
    assert "operator profile incomplete" in (run / "analysis" / "report.md").read_text()


def test_a_framework_crash_runs_the_cell_once_more_and_keeps_the_first_attempt(provisioned,
                                                                                tmp_path):
    """SIGSEGV, as TF 2.21's coordinator has given itself: one more attempt, named."""
    from harness import commands
    run_id, system = "crashed", "pytorch-sync"
    (cell,) = matrix.plan("smoke", NODES, systems=system, steps=200)
    killer = faults.KillWhenTraining("node1", "node2", cell.id, signal="SEGV")
    commands.bench_named("local", "current", "smoke", str(tmp_path), run=run_id,
                         systems=system, steps=200, hooks=[killer])
    assert killer.killed_at and runfolder.RunFolder(tmp_path / run_id).attempts(cell.id)
    status = runfolder.read_json(tmp_path / run_id / cell.id / "status.json")
    assert status["status"] == "succeeded", status
    assert status["warning"].startswith("ran twice: the first attempt failed (node2/worker-1 "
                                        "exited with 139"), status
    first = tmp_path / run_id / ".attempts" / (cell.id + ".1") / "status.json"
    assert "node2/worker-1 exited with 139" in runfolder.read_json(first)["reason"]


def test_fail_fast_leaves_the_rest_pending(provisioned, tmp_path):
    result = invoke("bench", "--systems", "pytorch-sync,mxnet-sync", "--epochs", "100",
                    "--timeout", "8", "--fail-fast", "--results", str(tmp_path),
                    codes=(EXIT_INCOMPLETE,))  # a script sees the run is not whole
    out = result.stdout
    assert "stopping (--fail-fast): 1 cell(s) left pending" in out
    assert "has 1 failed, 1 pending cell(s)" in result.stderr, result.stderr
    (run,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    states = sorted(runfolder.read_json(p)["status"] for p in run.glob("*/status.json"))
    assert states == ["failed", "pending"]


def _expect_error(args, *phrases):
    result = invoke(*args, check=False)
    text = result.stdout + result.stderr
    assert result.returncode == 2, text
    assert "Traceback" not in text and "fix:" in text, text
    for phrase in phrases:
        assert phrase in text, text


def test_bad_input_is_a_clear_error(provisioned, tmp_path):
    _expect_error(["bench", "--systems", "caffe-sync", "--dry-run"],
                  "unknown system 'caffe-sync'", "pytorch-sync")
    _expect_error(["bench", "--benchmarks", "vgg16-cifar10", "--dry-run"],
                  "unknown benchmark 'vgg16-cifar10'")
    _expect_error(["bench", "--systems", "pytorch-sync", "--steps", "1200", "--results",
                   str(tmp_path)], "need 50400 per shard",
                  "lower --steps to %d" % (50000 // NODES // 42))
    bad_inventory = tmp_path / "bad.yml"
    bad_inventory.write_text("all:\n  hosts:\n    n1: {address: [oops\n")
    _expect_error(["bench", "--inventory", str(bad_inventory), "--dry-run"], str(bad_inventory))
    stack = tmp_path / "odd.yml"
    stack.write_text("name: odd\npython: '3.11'\nframeworks:\n  caffe:\n    import: caffe\n"
                     "    packages: [caffe==1.0]\n")
    _expect_error(["bench", "--stack", str(stack), "--dry-run"], "unknown framework 'caffe'")
    archive = tmp_path / "cifar-10-binary.tar.gz"
    archive.write_bytes(b"not an archive")
    _expect_error(["provision", "--data", "real", "--data-archive", str(archive)],
                  "c32a1d4ab5d03f1284b67883e8d87530")
    old = tmp_path / "results" / "old-run"
    old.mkdir(parents=True)
    (old / "manifest.json").write_text(json.dumps({"results_format": 0}))
    _expect_error(["analyze", "--results", str(tmp_path / "results"), "--run", "old-run"],
                  "results format 0")


def test_preflight_names_a_busy_port_a_corrupt_shard_other_code_and_a_shared_workdir(
        provisioned, tmp_path):
    """Four faults, all named before any cell: a port in use, a shard changed on disk, a
    trainer on node2 that is not the controller's (edited there since provisioning: the run
    would record the controller's commit and run other code), and node1's workdir holding
    node2's marker, as provisioning leaves it where two nodes share one folder."""
    import socket
    node2 = inventory.load("local").hosts[1]
    shard = next(Path(node2.workdir).expanduser().glob("data/cifar10-*/shard-1-of-%d.bin" % NODES))
    backup = tmp_path / "shard.bak"
    shutil.copyfile(shard, backup)
    trainer = Path(node2.workdir).expanduser() / "code" / "bench" / "pytorch" / "train.py"
    original = trainer.read_text()
    marker = Path(inventory.load("local").hosts[0].workdir).expanduser() / "node-name"
    assert marker.read_text() == "node1\n"  # written by provisioning
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", inventory.load("local").hosts[0].base_port))
    listener.listen()
    try:
        with open(shard, "r+b") as handle:
            handle.seek(100)
            byte = handle.read(1)
            handle.seek(100)
            handle.write(bytes([byte[0] ^ 0xFF]))
        trainer.write_text(original + "# edited on the node\n")
        marker.write_text("node2\n")
        _expect_error(["bench", "--systems", "pytorch-sync", "--results", str(tmp_path)],
                      "4 problem(s)", "node1: its workdir %s holds node node2's marker" % marker.parent, "node1: port(s) %d already in use" % listener.getsockname()[1],
                      "node2: dataset file %s has md5" % shard,
                      "node2: its bench/ and contract/ code is not this controller's (digest")
        assert not list(tmp_path.glob("*/manifest.json"))  # nothing started
    finally:
        listener.close()
        shutil.copyfile(backup, shard)
        trainer.write_text(original)
        marker.write_text("node1\n")


def test_a_dead_controller_leaves_nothing_running_and_its_run_resumes(provisioned, tmp_path,
                                                                      capsys):
    """SIGKILL the controller mid-cell: no cleanup code runs, so the roles' leases must stop
    them; then `bench --run ID` reruns the cell that was left `running`. The lease is
    shortened to LEASE s (DLBENCH_LEASE_SECONDS) rather than waiting out the default 30."""
    run_id = "orphaned"
    bench = subprocess.Popen([INVOKE, "bench", "--run", run_id, "--systems", "pytorch-sync",
                              "--epochs", "2", "--steps", "300", "--results", str(tmp_path)],
                             cwd=str(REPO), env=dict(os.environ, **SHORT_LEASE),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # 600 LeNet-5 steps last about 25 s here, longer than the lease: the lease stops them
    (cell,) = matrix.plan("smoke", NODES, systems="pytorch-sync", epochs=2, steps=300)
    status_file = tmp_path / run_id / cell.id / "status.json"
    deadline = time.monotonic() + 300
    while not runfolder.read_json(status_file, {}).get("processes"):
        assert time.monotonic() < deadline and bench.poll() is None
        time.sleep(0.2)
    progress = Path(inventory.load("local").hosts[0].workdir).expanduser() / "runs" / run_id / \
        cell.id / "worker-0" / "progress.json"
    while runfolder.read_json(progress, {}).get("step", 0) < 5:  # training, not starting up
        assert time.monotonic() < deadline and bench.poll() is None
        time.sleep(0.2)
    bench.kill()
    bench.wait()
    killed = time.monotonic()
    nodes = nodes_mod.connect_all(inventory.load("local"))
    assert sum(len(p) for p in faults.strays(nodes, run_id).values()) > 0  # orphans, for now
    while sum(len(p) for p in faults.strays(nodes, run_id).values()):
        assert time.monotonic() - killed < LEASE + 20, faults.strays(nodes, run_id)
        time.sleep(1)
    with capsys.disabled():
        print("\ncontroller killed: its roles stopped themselves %.1f s later (lease %d s)"
              % (time.monotonic() - killed, LEASE))
    assert runfolder.read_json(status_file)["status"] == "running"
    node1 = Path(inventory.load("local").hosts[0].workdir).expanduser()
    lease_log = (node1 / "runs" / run_id / cell.id / "worker-0" / "lease.log").read_text()
    assert "lease expired" in lease_log
    out = invoke("bench", "--run", run_id, "--results", str(tmp_path), env=SHORT_LEASE).stdout
    assert "1 cell(s) to run" in out
    assert runfolder.read_json(status_file)["status"] == "succeeded"


def test_every_role_killed_and_stopped_is_named(provisioned, tmp_path):
    """The fixed campaign (selfcheck/campaign.py): every role of every system-mode (chief, ps,
    worker, scheduler, server) killed once in training and stopped once before it wrote any
    progress, each a cell of one run. Each cell fails with its reason naming the role and
    node first: a kill within DETECTION_BOUND, a stop within STOP_GOAL (the start-up bound
    alone once took 533 s); the run goes on to the next cell, which trains (a kill needs its
    step 1), and nothing is left on any node."""
    from selfcheck import campaign
    rows, left = campaign.fixed("local", "current", str(tmp_path))
    assert {(r["system"], r["role"]) for r in rows} >= {
        ("tensorflow-async", "chief"), ("tensorflow-async", "ps"), ("mxnet-sync", "scheduler"),
        ("mxnet-sync", "server"), ("pytorch-sync", "worker"), ("tensorflow-sync", "worker")}
    assert len(rows) == 2 * len({(r["system"], r["role"]) for r in rows})
    for row in rows:
        bound = DETECTION_BOUND if row["fault"] == "kill" else campaign.STOP_GOAL
        assert row["injected"] and row["status"] == "failed", row
        assert row["named_first"], row
        assert row["detection"] is not None and row["detection"] <= bound, row
    assert left == 0


CALIBRATE_SECONDS = 5.0
STALLS = [  # (system, phase of node 2's victim when it is stopped, victim, extra bench options)
    # A stop before any progress, and a service's, are the fixed campaign's
    # (test_every_role_killed_and_stopped_is_named); these are the phases after it.
    # TF-sync's heartbeat aborts node1's collective about 15 s after node2 stops (exit 1):
    # the reason names node2 first
    ("tensorflow-sync", "train", "worker-1", ("--steps", "300")),
    ("pytorch-sync", "calibrate", "worker-1", ()),
    ("pytorch-sync", "profile", "worker-1", ("--profile-steps", "300")),
]


def test_stopped_processes_fail_their_cells_as_stalled(provisioned, tmp_path, monkeypatch):
    """SIGSTOP leaves a process alive and silent: no crash to see, its progress file standing
    still, and its state T in the polls. Each cell fails as stalled within seconds, naming
    the process, with its log tail; the run goes on to the next cell, and nothing of the run
    is left on any node. The stalls are the cells of one run, in STALLS's order (one probe
    and one start of the controller instead of three)."""
    from harness import commands
    from harness.run import hooks, launch, stall
    monkeypatch.setenv(stall.FROZEN_VARIABLE, str(FROZEN))
    # a calibration long enough to be caught in: the suite's (conftest: the 10 passes alone)
    # takes about 0.1 s of LeNet-5 on a fast CPU, less than the watch loop's poll, so the
    # stopper could miss the phase; only the profile stall's cell calibrates to the end, so
    # this costs it the seconds below
    monkeypatch.setenv(launch.CALIBRATION_VARIABLE, str(CALIBRATE_SECONDS))
    run_id = "stalled"
    nodes = nodes_mod.connect_all(inventory.load("local"))
    # the repeat index keeps the ids apart: two cells may differ only in profile_steps,
    # which an id leaves out
    cells = [dataclasses.replace(matrix.plan("smoke", NODES, systems=system,
                                             **_plan_options(options))[0], repeat=i)
             for i, (system, _, _, options) in enumerate(STALLS)]
    stoppers = [faults.KillWhenTraining("node2", "node2", cell.id, phase=phase, signal="STOP",
                                        label=victim)
                for cell, (_, phase, victim, _) in zip(cells, STALLS)]
    commands.bench_named("local", "current", "smoke", str(tmp_path), run=run_id,
                         hooks=[hooks.GivenCells(cells)] + stoppers)
    for cell, stopper, stalled in zip(cells, stoppers, STALLS):
        check_stalled(tmp_path / run_id / cell.id, stopper, *stalled[:3])
    assert sum(len(p) for p in faults.strays(nodes, run_id).values()) == 0


def check_stalled(cell, stopper, system, phase, victim):
    """The cell stopped in `phase` failed as stalled within a poll or two of HALTED_SECONDS,
    naming the victim (or, stopped in the profiled steps, kept its timing and said the
    profile is incomplete)."""
    from harness.run import stall
    assert stopper.killed_at and stopper.victim_phase == phase, (system, phase)
    status = runfolder.read_json(cell / "status.json")
    said = "stalled: node2/%s is stopped by a signal (state T)" % victim
    if phase == "profile":  # after every worker wrote its timed steps: the timing is kept
        assert status["status"] == "succeeded", status
        assert status["warning"].startswith("operator profile incomplete: " + said), status
    else:
        assert status["status"] == "failed", status
        blamed = "node2/%s is stopped by a signal" % victim  # before a peer failed on it
        assert status["reason"].startswith((said, blamed)), status["reason"]
    after = status["detected"] - stopper.killed_at
    print("\n%s stopped in %s: failed %.1f s later: %s" % (
        system, phase, after, status.get("reason", "")[:120]))
    assert stall.HALTED_SECONDS - 1.0 < after < stall.HALTED_SECONDS + 5.0, status
    assert "node2/%s" % victim in status["log_tails"]
    # asked for its stacks before the stop (launch.ask_for_stacks): its log says where it stood
    log = (cell / "node2" / victim / "log.txt").read_text()
    assert "(most recent call first)" in log, log[-2000:]


def _plan_options(options):
    """("--steps", "300") -> {"steps": 300}: a stall's bench options as matrix.plan's."""
    pairs = dict(zip(options[::2], options[1::2]))
    return {name.strip("-").replace("-", "_"): int(value) for name, value in pairs.items()}
