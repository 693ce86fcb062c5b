"""Slurm on the emulated cluster (root; Debian's slurm-wlm and munge): `cluster.up --slurm`
starts munged and slurmctld here and a slurmd in each namespace host; job steps run in the
host's namespace and cgroups; `cluster.down` stops every daemon by its recorded pid."""
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from harness.clusters import emulated as cluster
from harness.clusters import slurm
from tests.conftest import invoke

INSTALLED = all(Path(p).exists() for p in slurm.DAEMONS.values())
pytestmark = [
    pytest.mark.cluster,
    pytest.mark.skipif(os.geteuid() != 0, reason="the emulated cluster needs root"),
    pytest.mark.skipif(not INSTALLED and not os.environ.get("DLBENCH_CI"),
                       reason="Slurm is not installed (apt-get install slurm-wlm munge)"),
]


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


def test_a_job_step_runs_in_each_hosts_namespace_and_cgroup(with_slurm):
    hosts = with_slurm["hosts"]
    out = subprocess.run(
        ["srun", "-N%d" % len(hosts), "--ntasks-per-node=1", "sh", "-c",
         "echo $SLURMD_NODENAME $(hostname -I) $(grep ':cpu:' /proc/self/cgroup | cut -d: -f3)"],
        capture_output=True, text=True, timeout=60, env=slurm.environment(with_slurm))
    assert out.returncode == 0, out.stderr
    seen = sorted(line.split() for line in out.stdout.splitlines())
    assert seen == [[h["name"], h["address"], "/dlbench/%s" % h["name"]] for h in hosts]


@pytest.fixture(scope="module")
def allocation(with_slurm):
    """Three nodes allocated (salloc --no-shell), released at the end."""
    env = slurm.environment(with_slurm)
    out = subprocess.run(["salloc", "-N3", "--no-shell", "--job-name=dlbench-test"],
                         capture_output=True, text=True, timeout=60, env=env)
    job = re.search(r"allocation (\d+)", out.stderr + out.stdout).group(1)
    yield dict(env, SLURM_JOB_ID=job)
    if Path(env["SLURM_CONF"]).is_file():  # else the last test took Slurm down, job and all
        subprocess.run(["scancel", job], env=env, timeout=30)


def test_the_smoke_matrix_runs_as_job_steps_of_the_allocation(allocation, tmp_path):
    """Provisioned over SSH (netns), run through Slurm: every role a job step, recorded."""
    invoke("provision", "--inventory", "netns")
    out = invoke("bench", "--inventory", "netns-slurm", "--results", str(tmp_path),
                 env=allocation).stdout
    assert "5 succeeded, 0 failed" in out
    (run,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    records = [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines()]
    steps = {(r["cell_id"], r["node"], r["role"], r["rank"]): r.get("slurm_step")
             for r in records if r["metric"] == "peak_rss_mb"}
    job = allocation["SLURM_JOB_ID"]
    assert steps and all(s and s.startswith(job + ".") for s in steps.values())
    assert len(set(steps.values())) == len(steps)  # one job step per role
    left = subprocess.run(["squeue", "-h", "-s", "-j", job], capture_output=True, text=True,
                          env=allocation).stdout.split()
    assert left == []  # no step outlives its cell


def test_outside_an_allocation_the_slurm_inventory_says_how_to_get_one(with_slurm):
    out = invoke("bench", "--inventory", "netns-slurm", "--dry-run", check=False,
                 env=dict(slurm.environment(with_slurm), SLURM_JOB_ID=""))
    assert out.returncode == 2
    assert "not inside a Slurm allocation" in out.stderr and "salloc -N3" in out.stderr


def test_down_stops_every_slurm_daemon_it_started(with_slurm):
    recorded = with_slurm["slurm"]
    pids = [recorded["munged"], recorded["slurmctld"]] + list(recorded["slurmd"].values())
    invoke("cluster.down")
    alive = [p for p in pids if Path("/proc/%d" % p).exists()
             and Path("/proc/%d/stat" % p).read_text().split(")")[-1].split()[0] != "Z"]
    assert alive == []
