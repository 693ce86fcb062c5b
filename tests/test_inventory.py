"""Inventory validation: every bad field is named with its host and a fix."""
import os
import textwrap

import pytest

from harness.nodes import inventory
from contract.errors import UserError

GOOD_HOST = """
          address: 127.0.0.1
          cluster_interface: lo
          vcpus: 2
          workdir: /tmp/dlbench-test/{name}
          base_port: {port}
          env_root: /tmp/dlbench-test/envs
"""


def write(tmp_path, hosts_yaml, connection="local"):
    text = textwrap.dedent("""\
        all:
          vars:
            ansible_connection: %s
          children:
            nodes:
              hosts:
        """) % connection + hosts_yaml
    path = tmp_path / "inv.yml"
    path.write_text(text)
    return path


def host(name, port, **changes):
    lines = GOOD_HOST.format(name=name, port=port)
    for key, value in changes.items():
        if value is None:
            lines = "\n".join(l for l in lines.splitlines() if not l.strip().startswith(key + ":"))
        else:
            lines = "\n".join(("          %s: %s" % (key, value)) if l.strip().startswith(key + ":")
                              else l for l in lines.splitlines())
    return "        %s:\n%s\n" % (name, lines.strip("\n"))


def error_for(tmp_path, hosts_yaml, **kwargs):
    with pytest.raises(UserError) as caught:
        inventory.load(write(tmp_path, hosts_yaml, **kwargs))
    return str(caught.value)


def test_shipped_local_inventories_are_valid():
    """local: as many nodes as can own a CPU (2 or 3); local-shared: always 3, never pinned."""
    cpus = len(os.sched_getaffinity(0))
    inv = inventory.load("local")
    expected = 3 if cpus >= 3 or cpus == 1 else 2
    assert [h.name for h in inv.hosts] == ["node1", "node2", "node3"][:expected]
    assert len({h.workdir for h in inv.hosts}) == expected
    assert all(h.connection == "local" for h in inv.hosts)
    assert inv.hosts[0].env_root == "~/.cache/dlbench/envs"  # from group_vars/all.yml
    assert all(h.cpus for h in inv.hosts) == (cpus >= 2)
    shared = inventory.load("local-shared")
    assert [h.name for h in shared.hosts] == ["node1", "node2", "node3"]
    assert not any(h.cpus for h in shared.hosts) and shared.dropped == []
    assert "sharing this machine's" in shared.layout()


def test_two_good_hosts_load_in_file_order(tmp_path):
    inv = inventory.load(write(tmp_path, host("b", 30000) + host("a", 30100)))
    assert [h.name for h in inv.hosts] == ["b", "a"]
    assert inv.hosts[1].base_port == 30100


@pytest.mark.parametrize("field,value,expect", [
    ("vcpus", "four", "host n1: field `vcpus` is 'four'"),
    ("vcpus", "0", "field `vcpus` is 0"),
    ("vcpus", None, "field `vcpus` is missing"),
    ("base_port", "80", "field `base_port` is 80, outside 1024-65000"),
    ("address", "'not an address!'", "field `address` is 'not an address!'"),
    ("cluster_interface", "'eth0; rm -rf /'", "field `cluster_interface`"),
    ("workdir", "relative/path", "field `workdir` is 'relative/path', not absolute"),
    ("workdir", "'/tmp/$HOME/w'", "Ansible expands $NAME and ${NAME} in paths"),
    ("env_root", "'/tmp/${X}/e'", "Ansible expands $NAME and ${NAME} in paths"),
])
def test_bad_field_is_named_with_host(tmp_path, field, value, expect):
    message = error_for(tmp_path, host("n1", 30000, **{field: value}))
    assert expect in message
    assert "fix:" in message


@pytest.mark.parametrize("name", ["'node1;touch /tmp/pwned'", "'n 1'", "'-n1'", "'nœud'",
                                  "'$(id)'"])
def test_a_host_name_that_ansible_or_a_shell_cannot_carry_is_refused_with_the_rule(tmp_path,
                                                                                   name):
    message = error_for(tmp_path, host("good", 30000) + host(name, 30100))
    assert "breaks the rule for node names: letters, digits" in message and "fix:" in message


def test_unknown_connection(tmp_path):
    message = error_for(tmp_path, host("n1", 30000), connection="telnet")
    assert "host n1: field `ansible_connection` is 'telnet'" in message


def test_ssh_host_needs_a_user(tmp_path):
    message = error_for(tmp_path, host("n1", 30000), connection="ssh")
    assert "host n1: field `ansible_user` is missing" in message


def test_overlapping_ports_on_one_address(tmp_path):
    message = error_for(tmp_path, host("n1", 30000) + host("n2", 30050))
    assert "host n2: field `base_port` 30050 overlaps n1's ports" in message


def test_shared_workdir(tmp_path):
    hosts = host("n1", 30000) + host("n2", 30100).replace("/n2", "/n1")
    assert "host n2: field `workdir` is also n1's" in error_for(tmp_path, hosts)


def test_not_yaml(tmp_path):
    path = tmp_path / "broken.yml"
    path.write_text("all: [unclosed\n")
    with pytest.raises(UserError, match="is not valid YAML"):
        inventory.load(path)


def test_no_hosts(tmp_path):
    path = tmp_path / "empty.yml"
    path.write_text("all:\n  vars: {}\n")
    with pytest.raises(UserError, match="no hosts"):
        inventory.load(path)


def test_unknown_inventory_name_lists_known_ones():
    with pytest.raises(UserError) as caught:
        inventory.load("no-such-cluster")
    assert "local" in str(caught.value)


def test_a_public_address_is_warned_about(tmp_path):
    hosts = host("n1", 29500, address="8.8.8.8") + host("n2", 29600, address="10.0.0.12")
    warnings = inventory.load(write(tmp_path, hosts)).warnings()
    assert len(warnings) == 1 and warnings[0].startswith("n1: address 8.8.8.8 is public")


def test_the_example_cluster_inventory_is_valid_as_shipped():
    """docs/reproducing.md tells users to copy it: it must pass the same validation."""
    inv = inventory.load("cluster.example")
    assert [h.connection for h in inv.hosts] == ["ssh"] * 3
    assert [h.address for h in inv.hosts] == ["10.0.0.11", "10.0.0.12", "10.0.0.13"]
    assert all(h.known_hosts and h.vcpus == 4 for h in inv.hosts)
    assert inv.warnings() == []


def local_hosts(n=3, **extra):
    return [("node%d" % i, dict({"ansible_connection": "local", "vcpus": "auto", "cpus": "auto"},
                                **extra)) for i in range(1, n + 1)]


@pytest.mark.parametrize("cpus, kept, vcpus, pinned", [
    (16, 3, 4, ["0,1,2,3", "4,5,6,7", "8,9,10,11"]),   # the paper's layout
    (3, 3, 1, ["0", "1", "2"]),                       # 3 nodes as soon as each can own a CPU
    (2, 2, 1, ["0", "1"]),                            # this machine: 2 nodes of their own
    (1, 3, 1, ["", "", ""]),                          # no node can own a CPU: all kept, shared
])
def test_node_count_auto_keeps_the_nodes_that_can_own_a_cpu(cpus, kept, vcpus, pinned):
    sized = dict(inventory.size_local(local_hosts(node_count="auto"), list(range(cpus))))
    assert list(sized) == ["node1", "node2", "node3"][:kept]
    assert [v["vcpus"] for v in sized.values()] == [vcpus] * kept
    assert [v["cpus"] for v in sized.values()] == pinned


def test_the_layout_is_said_with_the_nodes_left_out(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    inv = inventory.load("local")
    assert inv.dropped == ["node3"]
    assert inv.layout() == ("2 local node(s) x 1 thread(s), each on CPUs of its own (0 | 1); "
                            "node3 left out so that every node owns a CPU (inventory "
                            "`node_count: auto`)")


@pytest.mark.parametrize("cpus, vcpus, pinned", [
    (16, 4, ["0,1,2,3", "4,5,6,7", "8,9,10,11"]),   # the paper's 3 x 4, CPUs of their own
    (8, 2, ["0,1", "2,3", "4,5"]),                  # fewer than 4 each, still their own
    (2, 1, ["", "", ""]),                           # this machine: 3 nodes share 2 CPUs
])
def test_local_nodes_are_sized_from_the_machine(cpus, vcpus, pinned):
    sized = dict(inventory.size_local(local_hosts(), list(range(cpus))))
    assert [v["vcpus"] for v in sized.values()] == [vcpus] * 3
    assert [v["cpus"] for v in sized.values()] == pinned


def test_auto_sizing_leaves_ssh_hosts_and_explicit_values_alone(tmp_path):
    hosts = local_hosts(2) + [("far", {"ansible_connection": "ssh", "vcpus": 4})]
    hosts[0][1]["vcpus"] = 3
    sized = dict(inventory.size_local(hosts, list(range(16))))
    assert sized["node1"]["vcpus"] == 3 and sized["node1"]["cpus"] == "0,1,2"
    assert sized["node2"]["vcpus"] == 4 and sized["far"] == {"ansible_connection": "ssh",
                                                               "vcpus": 4}
    assert "`cpus` is 'x-'" in error_for(tmp_path, host("a", 30000) + "          cpus: x-\n")
    (tmp_path / "b").mkdir()
    ssh = host("a", 30000, vcpus="auto") + "          ansible_user: u\n"
    assert "`vcpus` is 'auto'" in error_for(tmp_path / "b", ssh, connection="ssh")


def test_host_in_a_workdir_is_the_nodes_name_in_every_inventory(tmp_path):
    """A shared home (NFS) gives every host the same ~/dlbench: `{host}` makes each node's
    workdir its own, in any inventory, not only Slurm's."""
    path = tmp_path / "cluster.yml"
    path.write_text(
        "all:\n  vars:\n    ansible_connection: ssh\n    ansible_user: bench\n"
        "    vcpus: 4\n    base_port: 29500\n    workdir: ~/dlbench/{host}\n"
        "    env_root: ~/.cache/dlbench/envs\n    cluster_interface: eth1\n"
        "  children:\n    nodes:\n      hosts:\n"
        "        node1: {address: 10.0.0.11}\n        node2: {address: 10.0.0.12}\n")
    hosts = inventory.load(str(path)).hosts
    assert [h.workdir for h in hosts] == ["~/dlbench/node1", "~/dlbench/node2"]
    assert {h.env_root for h in hosts} == {"~/.cache/dlbench/envs"}  # shared on purpose


def test_the_mesh_check_names_an_unreachable_port_and_a_wrong_interface():
    """The script each node runs (harness/run/mesh.py), run here: a port where nothing listens
    is named with its peer; an interface that does not exist is named with the ones that do;
    and the controller turns each into a line naming the pair, the port and the fix."""
    import json
    import socket
    import subprocess
    import sys
    import time
    from types import SimpleNamespace
    from harness.run import mesh
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    closed = free.getsockname()[1]
    free.close()
    args = ["127.0.0.1", "lo", [], [["node2", "127.0.0.1", closed]], 1, 0.5, 1.0]
    out = json.loads(subprocess.run([sys.executable, "-c", mesh.SCRIPT, json.dumps(args)],
                                    capture_output=True, text=True, check=True).stdout)
    assert out["iface"] is None and out["bind"] == []
    assert out["connect"] == [["node2", "127.0.0.1", closed, "Connection refused"]]
    wrong = json.loads(subprocess.run([sys.executable, "-c", mesh.SCRIPT, json.dumps(
        ["127.0.0.1", "eth9", [], [], 1, 0.5, 1.0])], capture_output=True, text=True,
        check=True).stdout)
    assert wrong["iface"].startswith("eth9 is not an interface here (there are lo")
    # two nodes whose checks start a second apart (a Slurm job step, an SSH session): the
    # early one's refusals are retried until the late one listens; both wait for the other
    ports = []
    for _ in range(2):
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        ports.append(sock.getsockname()[1])
        sock.close()
    checks = []
    for me, peer in ((0, 1), (1, 0)):
        args = ["127.0.0.1", "lo", [ports[me]], [["node%d" % (peer + 1), "127.0.0.1",
                                                   ports[peer]]], 1, 6.0, 2.0]
        checks.append(subprocess.Popen([sys.executable, "-c", mesh.SCRIPT, json.dumps(args)],
                                       stdout=subprocess.PIPE, text=True))
        time.sleep(1.0)
    for check in checks:
        assert json.loads(check.communicate(timeout=20)[0]) == {
            "iface": None, "bind": [], "connect": []}
    node = SimpleNamespace(name="node1", host=SimpleNamespace(address="10.0.0.11"))
    said = mesh._problems(node, dict(wrong, connect=[["node2", "10.0.0.12", 29510,
                                                     "no answer in 2 s"]]))
    assert said[0].startswith("node1: cluster_interface eth9 is not an interface here")
    assert said[1] == ("node1 -> node2: 10.0.0.12:29510: no answer in 2 s: " + mesh.FIREWALL_FIX)


def test_a_bastion_is_parsed_and_becomes_ansibles_proxy_command(tmp_path):
    """`jump_host: [user@]host[:port]`: Fabric connects through it (gateway), and Ansible gets
    a ProxyCommand with the bastion's key checked against the same known_hosts."""
    import shlex
    from harness.nodes import provision
    path = tmp_path / "cluster.yml"
    path.write_text(
        "all:\n  vars:\n    ansible_connection: ssh\n    ansible_user: bench\n"
        "    ansible_ssh_private_key_file: /keys/id\n    known_hosts: /keys/known\n"
        "    vcpus: 4\n    base_port: 29500\n    workdir: ~/dlbench/{host}\n"
        "    env_root: ~/envs\n    cluster_interface: eth1\n    jump_host: gate.example:2222\n"
        "  children:\n    nodes:\n      hosts:\n        node1: {address: 10.0.0.11}\n"
        "        node2: {address: 10.0.0.12, jump_host: ops@10.0.0.1}\n")
    inv = inventory.load(str(path))
    assert [h.jump for h in inv.hosts] == [("bench", "gate.example", 2222),
                                           ("ops", "10.0.0.1", 22)]
    extra = shlex.split(provision.proxy_command(inv.hosts[0]))
    assert extra == ["-o", "ProxyCommand=ssh -o BatchMode=yes -o StrictHostKeyChecking=yes "
                     "-p 2222 -o UserKnownHostsFile=/keys/known -i /keys/id -W %h:%p "
                     "bench@gate.example"]
    written = provision.ansible_inventory(inv)
    import json
    hosts = json.loads(written.read_text())["all"]["children"]["nodes"]["hosts"]
    assert hosts["node2"]["ansible_ssh_extra_args"].endswith("ops@10.0.0.1'")
    # its own control sockets: a direct session's master (ControlPersist) once carried the
    # commands meant for the bastion, and hung when the direct route was cut
    assert hosts["node2"]["ansible_control_path_dir"] == "~/.ansible/cp-through-10.0.0.1"
    path.write_text(path.read_text().replace("gate.example:2222", "not a host!"))
    with pytest.raises(UserError, match="field `jump_host` is 'not a host!', not"):
        inventory.load(str(path))


def test_collect_takes_the_run_s_inventory_and_refuses_one_without_its_nodes(tmp_path):
    """A run made with --inventory local-shared, collected with no --inventory: the file it
    recorded, or this checkout's inventory/ file of that name where the run was made in
    another checkout (a file elsewhere that is gone is not guessed at); given one that lacks
    node3, a UserError naming node3 and the inventory to give, before any node is reached."""
    shared = inventory.INVENTORIES / "local-shared.yml"
    elsewhere = tmp_path / "old-checkout" / "inventory" / "local-shared.yml"
    assert inventory.recorded({"inventory": {"path": str(elsewhere)}}) == str(shared)
    assert inventory.recorded({"inventory": {"path": str(tmp_path / "local-shared.yml")}}) \
        is None
    assert inventory.recorded({"inventory": {"name": "local-shared"}}) is None
    local = inventory.Inventory(name="local", path=None, hosts=[
        type("H", (), {"name": n})() for n in ("node1", "node2")])
    statuses = [{"processes": [{"node": "node1"}, {"node": "node3"}]}]
    made = {"inventory": {"name": "local-shared"}}
    with pytest.raises(UserError) as refused:
        inventory.check_has_run_nodes(local, statuses, "r1", made)
    assert "ran processes on node3, which inventory local (node1, node2)" in refused.value.cause
    assert "--inventory local-shared" in refused.value.fix
    # the same inventory with other nodes now (a new Slurm allocation): not "give local"
    with pytest.raises(UserError) as changed:
        inventory.check_has_run_nodes(local, statuses, "r1", {"inventory": {"name": "local"}})
    assert "its nodes have changed since the run" in changed.value.cause
    inventory.check_has_run_nodes(local, statuses[:0], "r1", made)  # nothing ran: none lacks
