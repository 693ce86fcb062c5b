"""Three Vagrant VMs as a cluster: bring them up if needed and write inventory/vagrant.yml from
`vagrant ssh-config`, so no key path or forwarded port is copied by hand.

The Vagrantfile reads the same environment variables with the same defaults (a test checks
that they agree). Each VM's host key and cluster interface are read through `vagrant ssh`
(authenticated by the key Vagrant made for that VM) and pinned in a known_hosts file: the
harness and Ansible then check the host key on every connection."""
import os
import re
import shutil
import subprocess

import yaml

from ..errors import UserError
from ..paths import INVENTORIES, REPO

INVENTORY = INVENTORIES / "vagrant.yml"
STATE = REPO / ".vagrant" / "dlbench"
DEFAULTS = {"DLBENCH_VM_NODES": "3", "DLBENCH_VM_CPUS": "4", "DLBENCH_VM_MEMORY": "16384",
            "DLBENCH_VM_SUBNET": "192.168.56", "DLBENCH_VM_BOX": "generic/ubuntu2204"}
SSH_FIELDS = {"hostname": "ssh_host", "port": "ssh_port", "user": "user",
              "identityfile": "key"}


def settings(environ=None):
    environ = os.environ if environ is None else environ
    return {name: environ.get(name) or default for name, default in DEFAULTS.items()}


def node_address(index, subnet):
    """The Vagrantfile's rule: node i gets <subnet>.1i on the private network."""
    return "%s.%d" % (subnet, 10 + index)


def prepare(run=None, echo=print):
    """`vagrant up` what is not running, then write inventory/vagrant.yml. Returns its path."""
    run = run or _vagrant
    if run is _vagrant and not shutil.which("vagrant"):
        raise UserError("`vagrant` is not installed on this machine",
                        "install Vagrant and VirtualBox or libvirt (+ the vagrant-libvirt "
                        "plugin), see docs/reproducing.md; or use --inventory local")
    conf = settings()
    names = ["node%d" % i for i in range(1, int(conf["DLBENCH_VM_NODES"]) + 1)]
    stopped = [n for n, state in machine_states(run(["status", "--machine-readable"])).items()
               if n in names and state != "running"]
    if stopped:
        echo("vagrant up: %s (the first boot downloads the box: minutes)" % ", ".join(stopped))
        run(["up"] + stopped, stream=True)
    ssh = parse_ssh_config(run(["ssh-config"] + names))
    missing = [n for n in names if n not in ssh]
    if missing:
        raise UserError("`vagrant ssh-config` gave nothing for %s" % ", ".join(missing),
                        "run `vagrant status` in %s and `vagrant up %s`"
                        % (REPO, " ".join(missing)))
    hosts = {}
    for index, name in enumerate(names, 1):
        address = node_address(index, conf["DLBENCH_VM_SUBNET"])
        key_line, interface = read_node(run, name, address)
        hosts[name] = dict(ssh[name], address=address, interface=interface, host_key=key_line)
    path = write_inventory(hosts, int(conf["DLBENCH_VM_CPUS"]))
    echo("wrote %s (%d VMs)" % (path, len(hosts)))
    return path


def machine_states(text):
    """`vagrant status --machine-readable`: lines `time,target,state,<state>`."""
    states = {}
    for line in text.splitlines():
        parts = line.split(",")
        if len(parts) >= 4 and parts[2] == "state" and parts[1]:
            states[parts[1]] = parts[3]
    return states


def parse_ssh_config(text):
    """{host: {ssh_host, ssh_port, user, key}} from `vagrant ssh-config`."""
    hosts, current = {}, None
    for line in text.splitlines():
        words = line.strip().split(None, 1)
        if len(words) != 2:
            continue
        keyword, value = words[0].lower(), words[1].strip().strip('"')
        if keyword == "host":
            current = hosts.setdefault(value, {})
        elif current is not None and keyword in SSH_FIELDS:
            current[SSH_FIELDS[keyword]] = int(value) if keyword == "port" else value
    return hosts


def read_node(run, name, address):
    """(host key, interface holding the cluster address) of one VM, through `vagrant ssh`."""
    text = run(["ssh", name, "-c", "cat /etc/ssh/ssh_host_ed25519_key.pub; "
                                   "ip -o -4 addr show to %s" % address])
    keys = re.findall(r"^(ssh-ed25519 [A-Za-z0-9+/=]+)", text, re.M)
    interfaces = re.findall(r"^\d+:\s+(\S+)\s+inet %s/" % re.escape(address), text, re.M)
    if not keys or not interfaces:
        raise UserError("%s: no ed25519 host key or no interface with %s (got %r)"
                        % (name, address, text[-300:]),
                        "check the private network in the Vagrantfile (DLBENCH_VM_SUBNET) "
                        "and run `vagrant reload %s`" % name)
    return keys[0], interfaces[0]


def write_inventory(hosts, vcpus):
    STATE.mkdir(parents=True, exist_ok=True)
    known_hosts = STATE / "known_hosts"
    known_hosts.write_text("".join("[%s]:%d %s\n" % (h["ssh_host"], h["ssh_port"], h["host_key"])
                                   for h in hosts.values()))
    options = "-o UserKnownHostsFile=%s -o StrictHostKeyChecking=yes" % known_hosts
    nodes = {name: {"address": h["address"], "ansible_host": h["ssh_host"],
                    "ansible_port": h["ssh_port"], "ansible_user": h["user"],
                    "ansible_ssh_private_key_file": h["key"],
                    "cluster_interface": h["interface"], "workdir": "~/dlbench"}
             for name, h in hosts.items()}
    data = {"all": {"vars": {
        "ansible_connection": "ssh", "ansible_python_interpreter": "/usr/bin/python3",
        "ansible_ssh_common_args": options, "known_hosts": str(known_hosts),
        # Ubuntu 22.04 has neither Python 3.6 nor 3.11: every stack's Python comes from conda
        "python_source": "conda", "vcpus": vcpus, "base_port": 29500,
        "env_root": "~/.cache/dlbench/envs"},
        "children": {"nodes": {"hosts": nodes}}}}
    INVENTORY.write_text("# Written by `invoke provision --inventory vagrant` from `vagrant "
                         "ssh-config`; git-ignored.\n" + yaml.safe_dump(data, sort_keys=False))
    return INVENTORY


def _vagrant(args, stream=False):
    """Run vagrant in the folder of the Vagrantfile; stream=True shows its progress live."""
    command = ["vagrant"] + args
    if stream:
        code = subprocess.call(command, cwd=str(REPO))
        out = ""
    else:
        done = subprocess.run(command, cwd=str(REPO), capture_output=True, text=True)
        code, out = done.returncode, done.stdout
    if code != 0:
        detail = "" if stream else (done.stderr or done.stdout).strip()[-500:]
        raise UserError("`%s` failed (exit %d) %s" % (" ".join(command), code, detail),
                        "run it by hand in %s to see why (a provider missing? "
                        "VT-x disabled? not enough memory: lower DLBENCH_VM_MEMORY)" % REPO)
    return out
