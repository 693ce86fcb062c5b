"""libvirt for the Vagrant VMs: started where it does not run, with the network and storage pool
this package defines, and stopped again by `invoke vagrant.down`, which stops what this module
started (by the pids it recorded) and nothing else.

Also the choice of accelerator, by trying it: a guest kernel must get as far as looking for its
root under KVM within PROBE_SECONDS, else QEMU's TCG emulation is used. `/dev/kvm` being there
proves nothing: nested KVM can accept a VM and then hang it.
"""
import json
import os
import signal
import shutil
import subprocess
import time
from pathlib import Path

from contract.errors import UserError
from ..paths import cache_dir

URI = "qemu:///system"
NETWORK = "dlbench"  # libvirt's NAT network of the VMs; libvirt's DHCP picks the addresses
SUBNET = os.environ.get("DLBENCH_VM_NETWORK", "192.168.123")
POOL = "dlbench"
PROBE_SECONDS = 10
INSTALL = ("apt-get install --no-install-recommends libvirt-daemon-system "
           "libvirt-daemon-system-sysv libvirt-clients qemu-system-x86 qemu-utils dnsmasq-base "
           "iptables")
DAEMONS = (("virtlogd", "/run/virtlogd.pid"), ("libvirtd", "/run/libvirtd.pid"))
# What QEMU opens (disks, the box's kernel and initrd, console logs) must be where libvirt's
# QEMU user can reach it; a home folder such as /root is not
FILES = Path(os.environ.get("DLBENCH_VM_FILES", "/var/lib/libvirt/dlbench"))
KVM = Path("/dev/kvm")


def state_path():
    return cache_dir() / "vagrant" / "libvirt-started.json"


def read_state():
    path = state_path()
    return json.loads(path.read_text()) if path.is_file() else {}


def write_state(state):
    state_path().parent.mkdir(parents=True, exist_ok=True)
    state_path().write_text(json.dumps(state, indent=1))


def virsh(*args, check=True, timeout=120):
    done = subprocess.run(["virsh", "-c", URI] + list(args), capture_output=True, text=True,
                          timeout=timeout)
    if check and done.returncode != 0:
        raise UserError("`virsh %s` failed: %s" % (" ".join(args), done.stderr.strip()[-400:]),
                        "see libvirtd's log (/var/log/libvirt/libvirtd.log)")
    return done


def require_installed():
    missing = [tool for tool in ("libvirtd", "virtlogd", "virsh", "qemu-system-x86_64")
               if not shutil.which(tool)]
    if missing:
        raise UserError("the Vagrant VMs need libvirt and QEMU; missing: %s"
                        % ", ".join(missing), INSTALL + " (Debian), and vagrant-libvirt")


def responding():
    try:
        return virsh("version", check=False, timeout=60).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def ensure(progress=print):
    """libvirtd answering, and the package's network and pool active. Returns the state."""
    require_installed()
    state = read_state()
    if not responding():
        start_daemons(state, progress)
    ensure_network(state, progress)
    ensure_pool(state, progress)
    write_state(state)
    return state


def start_daemons(state, progress):
    if os.geteuid() != 0:
        raise UserError("libvirtd is not running, and starting it needs root",
                        "run as root, or start libvirt yourself (`service libvirtd start`)")
    state.setdefault("ip_forward", Path("/proc/sys/net/ipv4/ip_forward").read_text().strip())
    kvm_for_libvirt(state)
    for name, pid_file in DAEMONS:
        if pid_alive(read_pid(pid_file)):
            continue
        subprocess.run([name, "-d"], check=True)
        state.setdefault("started", {})[name] = wait_pid(pid_file)
        write_state(state)  # recorded at once, so that `vagrant.down` stops it whatever fails
        progress("started %s (pid %d)" % (name, state["started"][name]))
    deadline = time.monotonic() + 60
    while not responding():
        if time.monotonic() > deadline:
            raise UserError("libvirtd started but does not answer on %s" % URI,
                            "see /var/log/libvirt/libvirtd.log")
        time.sleep(1)


def readable_copies(paths):
    """Copies of the box's kernel and initrd under FILES, unless they are there already."""
    FILES.mkdir(parents=True, exist_ok=True)
    out = []
    for path in paths:
        target = FILES / ("%s-%s" % (path.parent.name, path.name))
        if not target.is_file() or target.stat().st_size != path.stat().st_size:
            shutil.copyfile(str(path), str(target))
        out.append(target)
    return out


def kvm_for_libvirt(state):
    """/dev/kvm as udev leaves it on Debian (group kvm, 0660), where nothing did: root's
    alone, libvirt (whose QEMU runs as libvirt-qemu, in group kvm) finds KVM unusable and
    probes QEMU's capabilities again on every call, about 4 s each (a `vagrant up` spent 68 s
    of 113 s so). The old owner and mode are recorded and put back by down()."""
    try:
        import grp
        kvm_gid = grp.getgrnam("kvm").gr_gid
    except KeyError:
        return
    if not KVM.exists():
        return
    info = KVM.stat()
    if info.st_gid == kvm_gid and info.st_mode & 0o060 == 0o060:
        return
    state["kvm"] = {"gid": info.st_gid, "mode": info.st_mode & 0o777}
    os.chown(str(KVM), -1, kvm_gid)
    os.chmod(str(KVM), 0o660)


def read_pid(pid_file):
    try:
        return int(Path(pid_file).read_text().strip() or 0)
    except (OSError, ValueError):
        return 0


def pid_alive(pid):
    if not pid:
        return False
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False


def wait_pid(pid_file, seconds=20):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        pid = read_pid(pid_file)
        if pid_alive(pid):
            return pid
        time.sleep(0.2)
    raise UserError("%s wrote no pid to %s" % (Path(pid_file).stem, pid_file),
                    "see /var/log/libvirt/")


def network_xml():
    return ("<network><name>%s</name><forward mode='nat'/>"
            "<bridge name='virbr-dlbench' stp='on' delay='0'/>"
            "<ip address='%s.1' netmask='255.255.255.0'><dhcp>"
            "<range start='%s.10' end='%s.250'/></dhcp></ip></network>"
            % (NETWORK, SUBNET, SUBNET, SUBNET))


def ensure_network(state, progress):
    info = virsh("net-info", NETWORK, check=False)
    if info.returncode != 0:
        path = state_path().with_name("network.xml")
        path.write_text(network_xml())
        virsh("net-define", str(path))
        state["network_defined"] = NETWORK
        progress("defined libvirt network %s (%s.0/24, NAT)" % (NETWORK, SUBNET))
    if "Active:         yes" not in virsh("net-info", NETWORK).stdout:
        virsh("net-start", NETWORK)
        state["network_started"] = NETWORK


def ensure_pool(state, progress):
    if virsh("pool-info", POOL, check=False).returncode != 0:
        folder = FILES / "pool"
        folder.mkdir(parents=True, exist_ok=True)
        virsh("pool-define-as", POOL, "dir", "--target", str(folder))
        state["pool_defined"] = POOL
        progress("defined libvirt storage pool %s (%s)" % (POOL, folder))
    if "running" not in virsh("pool-info", POOL).stdout:
        virsh("pool-start", POOL)
        state["pool_started"] = POOL


def down(progress=print):
    """Stop what ensure() started, by what it recorded: the network and pool it defined or
    started, the daemons it started (their pids), libvirt's firewall chains those daemons
    made, and ip_forward as it was. Returns what it did."""
    state = read_state()
    done = []
    if responding():
        if state.get("network_defined") or state.get("network_started"):
            virsh("net-destroy", NETWORK, check=False)
            done.append("network %s stopped" % NETWORK)
        if state.get("network_defined"):
            virsh("net-undefine", NETWORK, check=False)
        if state.get("pool_defined") or state.get("pool_started"):
            virsh("pool-destroy", POOL, check=False)
        if state.get("pool_defined"):
            virsh("pool-undefine", POOL, check=False)
            done.append("pool %s removed" % POOL)
    for name, pid in reversed(list((state.get("started") or {}).items())):
        if is_daemon(pid, name):  # a record from before a reboot names someone else's pid
            stop_pid(pid)
            done.append("%s (pid %d) stopped" % (name, pid))
    if state.get("started"):
        remove_firewall_chains()
        if state.get("ip_forward") is not None:
            Path("/proc/sys/net/ipv4/ip_forward").write_text(state["ip_forward"])
    if state.get("kvm") and KVM.exists():
        os.chown(str(KVM), -1, state["kvm"]["gid"])
        os.chmod(str(KVM), state["kvm"]["mode"])
    if state_path().is_file():
        state_path().unlink()
    for line in done:
        progress(line)
    return done


def is_daemon(pid, name):
    """Whether `pid` still runs the program `name` (the kernel keeps 15 characters of it)."""
    try:
        return Path("/proc/%d/comm" % pid).read_text().strip() == name[:15]
    except (OSError, TypeError):
        return False


def stop_pid(pid, seconds=15):
    if not pid_alive(pid):
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + seconds
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    if pid_alive(pid):
        os.kill(pid, signal.SIGKILL)


def remove_firewall_chains():
    """libvirtd leaves its LIBVIRT_* chains and the rules that jump to them when it stops."""
    for table in ("filter", "nat", "mangle"):
        rules = subprocess.run(["iptables", "-t", table, "-S"], capture_output=True,
                               text=True).stdout.splitlines()
        for rule in rules:
            if rule.startswith("-A ") and "LIBVIRT_" in rule and \
                    not rule.split()[1].startswith("LIBVIRT_"):
                subprocess.run(["iptables", "-t", table] + ["-D"] + rule.split()[1:],
                               capture_output=True)
        for rule in rules:
            if rule.startswith("-N LIBVIRT_"):
                chain = rule.split()[1]
                subprocess.run(["iptables", "-t", table, "-F", chain], capture_output=True)
                subprocess.run(["iptables", "-t", table, "-X", chain], capture_output=True)


def accelerator(kernel, seconds=PROBE_SECONDS):
    """("kvm" or "qemu", why): boot the box's kernel under KVM, as the VMs would be (the host's
    CPU passed through), with no root disk; a working KVM gets to the kernel's panic about
    its root within a second or two."""
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return "qemu", "/dev/kvm is missing or not usable by this user"
    command = ["qemu-system-x86_64", "-accel", "kvm", "-cpu", "host", "-m", "256",
               "-display", "none", "-serial", "stdio", "-no-reboot", "-kernel", str(kernel),
               "-append", "console=ttyS0 panic=-1 root=/dev/dlbench-probe"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=seconds)
        out = done.stdout + done.stderr
    except subprocess.TimeoutExpired as timed_out:
        out = (timed_out.stdout or b"").decode(errors="replace")
        last = [line for line in out.splitlines() if line.strip()][-1:] or ["nothing"]
        return "qemu", ("a KVM guest printed nothing after %r in %d s (nested KVM hangs)"
                        % (last[0].strip()[-80:], seconds))
    if "Kernel panic" in out or "VFS: Unable to mount root" in out:
        return "kvm", "a KVM guest reached its kernel's root mount"
    return "qemu", "KVM failed: %s" % (out.strip().splitlines() or ["no output"])[-1][-160:]
