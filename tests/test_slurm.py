"""Slurm on the emulated cluster (root; Debian's slurm-wlm and munge): `cluster.up --slurm`
starts munged and slurmctld here and a slurmd in each namespace host; job steps run in the
host's namespace and cgroups; `cluster.down` stops every daemon by its recorded pid."""
import os
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


def test_down_stops_every_slurm_daemon_it_started(with_slurm):
    recorded = with_slurm["slurm"]
    pids = [recorded["munged"], recorded["slurmctld"]] + list(recorded["slurmd"].values())
    invoke("cluster.down")
    alive = [p for p in pids if Path("/proc/%d" % p).exists()
             and Path("/proc/%d/stat" % p).read_text().split(")")[-1].split()[0] != "Z"]
    assert alive == []
