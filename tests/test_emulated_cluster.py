"""The emulated cluster (root): namespace hosts with real sshd, shaped links and CPU limits,
driven over real SSH by Ansible and Fabric. Skipped without root.

Brings the cluster up if it is not (and takes it down at the end), provisions it over SSH,
runs a smoke cell of every kind of role over SSH (each system-mode but mxnet-async, whose roles
are mxnet-sync's, in one test or another), and checks that
communication follows the link bandwidth while compute does not."""
import contextlib
import json
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from harness.nodes import inventory, stacks, wheelhouse, access as nodes
from harness.plan import matrix
from harness.clusters import emulated as cluster
from selfcheck import faults
from contract.errors import UserError
from tests.conftest import LEASE, SHORT_LEASE, invoke

pytestmark = [pytest.mark.cluster, pytest.mark.root,
              pytest.mark.skipif(os.geteuid() != 0, reason="the emulated cluster needs root")]


@pytest.fixture(scope="module")
def netns(provisioned):
    """Up (unless it already is), provisioned over SSH; down at the end if we made it."""
    was_up = cluster.state_file().is_file()
    invoke("cluster.up")  # also when up: it checks the hosts and writes this checkout's inventory
    invoke("provision", "--inventory", "netns", "--nodes", "%d,3" % VALIDATION_NODES)
    yield cluster.read_state()
    if not was_up:
        invoke("cluster.down")


def records_of(results, inventory_file="netns"):
    (run,) = [p for p in results.iterdir() if p.is_dir()]
    invoke("collect", "--inventory", str(inventory_file), "--results", str(results))
    return run, [json.loads(l) for l in (run / "records.jsonl").read_text().splitlines()]


def test_up_twice_is_safe_and_status_shows_hosts_links_limits(netns):
    assert "already up" in invoke("cluster.up").stdout
    out = invoke("cluster.status").stdout
    for host in netns["hosts"]:
        assert "%s  %s" % (host["name"], host["address"]) in out
        assert "sshd up" in out
    assert "rate 1Gbit" in out and "1 vCPU" in out
    cpu = Path(netns["hosts"][0]["cgroups"][0])
    assert (cpu / "cpu.cfs_quota_us").read_text().strip() == "100000"


def test_a_firewall_rule_against_a_host_is_named_and_a_tagged_one_is_removed(netns):
    """A rule on this machine refusing TCP to node3 (as a test killed mid-way leaves one):
    `cluster.up` fails in seconds naming the rule; the same rule carrying the cluster's tag
    is the cluster's own, and removing the tagged rules (what up and down do) takes it."""
    node3 = netns["hosts"][2]
    rule = ["OUTPUT", "-d", node3["address"], "-p", "tcp", "-j", "REJECT"]
    subprocess.run(["iptables", "-I"] + rule, check=True)
    try:
        out = invoke("cluster.up", check=False)
    finally:
        subprocess.run(["iptables", "-D"] + rule, check=True)
    said = out.stdout + out.stderr
    assert out.returncode == 2, said
    assert "node3 (%s) does not answer over SSH: this machine's firewall refuses it (-A OUTPUT " \
        "-d %s/32 -p tcp -j REJECT" % (node3["address"], node3["address"]) in said, said
    tagged = rule[:-2] + ["-m", "comment", "--comment", cluster.FIREWALL_TAG] + rule[-2:]
    subprocess.run(["iptables", "-I"] + tagged, check=True)
    cluster.remove_tagged_rules()
    assert not cluster.rules_against(node3["address"])
    assert "already up" in invoke("cluster.up").stdout


def test_host_keys_are_checked(netns, tmp_path):
    """A host whose key is not in known_hosts is refused, never trusted on first use."""
    stranger = tmp_path / "known_hosts"
    stranger.write_text("")
    inv = inventory.load("netns")
    host = inv.hosts[0]
    host.known_hosts = str(stranger)
    with pytest.raises(UserError, match="host key not trusted"):
        nodes.SshNode(host).run("true")
    # and with the cluster's known_hosts the same host answers, from inside its namespace
    good = nodes.SshNode(inventory.load("netns").hosts[0])
    assert good.run("ip -br addr show eth0").stdout.split()[2].startswith(host.address)


def test_a_poll_runs_no_command_on_the_node(netns, tmp_path, monkeypatch):
    """A poll reads and touches through the connection's SFTP session: a command would start
    the user's shell, and this machine's root ~/.bashrc (pyenv's init) made that about 100 ms
    of the node's CPU per poll, which the cells' interference figures counted. A node that
    refuses SFTP is polled with the command."""
    node = nodes.SshNode(inventory.load("netns").hosts[1])
    folder = tmp_path / "role's folder"  # the hosts share this machine's disk
    folder.mkdir()
    (folder / "progress.json").write_text('{"step": 3}')
    (folder / "rc").write_text("0\n")
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        node.run("true")  # connected
        wanted = ('{"step": 3}', "S", "0\n")

        def refused(*args, **kwargs):
            raise AssertionError("a poll ran a command on the node")
        with monkeypatch.context() as patched:
            patched.setattr(node, "run", refused)
            assert node.poll_files(str(folder), sleeper.pid) == wanted
            assert time.time() - (folder / "lease").stat().st_mtime < 5
            assert node.poll_files(str(tmp_path / "gone"), sleeper.pid) == ("", "S", "")
        node.close()
        node._runner()  # a new connection, whose SFTP the node refuses
        monkeypatch.setattr(node._conn, "sftp", lambda: refused())
        progress, state, rc = node.poll_files(str(folder), sleeper.pid)
        assert (progress.strip(), state.strip()[:1], rc.strip()) == ('{"step": 3}', "S", "0")
    finally:
        sleeper.kill()


# The system-modes no other test here runs over SSH: pytorch-sync and mxnet-sync run in the
# bandwidth rounds, pytorch-sync on the cut link, mxnet-sync behind the bastion (the
# five at once cost 180 s on a 2-core EPYC). mxnet-async runs MXNet-sync's roles with
# another KVStore type, so its path over SSH is MXNet-sync's (as in tests/test_faults.py;
# a user's `invoke bench --inventory netns` still runs all five).
OVER_SSH_ONLY_HERE = ("tensorflow-sync", "tensorflow-async")


def test_the_other_system_modes_over_ssh(netns, tmp_path):
    invoke("bench", "--inventory", "netns", "--systems", ",".join(OVER_SSH_ONLY_HERE),
           "--results", str(tmp_path))
    run, records = records_of(tmp_path)
    status = {r["system"]: r["status"] for r in records if r["metric"] == "status"}
    assert status == {s: "succeeded" for s in OVER_SSH_ONLY_HERE}, status
    results = list(run.glob("*/*/*/result.json"))
    assert len(results) >= len(OVER_SSH_ONLY_HERE) * 3  # each mode's processes on three hosts
    for result in results:
        config = json.loads(result.read_text())["config"]
        assert config["address"].startswith(cluster.SUBNET + ".")
        assert config["interface"] == "eth0"
    # the cluster's SSH key reaches neither the results nor the logs fetched with them
    key = Path(netns["key"])
    secrets = [key.read_bytes().strip(), str(key).encode()]
    files = [f for f in run.rglob("*") if f.is_file()]
    assert files and not [str(f) for f in files if any(s in f.read_bytes() for s in secrets)]


# One core per emulated host: three hosts on a 2-core machine oversubscribe it, and a peer that
# is descheduled shows up as communication (waiting for it), which then floors LeNet's
# communication at 1gbit at 14-30 ms against 2.6 ms of wire time. That floor moves with the
# machine's load, so a ratio of the two links' times does too (mxnet-sync: 2.67 to 3.9 on the
# same code). What the link adds does not: the test asks that the 50 Mbit/s link add at least
# half the wire time of the bytes each node sent. Rounds alternate the two link settings so
# that the machine's drift does not fall on one of them. Compute is judged against that same
# added time, not as a ratio of its own: on shared cores a 7 ms forward+backward moved 31%
# (2.2 ms) between the links in one CI run, against ~50 ms that the slow link added to
# communication; compute that followed the link would move by about as much as communication.
VALIDATION_NODES = max(2, min(3, os.cpu_count() or 2))
VALIDATION_ROUNDS = 3


def test_communication_follows_bandwidth_compute_does_not(netns, tmp_path, capsys):
    records = []
    for round_ in range(VALIDATION_ROUNDS):
        results = tmp_path / ("round%d" % round_)
        invoke("bench", "--inventory", "netns", "--systems", "pytorch-sync,mxnet-sync",
               "--network", "1gbit,50mbit", "--nodes", str(VALIDATION_NODES),
               "--profile-steps", "0", "--results", str(results))  # timed steps only
        records += records_of(results)[1]
    mean = worker_means(records)
    lines = ["%-13s %-7s communication %.4f s/step, wire %.4f s/step, forward+backward %.4f s/step"
             % (s, link, mean[(s, link, "communication")], wire_seconds(mean, s, link),
                mean[(s, link, "compute")])
             for s in ("pytorch-sync", "mxnet-sync") for link in ("1gbit", "50mbit")]
    with capsys.disabled():
        print("\nemulated cluster, LeNet-5 smoke cells on %d hosts, mean of %d rounds:\n%s"
              % (VALIDATION_NODES, VALIDATION_ROUNDS, "\n".join(lines)))
    for system in ("pytorch-sync", "mxnet-sync"):
        slow, fast = (mean[(system, "50mbit", "communication")],
                      mean[(system, "1gbit", "communication")])
        added_wire = wire_seconds(mean, system, "50mbit") - wire_seconds(mean, system, "1gbit")
        assert added_wire > 0.01, (system, added_wire)  # LeNet-5 sends ~0.3 MB/step/node
        assert slow - fast >= 0.5 * added_wire, (system, slow, fast, added_wire)
        compute = [mean[(system, link, "compute")] for link in ("1gbit", "50mbit")]
        assert abs(compute[1] - compute[0]) <= 0.2 * (slow - fast), (system, compute, slow, fast)
    assert {r["link_mbit"] for r in records if r["metric"] == "status"} == {1000, 50}
    assert all(r["status"] == "succeeded" for r in records if r["metric"] == "status")


LINK_BITS_PER_S = {"1gbit": 1e9, "50mbit": 50e6}


def wire_seconds(mean, system, link):
    """The time the link needs to carry what a node sent per step."""
    return mean[(system, link, "sent")] * 8 / LINK_BITS_PER_S[link]


def worker_means(records):
    """(system, link, communication | compute | sent) -> mean over workers and rounds."""
    metrics = ("communication", "forward", "backward", "net_bytes_sent_per_step")
    values = {}
    for r in records:
        if r["role"] == "worker" and r["metric"] in metrics:
            key = (r["system"], r["link"], r["run_id"], r["cell_id"], r["rank"])
            values.setdefault(key, {})[r["metric"]] = r["value"]
    out = {}
    for (system, link, _, _, _), phases in values.items():
        out.setdefault((system, link, "communication"), []).append(phases["communication"])
        out.setdefault((system, link, "compute"), []).append(
            phases["forward"] + phases["backward"])
        out.setdefault((system, link, "sent"), []).append(phases["net_bytes_sent_per_step"])
    return {key: sum(v) / len(v) for key, v in out.items()}


def test_a_cut_link_fails_the_cell_and_leaves_no_process(netns, tmp_path, capsys, monkeypatch):
    """`ip link set ... down` on node 3's link while a cell trains, through the run's poll hook
    (faults.NodeFault): the harness notices within the bound, stops what it can reach, node
    3's roles stop themselves when their lease runs out (shortened to LEASE s); the hook puts
    the link back once the cell is stopped, and the next cell runs."""
    from harness import commands
    from harness.run import hooks
    for name, value in SHORT_LEASE.items():
        monkeypatch.setenv(name, value)
    run_id = "cut-link-%d" % time.time()  # the nodes keep earlier runs' folders
    cells = matrix.plan("smoke", 3, systems="pytorch-sync", steps=300, repeats=2,
                        order_seed=matrix.order_seed(run_id))
    veth = netns["hosts"][2]["veth"]

    def link(state):
        subprocess.run(["ip", "link", "set", veth, state], check=True)
        if state == "up":
            cluster.reshape(netns["rate_mbit"])
    cut = faults.NodeFault("node1", cells[0].id, lambda: link("down"), lambda: link("up"),
                           step=2)
    try:
        commands.bench_named("netns", "current", "smoke", str(tmp_path), run=run_id,
                             systems="pytorch-sync", steps=300, repeats=2,
                             hooks=[hooks.GivenCells(cells), cut])
    finally:
        link("up")  # whatever failed, the next test has node 3
    assert cut.injected_at and cut.repaired_at, "node 1 never trained, or the cell never ended"
    first = json.loads((tmp_path / run_id / cells[0].id / "status.json").read_text())
    assert first["status"] == "failed" and "node3" in first["reason"], first
    assert first["detected"] - cut.injected_at <= 10.0, (first["detected"] - cut.injected_at,
                                                         first["reason"])
    second = json.loads((tmp_path / run_id / cells[1].id / "status.json").read_text())
    assert faults.next_cell(first, second) == "succeeded", second
    all_nodes = nodes.connect_all(inventory.load("netns"))
    deadline = time.monotonic() + LEASE + 20
    while sum(len(p) for p in faults.strays(all_nodes, run_id).values()):
        assert time.monotonic() < deadline, faults.strays(all_nodes, run_id)
        time.sleep(1)
    with capsys.disabled():
        print("\ncut link: detected after %.1f s, cell stopped %.1f s later (%s)"
              % (first["detected"] - cut.injected_at, first["ended"] - first["detected"],
                 first["reason"]))


def test_the_mesh_check_names_a_blocked_port_and_a_wrong_interface_in_seconds(netns, tmp_path,
                                                                             capsys):
    """A firewall in node2's namespace drops TCP to its TensorFlow worker port; then an
    inventory naming an interface the hosts do not have. Each stops `bench` before any cell,
    naming the pair, the port or the interface, and the fix."""
    import registry
    node2 = netns["hosts"][1]
    port = 29500 + registry.ports()["tf_worker"]
    rule = ["INPUT", "-p", "tcp", "--dport", str(port), "-j", "DROP"]
    iptables = ["ip", "netns", "exec", node2["namespace"], "iptables"]
    subprocess.run(iptables + ["-I"] + rule, check=True)
    try:
        began = time.monotonic()
        out = invoke("bench", "--inventory", "netns", "--systems", "tensorflow-sync",
                     "--results", str(tmp_path), check=False)
        took = time.monotonic() - began
    finally:
        subprocess.run(iptables + ["-D"] + rule, check=True)
    said = out.stdout + out.stderr
    assert out.returncode == 2, said
    assert "node1 -> node2: %s:%d: no answer in 2 s: allow TCP between the nodes' cluster " \
        "addresses" % (node2["address"], port) in said, said
    assert not list(tmp_path.glob("*/manifest.json"))  # no cell, no run folder
    wrong = tmp_path / "wrong-interface.yml"
    wrong.write_text(Path(netns["inventory"]).read_text().replace(
        "cluster_interface: eth0", "cluster_interface: eth9"))
    out = invoke("bench", "--inventory", str(wrong), "--systems", "pytorch-sync",
                 "--results", str(tmp_path), check=False)
    said = out.stdout + out.stderr
    assert out.returncode == 2, said
    assert "node2: cluster_interface eth9 is not an interface here (there are " in said, said
    with capsys.disabled():
        print("\nmesh check: a blocked port named %.1f s after `invoke bench` began" % took)


def test_nodes_behind_a_bastion_with_hostile_workdirs_build_their_envs_from_a_wheelhouse(
        netns, tmp_path, capsys):
    """node1 as the bastion: the controller's own packets to node2 and node3 are refused
    (iptables OUTPUT here), so every SSH session to them goes through node1, Ansible's by
    ProxyCommand and the harness's by Fabric's gateway; every node's workdir has a space,
    quotes, $, ; and é in it; and the env root, fresh, has a space. The namespace hosts reach
    no registry: provision downloads MXNet's wheels here, pushes them, and the nodes' uv
    reads them alone (no index, no pip configuration of the node's). With one wheel taken out
    the build stops naming it; with the wheelhouse whole, an mxnet-sync cell (a scheduler,
    three servers, three workers) runs in the env it built, the liveness watch asking through
    the bastion too, and collect fetches it. One run for the three: each is a
    property of the same path (what is sent over SSH, and how), and a run of each cost a
    provisioning and a cell more. MXNet's wheels are 65 MB, PyTorch's 210 MB:
    what is proved is the same."""
    bastion, *behind = netns["hosts"]
    assert not reaches_a_registry(bastion)
    hostile = "/tmp/dlbench netns 'quote' \"dq\" $;x é"
    envs, wheels = tmp_path / "offline envs", tmp_path / "wheelhouse"
    inventory_file = tmp_path / "behind-a-bastion-offline.yml"
    inventory_file.write_text(yaml.safe_dump(
        behind_a_bastion(netns, hostile, envs), allow_unicode=True))
    provision = ["provision", "--inventory", str(inventory_file), "--frameworks", "mxnet",
                 "--wheelhouse", str(wheels)]
    wheelhouse.fill(stacks.load("current"), ["mxnet"], wheels)
    (folder,) = wheels.iterdir()
    (numpy,) = folder.glob("numpy-*.whl")
    with reached_through_the_bastion(behind):
        try:
            shutil.move(str(numpy), str(tmp_path))
            out = invoke(*provision, check=False)
            said = out.stdout + out.stderr
            assert out.returncode == 2 and \
                "numpy was not found in the provided package locations" in said, \
                said[-3000:]
            shutil.move(str(tmp_path / numpy.name), str(folder))
            began = time.monotonic()
            invoke(*provision)
            out = invoke("bench", "--inventory", str(inventory_file), "--systems", "mxnet-sync",
                         "--results", str(tmp_path / "results")).stdout
            assert "1 succeeded, 0 failed" in out, out
            run, records = records_of(tmp_path / "results", inventory_file)
            took = time.monotonic() - began
        finally:
            shutil.rmtree(hostile, ignore_errors=True)
    assert [(e.name, (e / ".dlbench-complete").is_file())
            for e in envs.glob("current-mxnet-*")] == [(folder.name, True)]
    check_the_mxnet_sync_run(run, records, behind)
    with capsys.disabled():
        print("\nbehind a bastion, hostile workdirs, envs from a wheelhouse: provision, an "
              "mxnet-sync cell and collect in %.0f s" % took)


def reaches_a_registry(host):
    """Whether a namespace host can open a connection to PyPI."""
    return subprocess.run(["ip", "netns", "exec", host["namespace"], "python3", "-c",
                           "import socket; socket.create_connection(('pypi.org', 443), 3)"],
                          capture_output=True).returncode == 0


@contextlib.contextmanager
def reached_through_the_bastion(behind):
    """The controller's own packets to the hosts behind the bastion are refused while in it."""
    with socket.socket() as probe:  # before: reachable
        probe.settimeout(2)
        probe.connect((behind[0]["address"], 22))
    rules = [["OUTPUT", "-d", h["address"], "-p", "tcp", "-m", "comment", "--comment",
              cluster.FIREWALL_TAG, "-j", "REJECT"] for h in behind]  # tagged: see the tag
    for rule in rules:
        subprocess.run(["iptables", "-I"] + rule, check=True)
    try:
        with pytest.raises(OSError):  # the controller cannot reach them itself
            socket.create_connection((behind[0]["address"], 22), 2).close()
        yield
    finally:
        for rule in rules:
            subprocess.run(["iptables", "-D"] + rule, check=True)


def check_the_mxnet_sync_run(run, records, behind):
    """One succeeded cell whose every role's result came back, from every host behind."""
    statuses = [json.loads(p.read_text()) for p in run.glob("*/status.json")]
    assert [s["status"] for s in statuses] == ["succeeded"]
    assert {r["node"] for r in records} >= {h["name"] for h in behind}
    fetched = sorted(p.parent.name for p in run.glob("*/*/*/result.json"))
    assert fetched == ["scheduler-0"] + ["server-%d" % i for i in range(3)] + \
        ["worker-%d" % i for i in range(3)]


def behind_a_bastion(netns, workdirs, env_root):
    """The cluster's inventory with node1 as every session's jump host, each node's workdir
    under `workdirs` and the env root `env_root`."""
    data = yaml.safe_load(Path(netns["inventory"]).read_text())
    data["all"]["vars"]["jump_host"] = "root@%s" % netns["hosts"][0]["address"]
    data["all"]["vars"]["env_root"] = str(env_root)
    for name, host in data["all"]["children"]["nodes"]["hosts"].items():
        host["workdir"] = "%s/%s" % (workdirs, name)
    return data


def test_down_removes_what_up_made(netns):
    invoke("cluster.down")
    assert "nothing to remove" in invoke("cluster.down").stdout
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert cluster.PREFIX not in namespaces
    links = subprocess.run(["ip", "-br", "link"], capture_output=True, text=True).stdout
    assert cluster.BRIDGE not in links and "dlb-h" not in links
    assert not cluster.INVENTORY.exists()
    assert not any(Path(c).exists() for h in netns["hosts"] for c in h["cgroups"])
    state = cluster.read_state() if invoke("cluster.up") else None
    # a state whose hosts are gone (a reboot, a killed sshd) is rebuilt, not trusted
    os.kill(state["hosts"][1]["sshd_pid"], 9)
    out = invoke("cluster.up").stdout
    assert "stale" in out and "emulated cluster up" in out
    assert invoke("cluster.status").stdout.count("sshd up") == len(state["hosts"])
    # the fixture's teardown takes it down again


def test_the_probe_finds_cgroup_quotas_that_add_up_to_more_than_the_machine(netns):
    """3 hosts with a quota of 1 CPU each on a 2-CPU machine: each host's facts show the whole
    machine, so nothing but a measurement tells that they share. The probe declines to call
    sharing on a host noisier than the loss, and this machine is a VM whose host moves its
    vCPUs (eight 1 s readings of one CPU alone: 293-415 chunks/s, nothing else running): there it
    must say it cannot rule sharing out, never "no sharing found" (node1 33% slower in every
    round, alone against itself +-32%, has been read in CI)."""
    from harness.run import contention
    from harness.nodes import stacks
    if netns["vcpus"] * len(netns["hosts"]) <= len(os.sched_getaffinity(0)):
        pytest.skip("the quotas fit this machine")
    nodes_ = nodes.connect_all(inventory.load("netns"))
    env = stacks.load("current").env("pytorch")
    pythons = {n.name: env.python(n.path(n.host.env_root)) for n in nodes_}
    found = contention.measure(nodes_, pythons, rounds=contention.ROUNDS)
    print("\nnetns: %s" % contention.describe(found))
    assert found["shared"] or found["undecided"], contention.describe(found)
    assert found["worst_loss"] > 0.2, contention.describe(found)
