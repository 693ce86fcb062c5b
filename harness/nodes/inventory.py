"""Load and validate an Ansible-format YAML inventory of benchmark nodes.

The harness reads the same file Ansible reads: hosts under `all.children.nodes.hosts`
(or `all.hosts`), variables from `all.vars`, the group's `vars`, and `group_vars/*.yml`
beside the file, with host variables winning, as in Ansible.
"""
import ipaddress
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from contract.errors import UserError
from ..paths import INVENTORIES
from .. import clusters

CONNECTIONS = ("local", "ssh", "slurm")
HOSTNAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]{0,252})$")
ANSIBLE_EXPANDS = re.compile(r"\$(\w|\{)")  # os.path.expandvars, on every path argument
NODE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
INTERFACE = re.compile(r"^[A-Za-z0-9_.:-]{1,15}$")
# a bastion in front of the nodes: [user@]host[:port]
JUMP_HOST = re.compile(r"^(?:([A-Za-z0-9._-]+)@)?([A-Za-z0-9][A-Za-z0-9.-]*)(?::(\d{1,5}))?$")
CPU_LIST = re.compile(r"^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$")
PAPER_VCPUS = 4
GENERATED = clusters.generated()  # the inventories a way to have nodes writes itself


@dataclass
class Host:
    name: str
    address: str  # the cluster-network address the frameworks use
    connection: str
    cluster_interface: str
    vcpus: int
    workdir: str
    base_port: int
    env_root: str
    ssh_host: str = ""
    ssh_port: int = 22
    user: str = ""
    key: str = ""
    known_hosts: str = ""
    cpus: str = ""  # CPU affinity of every role on the node ("0-3", "4,5"); "" = none
    jump: tuple = ()  # (user, host, port) of the bastion SSH goes through; () = direct
    vars: dict = field(default_factory=dict, repr=False)

    def public(self):
        """What may be written to results: no key paths, no ansible internals."""
        return {
            "name": self.name, "address": self.address, "connection": self.connection,
            "cluster_interface": self.cluster_interface, "vcpus": self.vcpus,
            "workdir": self.workdir, "base_port": self.base_port, "cpus": self.cpus,
        }


@dataclass
class Inventory:
    name: str
    path: Path
    hosts: list
    dropped: list = field(default_factory=list)  # listed nodes left out by `node_count: auto`

    def warnings(self):
        """Addresses on the public internet: the frameworks' servers (gRPC, Gloo, ps-lite)
        listen on them without authentication."""
        out = []
        for host in self.hosts:
            try:
                public = ipaddress.ip_address(host.address).is_global
            except ValueError:
                public = False  # a name: resolved on the nodes, not judged here
            if public:
                out.append("%s: address %s is public; the frameworks' servers listen on it "
                           "without authentication: use a private cluster network"
                           % (host.name, host.address))
        return out

    def layout(self):
        """How the nodes on this machine were laid out, in words ("" for remote nodes):
        provision and bench print it, the manifest keeps it."""
        local = [h for h in self.hosts if h.connection == "local"]
        if not local:
            return ""
        own = all(h.cpus for h in local)
        text = "%d local node(s) x %d thread(s), %s" % (
            len(local), local[0].vcpus, "each on CPUs of its own (%s)" % " | ".join(
                h.cpus for h in local) if own else "sharing this machine's %d CPU(s)"
            % len(os.sched_getaffinity(0)))
        if self.dropped:
            text += "; %s left out so that every node owns a CPU (inventory `node_count: auto`)" \
                % ", ".join(self.dropped)
        return text

    def host(self, name):
        for host in self.hosts:
            if host.name == name:
                return host
        raise KeyError(name)


def resolve(name_or_path):
    """`local` -> inventory/local.yml; a path is taken as it is."""
    path = Path(name_or_path)
    if path.suffix not in (".yml", ".yaml"):
        path = INVENTORIES / (str(name_or_path) + ".yml")
    if not path.is_file() and str(name_or_path) in GENERATED:
        raise UserError("inventory %r is written by `%s`, which has not run here yet"
                        % (str(name_or_path), GENERATED[str(name_or_path)]),
                        "run `%s` first" % GENERATED[str(name_or_path)])
    if not path.is_file():
        known = sorted(p.stem for p in INVENTORIES.glob("*.yml"))
        raise UserError("inventory %r not found (looked for %s)" % (str(name_or_path), path),
                        "use one of %s or give a path to an Ansible YAML inventory"
                        % ", ".join(known))
    return path


def load(name_or_path):
    path = resolve(name_or_path)
    data = _read_yaml(path, "inventory")
    if not isinstance(data, dict) or not isinstance(data.get("all"), dict):
        raise UserError("inventory %s: top level must be a mapping with an `all:` group" % path,
                        "see inventory/local.yml for the expected layout")
    group_vars = _group_vars(path.parent)
    raw_hosts = _raw_hosts(path, data["all"], group_vars)
    if (data["all"].get("vars") or {}).get("ansible_connection") == "slurm":
        from ..clusters import allocation  # the hosts are the allocation's, not listed
        raw_hosts = allocation.hosts(path, data["all"].get("vars") or {})
    if not raw_hosts:
        raise UserError("inventory %s: no hosts under all.children.nodes.hosts or all.hosts" % path,
                        "list the benchmark nodes under all.children.nodes.hosts")
    sized = size_local(raw_hosts, sorted(os.sched_getaffinity(0)))
    hosts = [_host(path, name, values) for name, values in sized]
    _check_cluster(path, hosts)
    kept = {name for name, _ in sized}
    return Inventory(name=path.stem, path=path, hosts=hosts,
                     dropped=[name for name, _ in raw_hosts if name not in kept])


def for_collect(name_or_path, manifest):
    """The nodes to collect a run from. A Slurm run collected outside an allocation (a batch
    job that has ended): the hosts the run recorded, their workdirs read here as files, on
    the filesystem a Slurm cluster's nodes share with its login node (inventory/slurm.yml)."""
    path = resolve(name_or_path)
    data = _read_yaml(path, "inventory") or {}
    vars_ = ((data.get("all") or {}).get("vars") or {}) if isinstance(data, dict) else {}
    if vars_.get("ansible_connection") != "slurm" or os.environ.get("SLURM_JOB_ID"):
        return load(name_or_path)
    recorded = (manifest.get("inventory") or {}).get("hosts") or []
    if not recorded:
        raise UserError("the run names no hosts to collect from", "run `invoke collect` "
                        "inside the allocation that ran it (SLURM_JOB_ID set)")
    hosts = [Host(**dict(h, connection="local", env_root=str(vars_.get("env_root", ""))))
             for h in recorded]
    print("no Slurm allocation: reading the %d nodes' workdirs on the shared filesystem"
          % len(hosts), flush=True)
    return Inventory(name=path.stem, path=path, hosts=hosts)


def recorded(manifest):
    """The inventory file the run was made with, where it is still there; one of the
    repository's inventory/ made in another checkout is this checkout's file of that name."""
    path = (manifest.get("inventory") or {}).get("path")
    if not path:
        return None
    if Path(path).is_file():
        return str(path)
    here = INVENTORIES / Path(path).name
    return str(here) if Path(path).parent.name == INVENTORIES.name and here.is_file() else None


def check_has_run_nodes(inventory, statuses, run_name, manifest):
    """Refuse to collect with an inventory that lacks a node the run's processes ran on,
    before any node is reached."""
    have = {h.name for h in inventory.hosts}
    used = {p["node"] for s in statuses for p in s.get("processes") or []}
    missing = sorted(used - have)
    if not missing:
        return
    made_with = (manifest.get("inventory") or {}).get("name")
    cause = "run %s ran processes on %s, which inventory %s (%s) does not have" % (
        run_name, ", ".join(missing), inventory.name, ", ".join(sorted(have)))
    if made_with and made_with != inventory.name:
        raise UserError(cause, "collect it with the inventory it ran on: `invoke collect "
                               "--run %s --inventory %s`" % (run_name, made_with))
    raise UserError(cause + " (its nodes have changed since the run: a new Slurm allocation, "
                    "an edited file)", "collect it with an inventory that names the run's "
                    "nodes; a Slurm batch run: outside any allocation, from the shared "
                    "filesystem (`invoke collect --inventory slurm --run %s`)" % run_name)


def size_local(raw_hosts, cpus):
    """`vcpus: auto` and `cpus: auto` on the nodes run on this machine (connection local):
    each gets the machine's CPUs shared out, up to the paper's 4, and, where there are
    enough CPUs for every node, CPUs of its own (affinity); too few: no affinity, and the
    report says the nodes share cores. A 16-core workstation gets 3 x 4 dedicated CPUs.
    `node_count: auto` first keeps only as many local nodes as can own a CPU (at least 2, so a
    2-CPU machine gets 2 nodes of 1 CPU each rather than 3 on 2 shared CPUs)."""
    raw_hosts = own_core_layout(raw_hosts, len(cpus))
    local = [name for name, v in raw_hosts if v.get("ansible_connection", "ssh") == "local"]
    each = max(1, min(PAPER_VCPUS, len(cpus) // max(1, len(local))))
    out = []
    for name, v in raw_hosts:
        v = dict(v)
        if name in local and v.get("vcpus") == "auto":
            v["vcpus"] = each
        if name in local and v.get("cpus") == "auto":
            v["cpus"] = _own_cpus(local.index(name), v["vcpus"], cpus, len(local))
        out.append((name, v))
    return out


def own_core_layout(raw_hosts, cpu_count):
    """The local nodes marked `node_count: auto`, cut to one per CPU where the machine has 2 or
    more CPUs but fewer than the nodes listed; on 1 CPU no node can own one: all are kept."""
    auto = [name for name, v in raw_hosts
            if v.get("ansible_connection", "ssh") == "local" and v.get("node_count") == "auto"]
    if cpu_count < 2 or len(auto) <= cpu_count:
        return raw_hosts
    dropped = set(auto[cpu_count:])
    return [(name, v) for name, v in raw_hosts if name not in dropped]


def _own_cpus(index, vcpus, cpus, nodes):
    if not isinstance(vcpus, int) or nodes * vcpus > len(cpus):
        return ""
    return ",".join(str(c) for c in cpus[index * vcpus:(index + 1) * vcpus])


def _read_yaml(path, what):
    try:
        return yaml.safe_load(Path(path).read_text())
    except yaml.YAMLError as exc:
        raise UserError("%s %s is not valid YAML: %s" % (what, path, exc),
                        "fix the YAML syntax at the line named above")


def _group_vars(folder):
    found = {}
    gv = folder / "group_vars"
    for file in sorted(gv.glob("*.yml")) if gv.is_dir() else []:
        values = _read_yaml(file, "group_vars file") or {}
        if not isinstance(values, dict):
            raise UserError("group_vars file %s must be a mapping" % file)
        found[file.stem] = values
    return found


def _raw_hosts(path, all_group, group_vars):
    """(name, merged vars) for each host, in file order."""
    base = dict(group_vars.get("all", {}))
    base.update(all_group.get("vars") or {})
    hosts = []
    for name, values in (all_group.get("hosts") or {}).items():
        hosts.append((name, _merge(base, values)))
    for group, body in (all_group.get("children") or {}).items():
        body = body or {}
        if not isinstance(body, dict):
            raise UserError("inventory %s: group %r must be a mapping" % (path, group))
        scope = _merge(_merge(base, group_vars.get(group, {})), body.get("vars"))
        for name, values in (body.get("hosts") or {}).items():
            hosts.append((name, _merge(scope, values)))
    return hosts


def _merge(base, extra):
    merged = dict(base)
    if extra is not None and not isinstance(extra, dict):
        raise UserError("inventory: expected a mapping of variables, got %r" % (extra,))
    merged.update(extra or {})
    return merged


def _numbers(v, fail):
    """A host's vcpus, CPU list and base port, checked."""
    vcpus = _positive_int(v["vcpus"], lambda p: fail("vcpus", p, "give a whole number >= 1 "
                                                                 "(`auto` on local nodes)"))
    cpus = str(v.get("cpus") or "")
    if cpus and not CPU_LIST.match(cpus):
        fail("cpus", "is %r, not a CPU list" % cpus, "give a list like 0-3 or 4,5,6,7 "
             "(`auto` on local nodes), or leave it out")
    port = _positive_int(v["base_port"], lambda p: fail("base_port", p, "give a port 1024-65000"))
    if not 1024 <= port <= 65000:
        fail("base_port", "is %d, outside 1024-65000" % port, "give a port 1024-65000")
    return vcpus, cpus, port


def _check_paths(v, fail):
    for path_field in ("workdir", "env_root"):
        if not str(v[path_field]).startswith(("/", "~/")):
            fail(path_field, "is %r, not absolute" % v[path_field], "start it with / or ~/")
        if ANSIBLE_EXPANDS.search(str(v[path_field])):
            fail(path_field, "is %r: Ansible expands $NAME and ${NAME} in paths, so the nodes "
                 "would use another folder than the one the harness reads" % v[path_field],
                 "write the value out (a `$` not followed by a letter, digit, _ or { is kept)")


def _host(path, name, v):
    def fail(field_name, problem, fix):
        raise UserError("inventory %s: host %s: field `%s` %s" % (path, name, field_name, problem),
                        fix)

    if not isinstance(name, str) or not NODE_NAME.match(name):
        raise UserError("inventory %s: host name %r breaks the rule for node names: letters, "
                        "digits, '.', '_' and '-', starting with a letter or digit, at most 63 "
                        "(a name is an Ansible host pattern, a folder of the results and a "
                        "word in scripts)" % (path, name),
                        "rename the host; its real name or address goes in `address:` "
                        "(and `ansible_host:`)")

    connection = v.get("ansible_connection", "ssh")
    if connection not in CONNECTIONS:
        fail("ansible_connection", "is %r" % connection, "use `local`, `ssh` or `slurm`")
    for required in ("address", "cluster_interface", "vcpus", "workdir", "base_port", "env_root"):
        if v.get(required) in (None, ""):
            fail(required, "is missing", "add `%s:` to the host or its group vars" % required)
    _check_address(v["address"], lambda p: fail("address", p, "give an IP address or host name"))
    if not INTERFACE.match(str(v["cluster_interface"])):
        fail("cluster_interface", "is %r, not an interface name" % v["cluster_interface"],
             "give one interface name, e.g. eth1 or lo (see `ip -br addr` on the node)")
    vcpus, cpus, port = _numbers(v, fail)
    _check_paths(v, fail)
    if connection == "ssh" and not v.get("ansible_user"):
        fail("ansible_user", "is missing for an SSH host", "add `ansible_user:`")
    jump = _jump(v, connection, fail)
    return Host(
        name=name, address=str(v["address"]), connection=connection,
        cluster_interface=str(v["cluster_interface"]), vcpus=vcpus,
        workdir=str(v["workdir"]).replace("{host}", name), base_port=port,
        env_root=str(v["env_root"]).replace("{host}", name),
        ssh_host=str(v.get("ansible_host") or v["address"]),
        ssh_port=int(v.get("ansible_port") or 22), user=str(v.get("ansible_user") or ""),
        key=str(v.get("ansible_ssh_private_key_file") or ""),
        known_hosts=str(v.get("known_hosts") or ""), cpus=cpus, jump=jump, vars=v)


def _jump(v, connection, fail):
    """`jump_host: [user@]host[:port]`, the bastion every SSH session to the node goes
    through (Ansible's ProxyCommand, Fabric's gateway); the user defaults to the node's."""
    text = str(v.get("jump_host") or "")
    if not text:
        return ()
    found = JUMP_HOST.match(text)
    if connection != "ssh" or not found:
        fail("jump_host", "is %r%s" % (text, "" if found else ", not [user@]host[:port]"),
             "give the bastion as [user@]host[:port], on an SSH host")
    user, host, port = found.groups()
    return (user or str(v.get("ansible_user") or ""), host, int(port or 22))


def _check_address(value, fail):
    text = str(value)
    try:
        ipaddress.ip_address(text)
    except ValueError:
        if not HOSTNAME.match(text):
            fail("is %r, neither an IP address nor a host name" % text)


def _positive_int(value, fail):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        fail("is %r, not a positive whole number" % (value,))
    return value


PORT_SPAN = 100  # each node uses base_port .. base_port+99 for its roles


def _check_cluster(path, hosts):
    seen = {}
    for host in hosts:
        if host.name in seen:
            raise UserError("inventory %s: host %s is listed twice" % (path, host.name),
                            "give each node a distinct name")
        for other in seen.values():
            if other.address == host.address and abs(other.base_port - host.base_port) < PORT_SPAN:
                raise UserError(
                    "inventory %s: host %s: field `base_port` %d overlaps %s's ports (%d) on %s"
                    % (path, host.name, host.base_port, other.name, other.base_port, host.address),
                    "nodes sharing an address need base ports at least %d apart" % PORT_SPAN)
            # one machine = one SSH endpoint: Vagrant's VMs share 127.0.0.1 on distinct ports
            same_machine = (other.ssh_host, other.ssh_port) == (host.ssh_host, host.ssh_port)
            if same_machine and other.workdir == host.workdir:
                raise UserError("inventory %s: host %s: field `workdir` is also %s's"
                                % (path, host.name, other.name),
                                "nodes on one machine need distinct workdirs")
        seen[host.name] = host
