"""`invoke provision`: prepare data on the controller, then real ansible-playbook on the nodes."""
import gzip
import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
import tarfile
import time

from .. import clusters
from . import datasets, inventory, wheelhouse as wheels
from .screen import ProvisionScreen
from . import stacks as stacks_mod
from ..plan import matrix
from contract import codedigest
from contract.errors import UserError
from ..paths import PLAYBOOKS, REPO, cache_dir
import registry

RECAP = re.compile(r"^(\S+)\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)")


def stage_bench():
    """The code the nodes run, bench/ and contract/ (no caches; contract/codedigest.py
    SHIPPED), as one reproducible archive: the same sources give the same bytes, so Ansible
    copies one file per node, and only when the code changed (copying the folder file by
    file took about 40 s even when nothing had changed)."""
    clone = hashlib.sha1(str(REPO).encode()).hexdigest()[:8]
    target = cache_dir() / "staging" / ("bench-%s.tar.gz" % clone)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".tmp")
    with open(tmp, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz, \
            tarfile.open(fileobj=gz, mode="w") as tar:
        for name in codedigest.files(str(REPO)):
            path = REPO / name
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = path.stat().st_size, 0o644, 0
            with open(path, "rb") as handle:
                tar.addfile(info, handle)
    tmp.replace(target)
    return target


def needed_datasets(size, nodes, data=None, archive=None, progress=print, counts=None):
    """Shard folders for every dataset the size's cells read, split for each node count
    the cells may use (`counts`, default: all the nodes)."""
    cells = matrix.plan(size, nodes, data=data)
    found = []
    for dataset, source in sorted({(c.dataset, c.data) for c in cells}):
        for workers in counts or [nodes]:
            folder = datasets.prepare(dataset, source, workers, archive=archive,
                                      progress=progress)
            meta = datasets.index_of(folder)
            found.append({"id": meta["id"], "src_dir": str(folder), "workers": workers})
    return found


def whole_set_needed(frameworks=None):
    """Whether a system-mode of the frameworks provisioned (default: all) reads the whole
    training set on every node; the others need only their shard (a copy 3x its size saved:
    a minute into emulated VMs)."""
    return any(entry.get("reads") == "whole-set" for entry in registry.systems().values()
               if not frameworks or entry["framework"] in frameworks)


def check_frameworks(stack, frameworks):
    unknown = sorted(set(frameworks or []) - set(stack.envs))
    if unknown:
        raise UserError("stack %s has no framework %s" % (stack.name, ", ".join(unknown)),
                        "use some of: %s" % ", ".join(sorted(stack.envs)))


def playbook_vars(inv, stack, size, data=None, archive=None, counts=None, frameworks=None,
                  wheelhouse=None):
    """wheelhouse: {env name: controller folder of its wheels} for nodes with no index."""
    check_frameworks(stack, frameworks)
    return {
        "stack_name": stack.name,
        "stack_python": stack.python,
        "stack_python_source": stack.python_source,
        "stack_debian": stack.debian or {},
        "stack_envs": [{"framework": e.framework, "dirname": e.dirname, "packages": e.packages,
                        "pip_args": e.pip_args,
                        "conda_env": stacks_mod.conda_env_text(stack, e.framework)}
                       for e in stack.envs.values()
                       if not frameworks or e.framework in frameworks],
        "bench_archive": str(stage_bench()),
        "datasets": needed_datasets(size, len(inv.hosts), data, archive, counts=counts),
        "push_whole_set": whole_set_needed(frameworks),
        "wheelhouse": wheelhouse or {},
        "env_installer_package": wheels.INSTALLER,
    }


def run(options):
    """`invoke provision`; options: harness/plan/options.py ProvisionOptions. Every stack of
    the options (--stacks, or --stack) in turn. frameworks: build the envs of these only (all
    of the stack's by default); wheelhouse: a folder of the controller's where the envs'
    wheels are downloaded, and the nodes install from them with no package index."""
    stacks = [stacks_mod.load(name) for name in options.stack_names()]
    frameworks = options.framework_list()
    for stack in stacks:
        check_frameworks(stack, frameworks)  # a wrong name stops here, before any VM boots
    way = clusters.way(options.inventory)
    way.prepare(stacks_mod.box_envs)  # VMs up (Vagrant), their box holding DLBENCH_VM_BOX_ENVS
    inv = inventory.load(options.inventory)
    outcomes = [provision_stack(options, stack, way, inv) for stack in stacks]
    return {"seconds": sum(o["seconds"] for o in outcomes),
            "recap": outcomes[-1]["recap"], "changed": sum(o["changed"] for o in outcomes),
            "stacks": {s.name: o for s, o in zip(stacks, outcomes)}}


def provision_stack(options, stack, way, inv):
    """The playbook for one stack on the inventory's nodes."""
    frameworks, wheelhouse = options.framework_list(), options.wheelhouse
    filled = wheels.fill(stack, frameworks, wheelhouse, conda_hosts(inv)) if wheelhouse \
        else None
    counts = node_counts(options.nodes, len(inv.hosts))
    variables = playbook_vars(inv, stack, options.size, options.data, options.data_archive,
                              counts, frameworks, filled)
    # pip does not byte-compile on emulated CPUs (framework_envs/tasks/venv.yml)
    variables["pip_compile"] = not way.emulated_cpu()
    vars_file = cache_dir() / "staging" / "provision-vars.json"
    vars_file.parent.mkdir(parents=True, exist_ok=True)
    vars_file.write_text(json.dumps(variables, indent=1))
    command = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"),
               "-i", str(ansible_inventory(inv)), str(PLAYBOOKS / "provision.yml"),
               "-e", "@%s" % vars_file]
    if inv.dropped:  # the file lists nodes that this machine's layout leaves out
        command += ["--limit", ",".join(h.name for h in inv.hosts)]
    if options.check:
        command.append("--check")
    print("provisioning %d nodes of %s with stack %s %s" % (len(inv.hosts), inv.name,
                                                            stack.name, route(inv)), flush=True)
    if inv.layout():
        print("layout: %s" % inv.layout(), flush=True)
    began = time.monotonic()
    recap = _stream(command)
    missing = [h.name for h in inv.hosts if h.name not in recap]
    if missing:  # a host Ansible did not play on is not provisioned, whatever the exit code
        raise UserError("ansible-playbook played on %d of %d hosts: %s not provisioned"
                        % (len(recap), len(inv.hosts), ", ".join(missing)),
                        "check that the inventory's host names reach Ansible unchanged "
                        "(`ansible-inventory -i %s --list`)" % inv.path)
    seconds = time.monotonic() - began
    changed = sum(r["changed"] for r in recap.values())
    print("provisioned in %.1f s: changed=%d over %d nodes" % (seconds, changed, len(recap)))
    return {"seconds": seconds, "recap": recap, "changed": changed}


def conda_hosts(inv):
    """The hosts whose inventory takes every stack's Python from conda (`python_source`)."""
    return [h.name for h in inv.hosts if h.vars.get("python_source") == "conda"]


def route(inv):
    """How Ansible reaches the nodes, in words (printed, so that a user knows which)."""
    connections = sorted({h.connection for h in inv.hosts})
    if connections == ["slurm"]:
        return ("through Slurm job steps (srun --overlap in allocation %s; "
                "playbooks/connection_plugins/slurm.py)" % inv.hosts[0].vars["slurm_job"])
    words = {"ssh": "SSH", "local": "local processes"}
    return "over %s" % " and ".join(words.get(c, c) for c in connections)


def proxy_command(host):
    """Ansible's way through a bastion: ssh -W to the node, the bastion's key checked against
    the same known_hosts, with the node's key file."""
    user, bastion, port = host.jump
    args = ["ssh", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes", "-p", str(port)]
    if host.known_hosts:
        args += ["-o", "UserKnownHostsFile=%s" % os.path.expanduser(host.known_hosts)]
    if host.key:
        args += ["-i", os.path.expanduser(host.key)]
    args += ["-W", "%h:%p", "%s@%s" % (user, bastion) if user else bastion]
    return "-o ProxyCommand=%s" % shlex.quote(" ".join(args))


def _through(host):
    if host.connection == "slurm":
        return {"ansible_pipelining": True}
    if not host.jump:
        return {}
    # a connection through the bastion is not the direct one: its own control sockets, or a
    # master left by a direct session (ControlPersist) would carry the commands instead
    return {"ansible_ssh_extra_args": proxy_command(host),
            "ansible_control_path_dir": "~/.ansible/cp-through-%s" % host.jump[1]}


def ansible_inventory(inv):
    """The file ansible-playbook reads. A Slurm inventory lists no hosts (they are the
    allocation's), so Ansible gets them written out: each node with the variables the harness
    resolved for it, reached by the slurm connection, modules piped into one step each. So
    does an inventory with a bastion (`jump_host`): each node behind it with the ProxyCommand
    that goes through it."""
    slurm = any(h.connection == "slurm" for h in inv.hosts)
    if not slurm and not any(h.jump for h in inv.hosts):
        return inv.path
    hosts = {h.name: dict(h.vars, **_through(h)) for h in inv.hosts}
    target = cache_dir() / "staging" / ("inventory-%s-%s.json" % (
        inv.name, inv.hosts[0].vars["slurm_job"] if slurm else "jump"))
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps({"all": {"children": {"nodes": {"hosts": hosts}}}}, indent=1))
    return target


def _stream(command):
    """Run ansible-playbook, showing its progress live (harness/nodes/screen.py) and keeping
    its whole output in cache_dir()/provision.log; returns the PLAY RECAP per host."""
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_FORCE_COLOR="0")
    log_path = cache_dir() / "provision.log"
    proc = subprocess.Popen(command, cwd=str(REPO), env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    recap = {}
    with open(log_path, "w") as log, ProvisionScreen(log) as screen:
        for line in proc.stdout:
            screen.feed(line)
            match = RECAP.match(line.strip())
            if match:
                host, ok, changed, unreachable, failed = match.groups()
                recap[host] = {"ok": int(ok), "changed": int(changed),
                               "unreachable": int(unreachable), "failed": int(failed)}
    if proc.wait() != 0:
        bad = [h for h, r in recap.items() if r["failed"] or r["unreachable"]]
        raise UserError("ansible-playbook failed (exit %d) on %s"
                        % (proc.returncode, ", ".join(bad) or "the play"),
                        "read the failed task above; it names the host and the cause (the "
                        "whole output: %s)" % log_path)
    return recap


def node_counts(text, hosts):
    """`--nodes 1,2,3` -> [1, 2, 3] (each at most the inventory's host count); None -> all."""
    if not text:
        return [hosts]
    try:
        counts = sorted({int(part) for part in str(text).split(",") if part.strip()})
    except ValueError:
        counts = []
    if not counts or counts[0] < 1 or counts[-1] > hosts:
        raise UserError("--nodes %r: give node counts between 1 and %d, like 1,2,3"
                        % (text, hosts), "the inventory has %d hosts" % hosts)
    return counts
