"""Three Vagrant VMs as a cluster: bring them up if needed and write inventory/vagrant.yml from
`vagrant ssh-config`, so no key path or forwarded port is copied by hand.

Two providers. libvirt (the default where it is installed): this package starts libvirt where
it does not run and defines its NAT network and storage pool (libvirt.py), builds its box from
Debian's packages where none is named (vmbox.py), and picks KVM or QEMU's TCG emulation by
trying KVM; the VMs' addresses are the ones libvirt's DHCP gives them. VirtualBox: a Vagrant
Cloud box on a host-only network with fixed addresses.

The Vagrantfile reads the same environment variables with the same defaults (a test checks
that they agree). Each VM's host key and cluster interface are read through `vagrant ssh`
(authenticated by the key Vagrant made for that VM) and pinned in a known_hosts file: the
harness and Ansible then check the host key on every connection."""
import contextlib
import json
import os
import re
import shutil
import subprocess
import time

import yaml

from . import libvirt, vmbox, vmwatch
from contract.errors import UserError
from ..paths import INVENTORIES, REPO

INVENTORY = INVENTORIES / "vagrant.yml"
STATE = REPO / ".vagrant" / "dlbench"
DEFAULTS = {"DLBENCH_VM_NODES": "3", "DLBENCH_VM_CPUS": "4", "DLBENCH_VM_MEMORY": "16384",
            "DLBENCH_VM_SUBNET": "192.168.56", "DLBENCH_VM_NETWORK": "192.168.123",
            "DLBENCH_VM_BOX": "generic/ubuntu2204", "DLBENCH_VM_DRIVER": "kvm",
            "DLBENCH_VM_KERNEL": "", "DLBENCH_VM_CONSOLE": ""}
SSH_FIELDS = {"hostname": "ssh_host", "port": "ssh_port", "user": "user",
              "identityfile": "key"}
CLOUD_BOX = DEFAULTS["DLBENCH_VM_BOX"]


def settings(environ=None):
    environ = os.environ if environ is None else environ
    return {name: environ.get(name) or default for name, default in DEFAULTS.items()}


def node_address(index, subnet):
    """The Vagrantfile's rule on VirtualBox: node i gets <subnet>.1i on the host-only network."""
    return "%s.%d" % (subnet, 10 + index)


def provider():
    """libvirt where it is installed (or asked for), else VirtualBox."""
    asked = os.environ.get("VAGRANT_DEFAULT_PROVIDER")
    if asked:
        return asked
    if shutil.which("libvirtd") or shutil.which("virsh"):
        return "libvirt"
    if shutil.which("VBoxManage"):
        return "virtualbox"
    raise UserError("neither libvirt nor VirtualBox is installed",
                    libvirt.INSTALL + " (Debian), or install VirtualBox")


# What machine_setup put in this process's environment for the Vagrantfile: a second call
# (vm-bench sets up, then prepares) must not take it for the user's own choice.
_SET_HERE = {}


def _asked(name):
    """The user's setting of `name`, not one machine_setup made."""
    value = os.environ.get(name)
    return value if value and _SET_HERE.get(name) != value else None


def _export(values):
    os.environ.update(values)
    _SET_HERE.update(values)


def machine_setup(progress=print, box_envs=()):
    """Everything the VMs need before `vagrant up`, recorded in STATE/vm.json and passed to
    the Vagrantfile through the environment: libvirt running, the box (with box_envs built
    into it: vmbox.py), the accelerator."""
    chosen = provider()
    os.environ["VAGRANT_DEFAULT_PROVIDER"] = chosen
    record = {"provider": chosen, "box": _asked("DLBENCH_VM_BOX") or CLOUD_BOX}
    if box_envs and (chosen != "libvirt" or _asked("DLBENCH_VM_BOX")):
        raise UserError("DLBENCH_VM_BOX_ENVS builds envs into the box built here (libvirt), "
                        "but the VMs use %s" % (record["box"] if chosen == "libvirt" else chosen),
                        "unset DLBENCH_VM_BOX_ENVS, or DLBENCH_VM_BOX with libvirt")
    if chosen == "libvirt":
        libvirt.ensure(progress)
        if not _asked("DLBENCH_VM_BOX"):
            record["box"], folder = vmbox.ensure(progress, box_envs)
            kernel, initrd = libvirt.readable_copies(vmbox.kernel_files(folder))
            _export({"DLBENCH_VM_KERNEL": str(kernel), "DLBENCH_VM_INITRD": str(initrd),
                     "DLBENCH_VM_CMDLINE": vmbox.RECIPE["cmdline"]})
            record["accelerator"], record["why"] = known_accelerator(record["box"]) or \
                libvirt.accelerator(kernel)
            record["probed"] = True  # the only choice known_accelerator may reuse
        else:
            record["accelerator"], record["why"] = "kvm", "box %s (no kernel to probe)" \
                % record["box"]
        if _asked("DLBENCH_VM_DRIVER"):
            record["accelerator"], record["why"] = os.environ["DLBENCH_VM_DRIVER"], \
                "DLBENCH_VM_DRIVER"
        console = libvirt.FILES / "console"
        console.mkdir(parents=True, exist_ok=True)
        _export({"DLBENCH_VM_BOX": record["box"], "DLBENCH_VM_DRIVER": record["accelerator"],
                 "DLBENCH_VM_CONSOLE": str(console)})
        progress("accelerator: %s (%s)" % (record["accelerator"], record["why"]))
    STATE.mkdir(parents=True, exist_ok=True)
    (STATE / "vm.json").write_text(json.dumps(record, indent=1))
    return record


def known_accelerator(box):
    """(accelerator, why) chosen earlier for this box on this machine, or None: trying KVM
    costs up to libvirt.PROBE_SECONDS, and every provisioning would try it again."""
    record = vm_record()
    if record.get("box") == box and record.get("probed") and record.get("accelerator") and \
            record.get("why") != "DLBENCH_VM_DRIVER":
        return record["accelerator"], record["why"]
    return None


def vm_record():
    """What machine_setup recorded (provider, box, accelerator and why), or {}."""
    path = STATE / "vm.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def prepare(run=None, echo=print, box_envs=()):
    """`vagrant up` what is not running, then write inventory/vagrant.yml. Returns its path.
    box_envs: framework envs the built box holds (DLBENCH_VM_BOX_ENVS, stacks.box_envs)."""
    run = run or _vagrant
    if run is _vagrant:
        if not shutil.which("vagrant"):
            raise UserError("`vagrant` is not installed on this machine",
                            "install Vagrant and libvirt (+ the vagrant-libvirt plugin) or "
                            "VirtualBox, see docs/reproducing.md; or use --inventory local")
        record = machine_setup(echo, box_envs)
    else:
        record = {"provider": os.environ.get("VAGRANT_DEFAULT_PROVIDER", "virtualbox")}
    conf = settings()
    names = ["node%d" % i for i in range(1, int(conf["DLBENCH_VM_NODES"]) + 1)]
    stopped = [n for n, state in machine_states(run(["status", "--machine-readable"])).items()
               if n in names and state != "running"]
    if stopped:
        echo("vagrant up: %s (a first boot copies the box: minutes)" % ", ".join(stopped))
        began = time.monotonic()
        bring_up(run, stopped, record, echo)
        echo("up in %.0f s" % (time.monotonic() - began))
    ssh = parse_ssh_config(run(["ssh-config"] + names))
    missing = [n for n in names if n not in ssh]
    if missing:
        raise UserError("`vagrant ssh-config` gave nothing for %s" % ", ".join(missing),
                        "run `vagrant status` in %s and `vagrant up %s`"
                        % (REPO, " ".join(missing)))
    hosts = {}
    for index, name in enumerate(names, 1):
        # libvirt: the VM's own address on the package's network; VirtualBox: the fixed one
        address = ssh[name]["ssh_host"] if record["provider"] == "libvirt" else \
            node_address(index, conf["DLBENCH_VM_SUBNET"])
        key_line, interface = read_node(run, name, address)
        hosts[name] = dict(ssh[name], address=address, interface=interface, host_key=key_line)
    path = write_inventory(hosts, int(conf["DLBENCH_VM_CPUS"]),
                           conda=record.get("box", CLOUD_BOX) == CLOUD_BOX)
    echo("wrote %s (%d VMs)" % (path, len(hosts)))
    return path


def bring_up(run, names, record, echo):
    """`vagrant up` names. Run by this package's own `vagrant` on libvirt with a console log,
    a VM whose DHCP client gave up is restarted once while Vagrant waits for its address
    (vmwatch.py says why)."""
    console = os.environ.get("DLBENCH_VM_CONSOLE")
    watched = run is _vagrant and record["provider"] == "libvirt" and console
    watch = vmwatch.DhcpWatch(names, console, restart_vm, echo, time.time) if watched else \
        contextlib.nullcontext()
    try:
        with watch:
            run(["up"] + names, stream=True)
    except UserError as error:
        raise UserError(error.cause + console_tails(names), error.fix)


def restart_vm(name):
    """Stop a libvirt VM at once and start it again (a new QEMU process), found by the id
    Vagrant recorded for it."""
    uuid = (REPO / ".vagrant" / "machines" / name / "libvirt" / "id").read_text().strip()
    libvirt.virsh("destroy", uuid)
    libvirt.virsh("start", uuid)


def console_tails(names, lines=15):
    """The last lines of each VM's console log, which say why a box did not boot."""
    folder = os.environ.get("DLBENCH_VM_CONSOLE")
    out = ""
    for name in names:
        log = os.path.join(folder, name + ".log") if folder else ""
        if log and os.path.isfile(log):
            with open(log, errors="replace") as handle:
                text = handle.read()
            tail = vmwatch.plain(text).splitlines()[-lines:]
            failed = vmwatch.failed_units(text)
            out += "\n--- %s's console (%s)%s, last %d lines:\n%s" % (
                name, log, "; failed to start: " + ", ".join(failed) if failed else "",
                len(tail), "\n".join(tail))
    return out


def down(run=None, echo=print):
    """Destroy the VMs, then stop what this package started for them (libvirt.down)."""
    run = run or _vagrant
    if not created_machines():
        echo("no VMs are up: nothing to destroy")
    elif shutil.which("vagrant"):
        record = vm_record()
        if record.get("provider"):
            os.environ.setdefault("VAGRANT_DEFAULT_PROVIDER", record["provider"])
        if record.get("box"):
            os.environ.setdefault("DLBENCH_VM_BOX", record["box"])
        os.environ["DLBENCH_VM_NODES"] = str(nodes_to_destroy(created_machines()))
        run(["destroy", "-f"], stream=True)
    done = libvirt.down(echo) if libvirt.read_state() else []
    if INVENTORY.is_file():
        INVENTORY.unlink()
    return done


def nodes_to_destroy(created):
    """DLBENCH_VM_NODES for `vagrant destroy`: Vagrant destroys only the machines its
    Vagrantfile defines, so a VM created under a larger DLBENCH_VM_NODES than now set (node3
    of an earlier three) would be left running."""
    asked = int(os.environ.get("DLBENCH_VM_NODES") or DEFAULTS["DLBENCH_VM_NODES"])
    made = [int(name[4:]) for name in created if name[4:].isdigit()]
    return max([asked] + made)


def created_machines():
    """Machines Vagrant created here: it keeps a machine's id until the machine is destroyed.
    Without one, `vagrant destroy` has nothing to do, and fails where libvirt is not running."""
    return sorted(p.parent.parent.name for p in (REPO / ".vagrant" / "machines").glob("*/*/id"))


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


def write_inventory(hosts, vcpus, conda=True):
    """conda: every stack's Python from conda (Ubuntu 22.04 has neither Python 3.6 nor 3.11);
    otherwise the stack's own source (the built box has Debian 11's Python 3.9: paper-py39)."""
    STATE.mkdir(parents=True, exist_ok=True)
    known_hosts = STATE / "known_hosts"
    known_hosts.write_text("".join("%s %s\n" % (known_host(h["ssh_host"], h["ssh_port"]),
                                               h["host_key"]) for h in hosts.values()))
    options = "-o UserKnownHostsFile=%s -o StrictHostKeyChecking=yes" % known_hosts
    nodes = {name: {"address": h["address"], "ansible_host": h["ssh_host"],
                    "ansible_port": h["ssh_port"], "ansible_user": h["user"],
                    "ansible_ssh_private_key_file": h["key"],
                    "cluster_interface": h["interface"], "workdir": "~/dlbench"}
             for name, h in hosts.items()}
    variables = {
        "ansible_connection": "ssh", "ansible_python_interpreter": "/usr/bin/python3",
        "ansible_ssh_common_args": options, "known_hosts": str(known_hosts),
        "vcpus": vcpus, "base_port": 29500, "env_root": "~/" + vmbox.ENV_ROOT}
    if conda:
        variables["python_source"] = "conda"
    data = {"all": {"vars": variables, "children": {"nodes": {"hosts": nodes}}}}
    INVENTORY.write_text("# Written by `invoke provision --inventory vagrant` from `vagrant "
                         "ssh-config`; git-ignored.\n" + yaml.safe_dump(data, sort_keys=False))
    return INVENTORY


def known_host(host, port):
    """OpenSSH's known_hosts name: the bare host on port 22, [host]:port on another."""
    return host if port == 22 else "[%s]:%d" % (host, port)


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
