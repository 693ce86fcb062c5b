"""The ways to have nodes, behind one interface the pipeline uses:
- local: inventory/local.yml, every node a set of processes on this machine (nothing to set up);
- emulated (`emulated.py`): network namespaces with their own sshd, tc-shaped links and cgroup
  limits, made by `invoke cluster.up`; inventory/netns.yml; its links can be reshaped between
  cells (`links.py`);
- vagrant (`vagrant.py`): VMs from the Vagrantfile, brought up and written to
  inventory/vagrant.yml before provisioning;
- any other inventory: hosts over SSH, set up by their owner.
A new way (Slurm) is a module here and a branch in kind() and prepare()."""
from . import emulated, links, vagrant  # noqa: F401 (the pipeline reaches them through here)


def kind(inventory_name):
    if inventory_name == "local":
        return "local"
    if inventory_name == "vagrant":
        return "vagrant"
    if inventory_name == "netns":
        return "emulated"
    return "ssh"


def prepare(inventory_name):
    """Before provisioning: make the nodes exist where this package makes them (the VMs up
    and their inventory current); the others exist already."""
    if kind(inventory_name) == "vagrant":
        vagrant.prepare()
