"""The emulated cluster (`invoke cluster.up / cluster.down / cluster.status`, root only).

Each host is a network namespace with its own address on a private bridge, a real sshd inside
(its own host key, checked by the harness and Ansible against a known_hosts file made here),
links shaped with tc, and a cgroup limiting its CPU and memory: processes started over SSH
land in the namespace and the cgroup. Everything made is recorded in a state file, and
`down` removes exactly that. Only the bridge's private addresses ever see traffic.
"""
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

from contract.errors import UserError
from ..paths import INVENTORIES, cache_dir
from . import slurm

SUBNET = "10.77.0"           # private; the controller is .1, host i is .(10 + i)
BRIDGE = "dlb-br0"
PREFIX = "dlb-node"
PRESETS = {"1gbit": 1000, "10gbit": 10000, "100mbit": 100, "50mbit": 50}
CGROUP_ROOT = Path("/sys/fs/cgroup")
INVENTORY = INVENTORIES / "netns.yml"
# The comment on this machine's firewall rules that stand between it and the hosts for a
# while (a test's bastion): they belong to the cluster, and `up` and `down` remove any left
# behind by a process killed before it could, as a later `up` would otherwise fail on them.
FIREWALL_TAG = "dlbench-netns"


def state_dir():
    """Keys, sshd configs and the state file (the hosts' workdirs, with their results, are
    elsewhere and outlive the cluster)."""
    return cache_dir() / "netns-cluster"


def state_file():
    return state_dir() / "state.json"


def sh(*args, check=True, namespace=None):
    command = (["ip", "netns", "exec", namespace] if namespace else []) + [str(a) for a in args]
    result = subprocess.run(command, capture_output=True, text=True)
    if check and result.returncode != 0:
        raise UserError("`%s` failed: %s" % (" ".join(command), result.stderr.strip()),
                        "see `invoke cluster.status`; `invoke cluster.down` undoes a partial up")
    return result


def require_root():
    if os.geteuid() != 0:
        raise UserError("the emulated cluster needs root (namespaces, tc, cgroups)",
                        "run `sudo -E invoke cluster.up`, or use the local cluster")


# --- up ----------------------------------------------------------------------------------------

def _already_up(with_slurm):
    """The state of a cluster that is up (Slurm added where asked), or None where its state
    is stale: then what it names is removed."""
    state = read_state()
    if all(host_alive(host) for host in state["hosts"]):
        wait_for_ssh(state, seconds=5)
        write_inventory(state)  # this checkout may not have it (the state is per machine)
        if with_slurm and not state.get("slurm"):
            start_slurm(state)
        elif state.get("slurm"):
            write_slurm_inventory(state)
        write_state(state)
        print("emulated cluster already up: %d hosts%s (cluster.down first to change it); "
              "inventory %s" % (len(state["hosts"]), " with Slurm" if state.get("slurm")
                                else "", INVENTORY))
        return state
    print("emulated cluster state is stale (a host or its sshd is gone): removing it "
          "and starting again")
    down()
    return None


def up(options):
    """Create the hosts (and, with --slurm, Slurm on them), or report that they exist. Returns
    the state. options: harness/plan/options.py ClusterUpOptions."""
    hosts, vcpus, memory_mb = int(options.hosts), float(options.vcpus), int(options.memory)
    with_slurm = options.slurm
    require_root()
    if with_slurm:
        slurm.require_packages()
    if state_file().is_file():
        state = _already_up(with_slurm)
        if state:
            return state
    mbit = link_rate(options.network, options.rate, options.delay, options.loss)
    ensure_sshd()
    remove_tagged_rules()
    started = time.monotonic()
    state = {"hosts": [], "bridge": None, "rate_mbit": mbit, "vcpus": vcpus,
             "memory_mb": memory_mb, "dir": str(state_dir())}
    state_dir().mkdir(parents=True, exist_ok=True)
    try:
        make_keys(state)
        make_bridge(state)
        for index in range(1, hosts + 1):
            make_host(state, index, vcpus, memory_mb)
            write_state(state)
        shape_all(state, mbit)
        write_known_hosts(state)
        write_inventory(state)
        wait_for_ssh(state)
        if with_slurm:
            start_slurm(state)
    except BaseException:
        write_state(state)  # what exists so far, so that `down` removes it
        raise
    write_state(state)
    print("emulated cluster up in %.1f s: %d hosts on %s.0/24 at %d Mbit/s, %g vCPU and %d MB "
          "each%s; inventory %s" % (time.monotonic() - started, hosts, SUBNET, mbit, vcpus,
                                    memory_mb, ", Slurm on them" if with_slurm else "",
                                    INVENTORY))
    return state


def start_slurm(state):
    try:
        slurm.up(state, SUBNET + ".1")
        write_slurm_inventory(state)
    finally:
        write_state(state)  # the pids started so far, so that `down` stops them
    print("Slurm up: slurmctld at %s.1, a slurmd in each host; export SLURM_CONF=%s"
          % (SUBNET, state["slurm"]["conf"]))


def link_rate(network, rate, delay, loss):
    if delay or loss:
        if not netem_available():
            raise UserError("--delay and --loss need the kernel's netem qdisc, which this "
                            "kernel lacks (CONFIG_NET_SCH_NETEM)",
                            "shape the rate only (--network or --rate), or use a kernel with "
                            "netem")
        raise UserError("--delay/--loss are not implemented yet", "shape the rate only")
    if rate:
        return parse_rate(rate)
    if network not in PRESETS:
        raise UserError("unknown network preset %r" % network,
                        "use one of %s, or --rate like 200mbit" % ", ".join(PRESETS))
    return PRESETS[network]


def parse_rate(text):
    text = str(text).strip().lower()
    for unit, factor in (("gbit", 1000), ("mbit", 1)):
        if text.endswith(unit) and text[:-len(unit)].replace(".", "", 1).isdigit():
            return float(text[:-len(unit)]) * factor
    if text.isdigit():
        return float(text)
    raise UserError("rate %r is not like 50mbit or 1gbit" % text, "write e.g. 200mbit")


def netem_available():
    probe = "dlb-netem-probe"
    sh("ip", "link", "add", probe, "type", "dummy", check=False)
    ok = sh("tc", "qdisc", "add", "dev", probe, "root", "netem", check=False).returncode == 0
    sh("ip", "link", "del", probe, check=False)
    return ok


def ensure_sshd():
    if Path("/usr/sbin/sshd").exists():
        return
    print("installing openssh-server (Debian package) ...", flush=True)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    result = subprocess.run(["apt-get", "install", "-y", "-q", "openssh-server"], env=env,
                            capture_output=True, text=True)
    if result.returncode != 0:
        subprocess.run(["apt-get", "update", "-q"], env=env, capture_output=True)
        result = subprocess.run(["apt-get", "install", "-y", "-q", "openssh-server"], env=env,
                                capture_output=True, text=True)
    if result.returncode != 0 or not Path("/usr/sbin/sshd").exists():
        raise UserError("could not install openssh-server: %s" % result.stderr.strip()[-500:],
                        "install it yourself: apt-get install openssh-server")


def make_keys(state):
    """The cluster's login key; one host key per host is made with the host."""
    key = state_dir() / "id_ed25519"
    if not key.exists():
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "dlbench-netns", "-f", key)
    shutil.copyfile(str(key) + ".pub", state_dir() / "authorized_keys")
    os.chmod(state_dir() / "authorized_keys", 0o600)
    state["key"] = str(key)


def make_bridge(state):
    sh("ip", "link", "add", BRIDGE, "type", "bridge")
    state["bridge"] = BRIDGE
    sh("ip", "addr", "add", "%s.1/24" % SUBNET, "dev", BRIDGE)
    sh("ip", "link", "set", BRIDGE, "up")


def make_host(state, index, vcpus, memory_mb):
    name, namespace, veth = "node%d" % index, "%s%d" % (PREFIX, index), "dlb-h%d" % index
    address = "%s.%d" % (SUBNET, 10 + index)
    host = {"name": name, "namespace": namespace, "veth": veth, "address": address,
            "interface": "eth0"}
    state["hosts"].append(host)
    sh("ip", "netns", "add", namespace)
    sh("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", namespace)
    sh("ip", "link", "set", veth, "master", BRIDGE)
    sh("ip", "link", "set", veth, "up")
    sh("ip", "addr", "add", address + "/24", "dev", "eth0", namespace=namespace)
    sh("ip", "link", "set", "eth0", "up", namespace=namespace)
    sh("ip", "link", "set", "lo", "up", namespace=namespace)
    host["cgroups"] = make_cgroups(name, vcpus, memory_mb)
    host["sshd_pid"] = start_sshd(host)
    for cgroup in host["cgroups"]:
        Path(cgroup, "cgroup.procs").write_text(str(host["sshd_pid"]))


def make_cgroups(name, vcpus, memory_mb):
    """cgroup v1: a CPU quota of `vcpus` cores and a memory limit; sshd's sessions inherit."""
    made = []
    cpu = CGROUP_ROOT / "cpu" / "dlbench" / name
    cpu.mkdir(parents=True, exist_ok=True)
    (cpu / "cpu.cfs_period_us").write_text("100000")
    (cpu / "cpu.cfs_quota_us").write_text(str(int(vcpus * 100000)))
    made.append(str(cpu))
    mem = CGROUP_ROOT / "memory" / "dlbench" / name
    mem.mkdir(parents=True, exist_ok=True)
    (mem / "memory.limit_in_bytes").write_text(str(int(memory_mb) * 1024 * 1024))
    made.append(str(mem))
    return made


def start_sshd(host):
    folder = state_dir() / host["name"]
    folder.mkdir(parents=True, exist_ok=True)
    hostkey = folder / "ssh_host_ed25519_key"
    if not hostkey.exists():
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", hostkey)
    config = folder / "sshd_config"
    config.write_text(sshd_config(host, hostkey, folder / "sshd.pid"))
    Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege-separation directory
    sh("/usr/sbin/sshd", "-f", config, namespace=host["namespace"])
    pid_file = folder / "sshd.pid"
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        # sshd creates the file, then writes it: an empty file is a pid not written yet
        text = pid_file.read_text().strip() if pid_file.exists() else ""
        if text.isdigit():
            return int(text)
        time.sleep(0.05)
    raise UserError("sshd did not start in %s" % host["namespace"],
                    "run `/usr/sbin/sshd -t -f %s` to see why" % config)


def sshd_config(host, hostkey, pid_file):
    # Sessions get this user's PATH: the hosts share this machine's disk and interpreters.
    return "\n".join([
        "ListenAddress %s" % host["address"], "Port 22", "HostKey %s" % hostkey,
        "PidFile %s" % pid_file, "AuthorizedKeysFile %s" % (state_dir() / "authorized_keys"),
        "PermitRootLogin prohibit-password", "PasswordAuthentication no",
        "KbdInteractiveAuthentication no", "UsePAM no", "StrictModes no",
        "SetEnv PATH=%s" % os.environ.get("PATH", "/usr/bin:/bin"),
        "Subsystem sftp internal-sftp", "MaxSessions 100", "MaxStartups 100", ""])


def shape_all(state, mbit):
    state["rate_mbit"] = mbit
    for host in state["hosts"]:
        shape(host, mbit)


def shape(host, mbit):
    """tbf on both ends of the host's link: what it sends (eth0) and receives (its veth)."""
    rate = "%dkbit" % int(mbit * 1000)
    burst = max(32 * 1024, int(mbit * 1e6 / 8 / 100))  # 10 ms at the rate, at least 32 KB
    for namespace, dev in ((host["namespace"], "eth0"), (None, host["veth"])):
        sh("tc", "qdisc", "replace", "dev", dev, "root", "tbf", "rate", rate,
           "burst", str(burst), "latency", "50ms", namespace=namespace)


def reshape(mbit):
    """Change every link's rate (between cells); returns the state."""
    require_root()
    state = read_state()
    shape_all(state, mbit)
    write_state(state)
    return state


def write_known_hosts(state):
    lines = []
    for host in state["hosts"]:
        pub = (state_dir() / host["name"] / "ssh_host_ed25519_key.pub").read_text().split()
        lines.append("%s %s %s" % (host["address"], pub[0], pub[1]))
    path = state_dir() / "known_hosts"
    path.write_text("\n".join(lines) + "\n")
    state["known_hosts"] = str(path)


def write_inventory(state):
    """inventory/netns.yml (git-ignored): the hosts as Ansible and the harness see them."""
    lines = ["# Written by `invoke cluster.up`; removed by `invoke cluster.down`.",
             "all:", "  vars:",
             "    ansible_connection: ssh", "    ansible_user: root",
             "    ansible_ssh_private_key_file: %s" % state["key"],
             "    known_hosts: %s" % state["known_hosts"],
             "    ansible_ssh_common_args: >-",
             "      -o UserKnownHostsFile=%s -o StrictHostKeyChecking=yes" % state["known_hosts"],
             "    ansible_python_interpreter: /usr/bin/python3",
             "    cluster_interface: eth0", "    vcpus: %d" % max(1, round(state["vcpus"])),
             "    base_port: 29500", "    env_root: ~/.cache/dlbench/envs",
             "    shared_env_root: true",
             "    link_mbit: %d" % state["rate_mbit"],
             "  children:", "    nodes:", "      hosts:"]
    for host in state["hosts"]:
        lines += ["        %s:" % host["name"], "          address: %s" % host["address"],
                  "          ansible_host: %s" % host["address"],
                  "          workdir: ~/.cache/dlbench/netns/%s" % host["name"]]
    INVENTORY.write_text("\n".join(lines) + "\n")
    state["inventory"] = str(INVENTORY)
    # another checkout on this machine may have written its own copy: down removes them all
    state["inventories"] = sorted(set(state.get("inventories", [])) | {str(INVENTORY)})


SLURM_INVENTORY = INVENTORIES / "netns-slurm.yml"


def write_slurm_inventory(state):
    """inventory/netns-slurm.yml: the emulated hosts as a Slurm allocation's nodes, with the
    netns inventory's workdirs, so that what `provision --inventory netns` put there serves."""
    SLURM_INVENTORY.write_text(
        "# Written by `invoke cluster.up --slurm`; removed by `invoke cluster.down`.\n"
        "# The hosts come from the allocation (SLURM_JOB_ID). `invoke provision` with it runs\n"
        "# Ansible's tasks as job steps; --inventory netns provisions the same hosts over SSH.\n"
        "all:\n  vars:\n    ansible_connection: slurm\n    cluster_interface: eth0\n"
        "    ansible_python_interpreter: /usr/bin/python3\n"
        "    workdir: ~/.cache/dlbench/netns/{host}\n    env_root: ~/.cache/dlbench/envs\n"
        "    shared_env_root: true\n    base_port: 29500\n    link_mbit: %d\n"
        % state["rate_mbit"])
    paths = state.setdefault("inventories", [])
    if str(SLURM_INVENTORY) not in paths:
        paths.append(str(SLURM_INVENTORY))


def host_alive(host):
    """Its namespace exists and its sshd (pid recorded in the state) still runs."""
    namespaces = sh("ip", "netns", "list", check=False).stdout.split()
    return host["namespace"] in namespaces and pid_running(host.get("sshd_pid", 0))


def pid_running(pid):
    """Alive and not a zombie (PID 1 in a container does not always reap)."""
    try:
        return Path("/proc/%d/stat" % pid).read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def wait_for_ssh(state, seconds=20):
    deadline = time.monotonic() + seconds
    for host in state["hosts"]:
        while True:
            ok = subprocess.run(ssh_command(state, host, "true"), capture_output=True).returncode
            if ok == 0:
                break
            if time.monotonic() > deadline:
                raise no_ssh_error(host)
            time.sleep(0.2)


def no_ssh_error(host):
    """Names this machine's firewall rules against the host, the cause found so far."""
    rules = rules_against(host["address"])
    if not rules:
        return UserError("%s (%s) does not answer over SSH" % (host["name"], host["address"]),
                         "see `invoke cluster.status`")
    return UserError("%s (%s) does not answer over SSH: this machine's firewall refuses it "
                     "(%s)" % (host["name"], host["address"], "; ".join(rules)),
                     "%s, then `invoke cluster.down` and `invoke cluster.up`"
                     % ", ".join("`iptables -D %s`" % rule[len("-A "):] for rule in rules))


def output_rules():
    """This machine's OUTPUT rules as `iptables -S` writes them; none without iptables."""
    if not shutil.which("iptables"):
        return []
    listed = sh("iptables", "-S", "OUTPUT", check=False).stdout.splitlines()
    return [rule for rule in listed if rule.startswith("-A ")]


def rules_against(address):
    return [rule for rule in output_rules() if " -d %s/32 " % address in rule + " "
            and (" -j REJECT" in rule or " -j DROP" in rule)]


def remove_tagged_rules():
    for rule in output_rules():
        if '--comment %s ' % FIREWALL_TAG in rule + " ":
            sh("iptables", "-D", *rule.split()[1:], check=False)


def ssh_command(state, host, command):
    return ["ssh", "-i", state["key"], "-o", "UserKnownHostsFile=%s" % state["known_hosts"],
            "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5",
            "root@%s" % host["address"], command]


# --- state, down, status -----------------------------------------------------------------------

def read_state():
    if not state_file().is_file():
        raise UserError("no emulated cluster is up", "run `sudo -E invoke cluster.up`")
    return json.loads(state_file().read_text())


def write_state(state):
    tmp = state_file().with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=1))
    tmp.replace(state_file())


def down():
    """Remove exactly what `up` recorded; safe to run twice."""
    require_root()
    remove_tagged_rules()
    if not state_file().is_file():
        print("no emulated cluster is up: nothing to remove")
        return
    started = time.monotonic()
    state = read_state()
    slurm.down(state)
    for host in state["hosts"]:
        remove_host(host)
    if state.get("bridge"):
        sh("ip", "link", "del", state["bridge"], check=False)
    for path in state.get("inventories", [state.get("inventory") or str(INVENTORY)]):
        if Path(path).is_file():
            Path(path).unlink()
    shutil.rmtree(state_dir(), ignore_errors=True)
    print("emulated cluster down in %.1f s: %d hosts removed"
          % (time.monotonic() - started, len(state["hosts"])))


def remove_host(host):
    """Every process in the host's cgroups (sshd and what it started), then its namespace."""
    for cgroup in host.get("cgroups", []):
        kill_cgroup(Path(cgroup))
    sh("ip", "netns", "del", host["namespace"], check=False)
    sh("ip", "link", "del", host["veth"], check=False)
    for cgroup in host.get("cgroups", []):
        try:
            Path(cgroup).rmdir()
        except OSError:
            pass


def kill_cgroup(cgroup, seconds=5):
    procs = cgroup / "cgroup.procs"
    deadline = time.monotonic() + seconds
    while procs.is_file() and procs.read_text().split() and time.monotonic() < deadline:
        for pid in procs.read_text().split():
            try:
                os.kill(int(pid), 9)
            except ProcessLookupError:
                pass
        time.sleep(0.1)


def status():
    if not state_file().is_file():
        print("no emulated cluster is up")
        return None
    state = read_state()
    print("emulated cluster: %d hosts, bridge %s (%s.1), links %d Mbit/s (tbf), %g vCPU and "
          "%s MB per host; inventory %s" % (len(state["hosts"]), state.get("bridge"), SUBNET,
                                            state["rate_mbit"], state["vcpus"],
                                            state["memory_mb"], state.get("inventory")))
    nodes = slurm.node_states(state) if state.get("slurm") else {}
    if state.get("slurm"):
        print("Slurm: export SLURM_CONF=%s" % state["slurm"]["conf"])
    for host in state["hosts"]:
        alive = pid_running(host.get("sshd_pid", 0))
        qdisc = sh("tc", "qdisc", "show", "dev", "eth0", namespace=host["namespace"],
                   check=False).stdout.strip().splitlines()
        procs = sum(len(Path(c, "cgroup.procs").read_text().split())
                    for c in host.get("cgroups", [])[:1] if Path(c).is_dir())
        print("  %s  %-12s ns %-10s sshd %s  %d processes  %s%s"
              % (host["name"], host["address"], host["namespace"],
                 "up (pid %d)" % host["sshd_pid"] if alive else "DOWN",
                 procs, qdisc[0] if qdisc else "no qdisc",
                 "  slurm %s" % nodes.get(host["name"], "?") if state.get("slurm") else ""))
    return state
