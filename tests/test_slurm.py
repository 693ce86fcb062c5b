"""Slurm on the emulated cluster (root; Debian's slurm-wlm and munge): `cluster.up --slurm`
starts munged and slurmctld here and a slurmd in each namespace host; job steps run in the
host's namespace and cgroups; `cluster.down` stops every daemon by its recorded pid."""
import json
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from contract.errors import EXIT_INCOMPLETE
from harness.run import launch
from harness.clusters import emulated as cluster
from harness.clusters import slurm
from tests.conftest import invoke

# an executable file: a daemon hidden by a mount of /dev/null over it (.ci/bare-check) is not
INSTALLED = all(Path(p).is_file() and os.access(p, os.X_OK) for p in slurm.DAEMONS.values())
pytestmark = [
    pytest.mark.cluster,
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="the emulated cluster needs root"),
    pytest.mark.skipif(not INSTALLED and not os.environ.get("DLBENCH_CI"),
                       reason="Slurm is not installed (apt-get install slurm-wlm munge)"),
]
WORKDIR = Path("~/.cache/dlbench/netns").expanduser()  # the hosts' workdirs, on this machine


@pytest.fixture(scope="module")
def with_slurm():
    was_up = cluster.state_file().is_file()
    invoke("cluster.up", "--slurm")  # adds Slurm to a cluster that is up without it
    yield cluster.read_state()
    if not was_up:
        invoke("cluster.down")


def test_every_host_is_an_idle_slurm_node(with_slurm):
    names = [h["name"] for h in with_slurm["hosts"]]
    assert slurm.node_states(with_slurm) == {n: "idle" for n in names}
    assert "slurm idle" in invoke("cluster.status").stdout
    clusters = subprocess.run(["sacctmgr", "-n", "-P", "show", "cluster", "format=cluster"],
                              capture_output=True, text=True, timeout=30,
                              env=slurm.environment(with_slurm))
    assert clusters.stdout.split() == [slurm.CLUSTER], clusters.stderr  # accounting answers


def test_a_job_step_runs_in_each_hosts_namespace_and_cgroup(with_slurm):
    hosts = with_slurm["hosts"]
    out = subprocess.run(
        ["srun", "-N%d" % len(hosts), "--ntasks-per-node=1", "sh", "-c",
         "echo $SLURMD_NODENAME $(hostname -I) $(grep ':cpu:' /proc/self/cgroup | cut -d: -f3)"],
        capture_output=True, text=True, timeout=60, env=slurm.environment(with_slurm))
    assert out.returncode == 0, out.stderr
    seen = sorted(line.split() for line in out.stdout.splitlines())
    assert seen == [[h["name"], h["address"], "/dlbench/%s" % h["name"]] for h in hosts]


@pytest.fixture
def allocation(with_slurm):
    """Three nodes allocated (salloc --no-shell), released after the test: the partition,
    batch and fault tests need the nodes free."""
    env = slurm.environment(with_slurm)
    out = subprocess.run(["salloc", "-N3", "--no-shell", "--job-name=dlbench-test"],
                         capture_output=True, text=True, timeout=60, env=env)
    job = re.search(r"allocation (\d+)", out.stderr + out.stdout).group(1)
    yield dict(env, SLURM_JOB_ID=job)
    if Path(env["SLURM_CONF"]).is_file():  # else the last test took Slurm down, job and all
        subprocess.run(["scancel", job], env=env, timeout=30)


def test_provisioned_and_run_through_slurm_with_sacct_for_every_step(allocation, tmp_path):
    """Provisioned through job steps (the slurm connection: no SSH), then the smoke matrix
    run through Slurm: every role a job step, recorded, and Slurm's accounting of each step
    (sacct) kept beside the cell and in the records."""
    out = invoke("provision", "--inventory", "netns-slurm", env=allocation).stdout
    job = allocation["SLURM_JOB_ID"]
    assert "through Slurm job steps (srun --overlap in allocation %s" % job in out
    assert "changed=" in out and "over 3 nodes" in out
    for name in ("node1", "node2", "node3"):  # each node's facts, gathered on that node
        facts = json.loads((WORKDIR / name / "facts.json").read_text())
        assert (facts["node"], facts["provisioned_through"]) == (name, "slurm")
    # the two system-modes with every kind of role between them: TF-async's chief,
    # parameter servers and workers, MXNet's scheduler, servers and workers. Each role is a job
    # step the same way whatever the mode; each kind of role runs over SSH on the same hosts
    # (tests/test_emulated_cluster.py)
    out = invoke("bench", "--inventory", "netns-slurm", "--systems",
                 "tensorflow-async,mxnet-sync", "--results", str(tmp_path), env=allocation).stdout
    assert "2 succeeded, 0 failed" in out
    assert re.search(r"sacct: (\d+) job step\(s\) of 2 cell\(s\) kept", out), out[-2000:]
    (run,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    records = [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines()]
    steps = {(r["cell_id"], r["node"], r["role"], r["rank"]): r.get("slurm_step")
             for r in records if r["metric"] == "peak_rss_mb"}
    assert steps and all(s and s.startswith(job + ".") for s in steps.values())
    assert len(set(steps.values())) == len(steps)  # one job step per role
    left = subprocess.run(["squeue", "-h", "-s", "-j", job], capture_output=True, text=True,
                          env=allocation).stdout.split()
    assert left == []  # no step outlives its cell
    for cell in {c for c, _, _, _ in steps}:
        table = (run / cell / "sacct.txt").read_text()
        print("\nSACCT %s\n%s" % (cell, table))  # pytest -s: the closing note's figures
        assert {s for (c, _, _, _), s in steps.items() if c == cell} <= set(
            line.split("|")[0] for line in table.splitlines())
    slurm_rss = {(r["cell_id"], r["node"], r["role"], r["rank"]): r["value"]
                 for r in records if r["metric"] == "slurm_max_rss_mb"}
    # Slurm measured every role's memory; also that of a role whose own last write never came
    # (TensorFlow's profiler died of a bus error after the timed steps here once: the cell is
    # kept as "operator profile incomplete", the role has no peak_rss_mb of its own)
    assert set(steps) <= set(slurm_rss)


def test_outside_an_allocation_the_slurm_inventory_says_how_to_get_one(with_slurm):
    out = invoke("bench", "--inventory", "netns-slurm", "--dry-run", check=False,
                 env=dict(slurm.environment(with_slurm), SLURM_JOB_ID=""))
    assert out.returncode == 2
    assert "not inside a Slurm allocation" in out.stderr and "salloc -N3" in out.stderr


def _wait_for_job(job, env, seconds=600):
    deadline = time.monotonic() + seconds
    while subprocess.run(["squeue", "-h", "-j", job], capture_output=True, text=True,
                         env=env).stdout.strip():
        assert time.monotonic() < deadline, "job %s still in the queue" % job
        time.sleep(2)


def test_partition_asks_for_an_allocation_runs_in_it_and_releases_it(with_slurm, tmp_path):
    env = dict(slurm.environment(with_slurm), SLURM_JOB_ID="")
    out = invoke("bench", "--inventory", "netns-slurm", "--partition", slurm.PARTITION,
                 "--systems", "pytorch-sync", "--results", str(tmp_path), env=env).stdout
    job = re.search(r"allocation (\d+) granted", out).group(1)
    assert "asking Slurm for 3 node(s)" in out and "allocation %s released" % job in out
    assert "1 succeeded, 0 failed" in out
    _wait_for_job(job, env, seconds=30)  # released: gone from the queue


def test_a_batch_script_runs_the_plan_and_resubmitted_resumes_it(with_slurm, tmp_path):
    env = dict(slurm.environment(with_slurm), SLURM_JOB_ID="")
    out = invoke("bench", "--inventory", "netns-slurm", "--sbatch", "--submit", "--systems",
                 "pytorch-sync", "--run", "batch", "--results", str(tmp_path), env=env).stdout
    job = re.search(r"submitted: job (\d+)", out).group(1)
    _wait_for_job(job, env)
    log = tmp_path / "batch.sbatch.log"
    assert "1 succeeded, 0 failed" in log.read_text(), log.read_text()[-3000:]
    (status,) = _status(tmp_path, "batch").values()
    assert status["status"] == "succeeded"
    out = invoke("collect", "--inventory", "netns-slurm", "--run", "batch", "--results",
                 str(tmp_path), env=env).stdout  # the allocation is over: shared filesystem
    assert "reading the 3 nodes' workdirs on the shared filesystem" in out
    assert "sacct: 3 job step(s) of 1 cell(s) kept" in out and "collected batch" in out
    again = subprocess.run(["sbatch", str(tmp_path / "batch.sbatch")], capture_output=True,
                           text=True, env=env, timeout=60)
    _wait_for_job(re.search(r"job (\d+)", again.stdout).group(1), env)
    assert "nothing left to run" in log.read_text()


# --- faults: each ends as a failed cell within the bound, or a clear error before the start -

DETECTION_BOUND = 10.0


@pytest.fixture
def allocate(with_slurm):
    """allocate(minutes=None) -> the environment of a new 3-node allocation; every one is
    released, and every node resumed, at the end."""
    env, jobs = slurm.environment(with_slurm), []

    def allocate(minutes=None):
        out = subprocess.run(["salloc", "-N3", "--no-shell", "--job-name=dlbench-fault"]
                             + (["--time=%d" % minutes] if minutes else []),
                             capture_output=True, text=True, timeout=60, env=env)
        jobs.append(re.search(r"allocation (\d+)", out.stderr + out.stdout).group(1))
        return dict(env, SLURM_JOB_ID=jobs[-1])
    yield allocate
    for job in jobs:
        subprocess.run(["scancel", job], env=env, timeout=30)
    for host in with_slurm["hosts"]:
        subprocess.run(["scontrol", "update", "nodename=%s" % host["name"], "state=resume"],
                       env=env, capture_output=True, timeout=30)


def _when_training(run_id, then, node="node1", role="worker-0", step=2):
    """A thread that calls then() once `role` on `node` reports `step`; returns it and the time
    then() was called (box["at"])."""
    box = {}

    def watch():
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            for progress in (WORKDIR / node / "runs" / run_id).glob("*/%s/progress.json" % role):
                try:
                    if json.loads(progress.read_text()).get("step", 0) >= step:
                        box["cell"] = progress.parent.parent.name
                        then(progress.parent.parent.name)
                        box["at"] = time.time()
                        return
                except ValueError:
                    pass  # caught mid-write
            time.sleep(0.1)
    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread, box


def _bench(env, tmp_path, run_id, systems="pytorch-sync,mxnet-sync", check=True, codes=(0,)):
    return invoke("bench", "--inventory", "netns-slurm", "--systems", systems, "--steps", "200",
                  "--run", run_id, "--results", str(tmp_path), env=env, check=check, codes=codes)


def _status(tmp_path, run_id):
    return {p.parent.name.split("_")[1]: json.loads(p.read_text())
            for p in (tmp_path / run_id).glob("*/status.json")}


def _row(fault, status, since):
    """The fault table's row, printed (pytest -s shows it) for the closing note's figures."""
    print("\nFAULT-TABLE | %s | %s | detected %.1f s | cleanup %.1f s | %s" % (
        fault, status["status"], status["detected"] - since, status["ended"] - status["detected"],
        status.get("reason", "")[:120]))


def _strays(run_id):
    return [p for p in Path("/proc").glob("[0-9]*")
            if _cwd(p).startswith(str(WORKDIR)) and "/runs/%s/" % run_id in _cwd(p) + "/"]


def _cwd(proc):
    try:
        return os.readlink(str(proc / "cwd"))
    except OSError:
        return ""


def test_a_cancelled_job_step_fails_its_cell_and_the_next_runs(allocate, tmp_path):
    env = allocate()

    run_id = "step-%d" % time.time()

    def cancel_step(cell):
        step = (WORKDIR / "node2" / "runs" / run_id / cell / "worker-1" / "slurm_step")
        subprocess.run(["scancel", step.read_text().strip()], env=env, timeout=30)
    thread, box = _when_training(run_id, cancel_step)
    # a failed cell: the run is incomplete (exit 3), the next cell measured all the same
    out = _bench(env, tmp_path, run_id, codes=(EXIT_INCOMPLETE,)).stdout
    thread.join(timeout=1)
    states = _status(tmp_path, run_id)
    faulted = states["pytorch-sync"]
    assert faulted["status"] == "failed" and "node2/worker-1" in faulted["reason"], out
    _row("job step cancelled", faulted, box["at"])
    assert faulted["detected"] - box["at"] < DETECTION_BOUND
    assert states["mxnet-sync"]["status"] == "succeeded", out
    assert _strays(run_id) == []


@pytest.mark.parametrize("state", ["drain", "down"])
def test_a_node_taken_away_mid_cell_fails_it_and_stops_the_run(allocate, tmp_path, state):
    env = allocate()
    run_id = "node-%s-%d" % (state, time.time())  # the hosts' run folders outlive tmp_path
    thread, box = _when_training(run_id, lambda cell: subprocess.run(
        ["scontrol", "update", "nodename=node2", "state=%s" % state, "reason=dlbench-test"],
        env=env, timeout=30))
    out = _bench(env, tmp_path, run_id, check=False)
    thread.join(timeout=1)
    assert out.returncode == EXIT_INCOMPLETE and "Traceback" not in out.stderr, out.stderr
    assert "1 cell(s) left pending" in out.stderr and "--run %s" % run_id in out.stderr
    states = _status(tmp_path, run_id)
    faulted = states["pytorch-sync"]
    assert faulted["status"] == "failed", out.stdout
    _row("node set to %s" % state.upper(), faulted, box["at"])
    assert faulted["detected"] - box["at"] < DETECTION_BOUND, faulted["reason"]
    assert states["mxnet-sync"]["status"] == "pending"
    if state == "drain":  # the allocation lives on: the run's own job steps stop the roles
        assert _strays(run_id) == []
    else:  # DOWN ends the allocation (it may read COMPLETING as the run stops)
        _wait_until_gone(run_id)


def _wait_until_gone(run_id):
    """Once the allocation is over no job step can stop the roles: Slurm ends its steps, and
    each role stops itself when its lease runs out."""
    deadline = time.monotonic() + launch.base_lease() + 10
    while _strays(run_id):
        assert time.monotonic() < deadline, _strays(run_id)
        time.sleep(1)


def test_the_allocations_time_limit_fails_the_cell_and_stops_the_run(allocate, tmp_path):
    env = allocate(minutes=1)
    granted = time.time()
    out = invoke("bench", "--inventory", "netns-slurm", "--systems", "pytorch-sync,mxnet-sync",
                 "--epochs", "1000", "--run", "limit", "--results", str(tmp_path), env=env,
                 check=False)  # the first cell runs for minutes: the minute's limit cuts it
    assert out.returncode == EXIT_INCOMPLETE and "Traceback" not in out.stderr, out.stderr
    states = _status(tmp_path, "limit")
    faulted = states["pytorch-sync"]
    assert faulted["status"] == "failed", out.stdout
    assert states["mxnet-sync"]["status"] == "pending"
    _row("time limit (1 min)", faulted, granted + 60)  # Slurm ends the job up to ~30 s later
    assert "left pending" in out.stderr and "Slurm allocation" in out.stderr, out.stderr
    _wait_until_gone("limit")


def test_a_controller_that_does_not_answer_is_a_clear_error_before_the_start(allocate,
                                                                              with_slurm,
                                                                              tmp_path):
    env = allocate()
    pid = with_slurm["slurm"]["slurmctld"]
    os.kill(pid, signal.SIGSTOP)  # its port still accepts connections; nothing answers
    try:
        began = time.monotonic()
        out = invoke("bench", "--inventory", "netns-slurm", "--results", str(tmp_path),
                     env=env, check=False)
        took = time.monotonic() - began
    finally:
        os.kill(pid, signal.SIGCONT)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert "slurmctld does not answer" in out.stderr and "scontrol ping" in out.stderr
    print("\nFAULT-TABLE | slurmctld stopped (SIGSTOP) | error before the start | %.1f s | %s"
          % (took, out.stderr.strip().splitlines()[0][:120]))
    assert took < 30 and not list(tmp_path.iterdir())


def test_down_stops_every_slurm_daemon_it_started(with_slurm):
    recorded = with_slurm["slurm"]
    pids = [recorded[name] for name in ("munged", "mariadbd", "slurmdbd", "slurmctld")]
    pids += list(recorded["slurmd"].values())
    invoke("cluster.down")
    alive = [p for p in pids if Path("/proc/%d" % p).exists()
             and Path("/proc/%d/stat" % p).read_text().split(")")[-1].split()[0] != "Z"]
    assert alive == []
