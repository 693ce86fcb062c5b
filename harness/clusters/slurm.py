"""Slurm on the emulated cluster (`invoke cluster.up --slurm`), from Debian's slurm-wlm and
munge: munged (a key and socket of its own) and slurmctld on this machine, at the bridge's
address; one slurmd in each emulated host, in its network namespace and its cgroups, named as
the host. Every pid is recorded in the cluster's state; `cluster.down` stops them by it.

Accounting is on, as on HPC clusters (`sacct`): slurmdbd and a MariaDB of its own
(harness/clusters/slurmdbd.py).

Clients find the cluster through SLURM_CONF=<state>/slurm/slurm.conf (`cluster.status` prints
it). slurmd runs under nsenter, not `ip netns exec`: the latter remounts /sys, and slurmd
needs the machine's /sys/fs/cgroup."""
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

from contract.errors import UserError
from . import slurmdbd

DAEMONS = {"munged": "/usr/sbin/munged", "slurmctld": "/usr/sbin/slurmctld",
           "slurmd": "/usr/sbin/slurmd", "sinfo": "/usr/bin/sinfo"}
PARTITION = CLUSTER = "dlbench"
READY_SECONDS = 30


def folder(state):
    return Path(state["dir"]) / "slurm"


def environment(state):
    """This process's environment, pointed at the emulated cluster's Slurm."""
    return dict(os.environ, SLURM_CONF=str(folder(state) / "slurm.conf"))


def require_packages():
    needed = dict(DAEMONS, **slurmdbd.PROGRAMS)
    missing = [name for name, path in needed.items() if not Path(path).exists()]
    if missing:
        raise UserError("Slurm is not installed here (no %s)" % ", ".join(missing),
                        "apt-get install slurm-wlm slurmdbd munge mariadb-server (Debian), "
                        "then run `sudo -E invoke cluster.up --slurm` again")


def up(state, controller_address):
    """munged, MariaDB and slurmdbd, slurmctld, a slurmd per host; returns once `sinfo` shows
    every host idle."""
    require_packages()
    here = folder(state)
    (here / "spool").mkdir(parents=True, exist_ok=True)
    slurm = state.setdefault("slurm", {"conf": str(here / "slurm.conf"), "slurmd": {}})
    slurm["munged"] = start_munged(here)
    slurm["mariadbd"], db_port, password = slurmdbd.start_database(here)
    dbd_port = slurmdbd.free_port(controller_address)
    (here / "slurm.conf").write_text(config(state, here, controller_address, dbd_port))
    slurm["slurmdbd"] = slurmdbd.start_slurmdbd(here, environment(state), controller_address,
                                                db_port, password, dbd_port)
    slurmdbd.register_cluster(environment(state), CLUSTER, here / "slurmdbd.log")
    slurm["slurmctld"] = start_slurmctld(state, here)
    for host in state["hosts"]:
        slurm["slurmd"][host["name"]] = start_slurmd(state, here, host)
    wait_idle(state, [h["name"] for h in state["hosts"]])
    return slurm


def config(state, here, controller_address, dbd_port):
    cpus = max(1, int(round(state["vcpus"])))
    lines = [
        "ClusterName=%s" % CLUSTER,
        # slurmctld accepts only the host it is named for: this machine's short name
        "SlurmctldHost=%s(%s)" % (socket.gethostname().split(".")[0], controller_address),
        "SlurmUser=root", "SlurmdUser=root", "AuthType=auth/munge",
        "AuthInfo=socket=%s" % (here / "munge.socket"),
        "StateSaveLocation=%s" % (here / "ctld"),
        "SlurmdSpoolDir=%s/spool/%%n" % here,
        "SlurmctldPidFile=%s" % (here / "slurmctld.pid"),
        "SlurmctldLogFile=%s" % (here / "slurmctld.log"),
        "SlurmdLogFile=%s/slurmd-%%n.log" % here,
        # no cgroup plugins: each host's cgroups are the emulated cluster's own
        "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
        "SelectType=select/cons_tres", "SelectTypeParameters=CR_CPU",
        "MpiDefault=none", "MailProg=/bin/true", "ReturnToService=2", "SlurmdTimeout=30",
        "KillWait=5",
    ] + slurmdbd.config_lines(here, controller_address, dbd_port)
    lines += ["NodeName=%s NodeAddr=%s CPUs=%d RealMemory=%d State=UNKNOWN"
              % (h["name"], h["address"], cpus, state["memory_mb"]) for h in state["hosts"]]
    lines.append("PartitionName=%s Nodes=ALL Default=YES MaxTime=INFINITE State=UP" % PARTITION)
    return "\n".join(lines) + "\n"


def start_munged(here):
    key = here / "munge.key"
    if not key.exists():
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
    pid_file = here / "munged.pid"
    # --force: munged runs as root here, its key and socket in root's own folder
    run([DAEMONS["munged"], "--force", "--socket=%s" % (here / "munge.socket"),
         "--key-file=%s" % key, "--pid-file=%s" % pid_file,
         "--log-file=%s" % (here / "munged.log"), "--seed-file=%s" % (here / "munged.seed")])
    return read_pid(pid_file, "munged", here / "munged.log")


def start_slurmctld(state, here):
    run([DAEMONS["slurmctld"]], env=environment(state))
    return read_pid(here / "slurmctld.pid", "slurmctld", here / "slurmctld.log")


def start_slurmd(state, here, host):
    """slurmd in the host's network namespace, its cgroups joined before it starts, with a
    /run of its own: every slurmd writes /run/slurmd.pid and kills the slurmd it finds there
    (a pid file per node needs a Slurm built for several slurmd per machine)."""
    (here / "spool" / host["name"]).mkdir(parents=True, exist_ok=True)
    steps = ["mount -t tmpfs dlbench-slurmd /run"]
    steps += ["echo $$ > %s/cgroup.procs" % c for c in host.get("cgroups", [])]
    steps.append("exec %s -D -N %s" % (DAEMONS["slurmd"], host["name"]))
    log = open(str(here / ("slurmd-%s.out" % host["name"])), "ab")
    proc = subprocess.Popen(["nsenter", "--net=/var/run/netns/%s" % host["namespace"],
                             "unshare", "--mount", "sh", "-c", "; ".join(steps)],
                            env=environment(state), stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    log.close()
    return proc.pid


def run(command, env=None):
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        raise UserError("`%s` failed: %s" % (" ".join(command), result.stderr.strip()[-500:]),
                        "see the logs in the cluster's slurm folder; `invoke cluster.down` "
                        "removes a partial start")


def read_pid(pid_file, name, log, seconds=10):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        text = pid_file.read_text().strip() if pid_file.exists() else ""
        if text.isdigit():
            return int(text)
        time.sleep(0.1)
    raise UserError("%s did not start" % name, "see %s" % log)


def node_states(state):
    """host -> Slurm's state of it (idle, alloc, down, drain, ...), from sinfo."""
    result = subprocess.run([DAEMONS["sinfo"], "-h", "-N", "-o", "%N %t"], capture_output=True,
                            text=True, env=environment(state))
    return dict(line.split()[:2] for line in result.stdout.splitlines() if line.split())


def wait_idle(state, names):
    deadline = time.monotonic() + READY_SECONDS
    found = {}
    while time.monotonic() < deadline:
        found = node_states(state)
        if all(found.get(n) == "idle" for n in names):
            return found
        time.sleep(0.5)
    raise UserError("Slurm's hosts are not idle after %d s: %s" % (READY_SECONDS, found or
                                                                   "sinfo answered nothing"),
                    "see the logs in %s" % folder(state))


def down(state):
    """Stop every daemon this module started, by its recorded pid (TERM, then KILL)."""
    slurm = state.get("slurm") or {}
    pids = list((slurm.get("slurmd") or {}).values()) + [
        slurm.get(name) for name in ("slurmctld", "slurmdbd", "mariadbd", "munged")]
    for pid in [p for p in pids if p]:
        stop(pid)


def stop(pid, grace=5.0):
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        if _zombie(pid):
            return
        time.sleep(0.1)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _zombie(pid):
    try:
        return Path("/proc/%d/stat" % pid).read_text().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True
