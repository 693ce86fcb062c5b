"""The ways to have nodes, each one class with what the pipeline asks of it (prepare,
describe, down, and made_by: the command that writes its inventory), as PerfKitBenchmarker's
providers are:
- local: inventory/local.yml, every node a set of processes on this machine (nothing to set up);
- emulated (`emulated.py`): network namespaces with their own sshd, tc-shaped links and cgroup
  limits, made by `invoke cluster.up`; inventory/netns.yml; its links can be reshaped between
  cells (`links.py`);
- vagrant (`vagrant.py`): VMs from the Vagrantfile, brought up and written to
  inventory/vagrant.yml before provisioning;
- slurm (`slurm_jobs.py`, `allocation.py`): the nodes of an allocation, reached by job steps;
- any other inventory: hosts over SSH, set up by their owner.
A new way is a module here and a class below."""
from . import emulated, links, vagrant  # noqa: F401 (the pipeline reaches them through here)


class Way:
    """Hosts over SSH that their owner set up: nothing to make, describe or remove."""
    name = "ssh"
    made_by = None  # the command that writes this way's inventory, where the package does

    def prepare(self, box_envs=list):
        """Before provisioning: make the nodes exist (and their inventory current). box_envs:
        a function giving the framework envs to build into a VM image the way makes
        (stacks.box_envs), called only by a way that makes one."""

    def describe(self):
        """What a run's manifest records of how the nodes were made (None: nothing)."""
        return None

    def down(self):
        """Remove what this package made for the nodes, nothing else."""

    def emulated_cpu(self):
        """Whether the nodes' CPUs are emulated (VMs under QEMU's TCG): known after prepare."""
        return False


class Local(Way):
    name = "local"


class Emulated(Way):
    name = "netns"
    made_by = "invoke cluster.up"

    def down(self):
        emulated.down()


class Vagrant(Way):
    name = "vagrant"
    made_by = "invoke provision --inventory vagrant"

    def prepare(self, box_envs=list):
        vagrant.prepare(box_envs=box_envs())

    def describe(self):
        return vagrant.vm_record() or None

    def down(self):
        vagrant.down()

    def emulated_cpu(self):
        return (vagrant.vm_record() or {}).get("accelerator") == "qemu"


class Slurm(Way):
    name = "slurm"  # the allocation's nodes: the inventory lists none (nodes/inventory.py)


WAYS = {way.name: way for way in (Local(), Emulated(), Vagrant(), Slurm())}


def way(inventory_name):
    """The way of an inventory name (a path or any other name: hosts over SSH)."""
    return WAYS.get(str(inventory_name), Way())


def generated():
    """inventory name -> the command that writes it, for the ways that write their own."""
    return {w.name: w.made_by for w in WAYS.values() if w.made_by}
