"""`--inventory slurm`: the nodes of the Slurm allocation this runs in (salloc or sbatch).
The inventory file (inventory/slurm.yml) holds only vars: the cluster interface, the workdir
and env root on the shared filesystem, base_port. The hosts, their addresses and vCPUs come
from the allocation: SLURM_JOB_ID, `scontrol show hostnames`, `scontrol show node`."""
import os
import re
import subprocess

from contract.errors import UserError

ALLOCATION_FIX = ("run inside an allocation: `salloc -N3 --cpus-per-task=4` (then `invoke "
                  "bench --inventory slurm` in its shell), or an sbatch script")


def job_id(environ=None):
    job = (environ or os.environ).get("SLURM_JOB_ID")
    if not job:
        raise UserError("--inventory slurm: not inside a Slurm allocation (SLURM_JOB_ID is "
                        "not set)", ALLOCATION_FIX)
    return job


def hosts(path, vars_):
    """(name, vars) for each node of the allocation, as inventory.load expects them."""
    if not vars_.get("cluster_interface"):
        raise UserError("inventory %s: `cluster_interface` is missing: Slurm does not say which "
                        "network the frameworks should use" % path,
                        "add `cluster_interface:` (e.g. ib0 or eth1: see `ip -br addr` on a "
                        "node) under all.vars")
    job = job_id()
    names = scontrol("show", "hostnames", job_field(job, "NodeList")).split()
    cpus = cpus_per_node(job, len(names))
    out = []
    for name, count in zip(names, cpus):
        host_vars = dict(vars_, address=vars_.get("address") or node_field(name, "NodeAddr"),
                         vcpus=vars_.get("vcpus") or count, slurm_job=job)
        for key in ("workdir", "env_root"):
            host_vars[key] = str(vars_.get(key, "")).replace("{host}", name)
        out.append((name, host_vars))
    return out


def cpus_per_node(job, count):
    """Per node, the CPUs the allocation gives it: SLURM_JOB_CPUS_PER_NODE's `4(x3),2`."""
    text = os.environ.get("SLURM_JOB_CPUS_PER_NODE")
    if not text:  # outside the allocation's shell: the job's total, spread evenly
        return [max(1, int(job_field(job, "NumCPUs")) // count)] * count
    found = []
    for part in text.split(","):
        match = re.match(r"^(\d+)(?:\(x(\d+)\))?$", part.strip())
        if not match:
            raise UserError("cannot read the CPUs per node from %r" % text,
                            "set `vcpus:` under all.vars of the slurm inventory")
        found += [int(match.group(1))] * int(match.group(2) or 1)
    return found


def job_field(job, field):
    return _field(scontrol("show", "job", job), field, "job %s" % job)


def node_field(name, field):
    return _field(scontrol("show", "node", name), field, "node %s" % name)


def _field(text, field, what):
    match = re.search(r"(?:^|\s)%s=(\S+)" % field, text)
    if not match:
        raise UserError("Slurm says nothing of %s's %s" % (what, field),
                        "check `scontrol show %s`" % what)
    return match.group(1)


def scontrol(*args):
    try:
        result = subprocess.run(["scontrol", *args], capture_output=True, text=True, timeout=10)
    except FileNotFoundError:
        raise UserError("--inventory slurm: scontrol is not on PATH",
                        "run on a node of the Slurm cluster (a login node)") from None
    except subprocess.TimeoutExpired:
        raise UserError("slurmctld does not answer (scontrol %s timed out)" % " ".join(args),
                        "check `scontrol ping`; the cluster's controller may be down") from None
    if result.returncode != 0:
        raise UserError("scontrol %s failed: %s" % (" ".join(args), result.stderr.strip()),
                        "check `scontrol ping` and that the job is still running (`squeue`)")
    return result.stdout
