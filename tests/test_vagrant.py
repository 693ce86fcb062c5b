"""The logic around `vagrant` (harness/clusters/vagrant.py): parsing its output, which machines
are brought up, the inventory written from it. `vagrant` is replaced here by recorded output;
the VMs themselves are booted for real in tests/test_vms.py."""
import json
import os
import re
import time

import pytest

from harness.nodes import inventory
from harness.clusters import vagrant
from contract.errors import UserError
from harness.paths import REPO

SSH_CONFIG = """Host node1
  HostName 127.0.0.1
  User vagrant
  Port 2222
  UserKnownHostsFile /dev/null
  StrictHostKeyChecking no
  PasswordAuthentication no
  IdentityFile /home/u/dlbench/.vagrant/machines/node1/virtualbox/private_key
  IdentitiesOnly yes
  LogLevel FATAL

Host node2
  HostName 127.0.0.1
  User vagrant
  Port 2200
  IdentityFile "/home/u/my dir/.vagrant/machines/node2/virtualbox/private_key"

Host node3
  HostName 192.168.121.47
  User vagrant
  Port 22
  IdentityFile /home/u/dlbench/.vagrant/machines/node3/libvirt/private_key
"""

STATUS = """1700000000,node1,metadata,provider,virtualbox
1700000000,node1,state,running
1700000000,node2,state,poweroff
1700000000,node3,state,not_created
1700000000,,ui,info,Current machine states:
"""


def node_output(name, address, interface="eth1"):
    return ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI%s root@%s\n"
            "3: %s    inet %s/24 brd 192.168.56.255 scope global %s\\       valid_lft forever\n"
            % (name.upper(), name, interface, address, interface))


class FakeVagrant:
    """Replays recorded `vagrant` output and remembers the calls."""

    def __init__(self, status=STATUS, ssh_config=SSH_CONFIG, interface="eth1"):
        self.calls, self.status, self.ssh_config, self.interface = [], status, ssh_config, interface

    def __call__(self, args, stream=False):
        self.calls.append(args)
        if args[0] == "status":
            return self.status
        if args[0] == "ssh-config":
            return self.ssh_config
        if args[0] == "ssh":
            address = re.search(r"addr show to (\S+)", args[-1]).group(1)
            return node_output(args[1], address, self.interface)
        return ""


@pytest.fixture
def written(tmp_path, monkeypatch):
    monkeypatch.setattr(vagrant, "INVENTORY", tmp_path / "vagrant.yml")
    monkeypatch.setattr(vagrant, "STATE", tmp_path / "state")
    for name in vagrant.DEFAULTS:
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def test_ssh_config_parsing_keeps_ports_users_and_quoted_key_paths():
    hosts = vagrant.parse_ssh_config(SSH_CONFIG)
    assert hosts["node1"] == {"ssh_host": "127.0.0.1", "ssh_port": 2222, "user": "vagrant",
                              "key": "/home/u/dlbench/.vagrant/machines/node1/virtualbox/"
                                     "private_key"}
    assert hosts["node2"]["key"] == "/home/u/my dir/.vagrant/machines/node2/virtualbox/private_key"
    assert hosts["node3"]["ssh_host"] == "192.168.121.47" and hosts["node3"]["ssh_port"] == 22


def test_only_the_machines_not_running_are_brought_up(written):
    fake = FakeVagrant()
    vagrant.prepare(run=fake, echo=lambda *a: None)
    assert ["up", "node2", "node3"] in fake.calls
    assert not any(c[0] == "up" and "node1" in c for c in fake.calls)
    running = STATUS.replace("poweroff", "running").replace("not_created", "running")
    fake = FakeVagrant(status=running)
    vagrant.prepare(run=fake, echo=lambda *a: None)
    assert not any(c[0] == "up" for c in fake.calls)


def test_the_written_inventory_passes_validation_with_pinned_host_keys(written):
    path = vagrant.prepare(run=FakeVagrant(interface="enp0s8"), echo=lambda *a: None)
    inv = inventory.load(path)
    assert [h.name for h in inv.hosts] == ["node1", "node2", "node3"]
    node1, node3 = inv.host("node1"), inv.host("node3")
    assert (node1.address, node1.ssh_host, node1.ssh_port) == ("192.168.56.11", "127.0.0.1", 2222)
    assert node3.address == "192.168.56.13" and node3.ssh_host == "192.168.121.47"
    assert node1.cluster_interface == "enp0s8" and node1.vcpus == 4 and node1.user == "vagrant"
    assert node1.vars["python_source"] == "conda"
    known = (written / "state" / "known_hosts").read_text().splitlines()
    assert known[0].startswith("[127.0.0.1]:2222 ssh-ed25519 ")
    assert known[2].startswith("192.168.121.47 ssh-ed25519 ")  # port 22: the bare host
    assert "StrictHostKeyChecking=yes" in node1.vars["ansible_ssh_common_args"]


def test_settings_follow_the_environment(written, monkeypatch):
    monkeypatch.setenv("DLBENCH_VM_SUBNET", "10.9.8")
    monkeypatch.setenv("DLBENCH_VM_CPUS", "2")
    inv = inventory.load(vagrant.prepare(run=FakeVagrant(), echo=lambda *a: None))
    assert inv.host("node2").address == "10.9.8.12" and inv.host("node2").vcpus == 2


def test_a_vm_without_the_private_address_is_named_with_the_fix(written):
    class WrongNetwork(FakeVagrant):
        def __call__(self, args, stream=False):
            out = super().__call__(args, stream)
            return out.replace("inet 192.168.56.12/", "inet 10.0.2.15/")
    with pytest.raises(UserError, match="node2: .*no interface with 192.168.56.12") as info:
        vagrant.prepare(run=WrongNetwork(), echo=lambda *a: None)
    assert "vagrant reload node2" in info.value.fix


def test_a_machine_missing_from_ssh_config_is_named(written):
    partial = SSH_CONFIG.split("Host node3")[0]
    with pytest.raises(UserError, match="nothing for node3"):
        vagrant.prepare(run=FakeVagrant(ssh_config=partial), echo=lambda *a: None)


def test_vagrantfile_defaults_are_the_harness_defaults():
    """The Vagrantfile and harness/clusters/vagrant.py read the same variables with the same defaults:
    otherwise the inventory would name addresses the VMs do not have."""
    text = (REPO / "Vagrantfile").read_text()
    found = dict(re.findall(r'ENV\.fetch\("(DLBENCH_VM_\w+)", "([^"]*)"\)', text))
    assert found == vagrant.DEFAULTS
    assert '"#{SUBNET}.#{10 + i}"' in text and vagrant.node_address(1, "S") == "S.11"


def test_vagrant_inventory_before_provisioning_says_what_to_run(monkeypatch, tmp_path):
    monkeypatch.setattr(inventory, "INVENTORIES", tmp_path)
    with pytest.raises(UserError) as info:
        inventory.load("vagrant")
    assert "invoke provision --inventory vagrant" in info.value.fix


# --- bad input before anything starts (harness/clusters/libvirt.py, vmbox.py) ---------------

def test_no_libvirt_or_qemu_is_a_clear_error_with_the_packages_to_install(monkeypatch):
    from harness.clusters import libvirt
    monkeypatch.setattr(libvirt.shutil, "which",
                        lambda tool: None if tool == "qemu-system-x86_64" else "/usr/bin/" + tool)
    with pytest.raises(UserError, match="missing: qemu-system-x86_64") as info:
        libvirt.require_installed()
    assert "qemu-system-x86" in info.value.fix and "libvirt-daemon-system" in info.value.fix


def test_building_the_box_without_root_or_debootstrap_says_what_to_do(monkeypatch):
    from harness.clusters import vmbox
    monkeypatch.setattr(vmbox.os, "geteuid", lambda: 1000)
    with pytest.raises(UserError, match="needs root") as info:
        vmbox.require_tools()
    assert "DLBENCH_VM_BOX=generic/ubuntu2204" in info.value.fix
    monkeypatch.setattr(vmbox.os, "geteuid", lambda: 0)
    monkeypatch.setattr(vmbox.shutil, "which", lambda tool: None if tool == "debootstrap"
                        else "/usr/bin/" + tool)
    with pytest.raises(UserError, match="needs debootstrap") as info:
        vmbox.require_tools()
    assert "apt-get install debootstrap" in info.value.fix


def test_starting_libvirt_without_root_is_refused_before_anything_starts(monkeypatch):
    from harness.clusters import libvirt
    monkeypatch.setattr(libvirt.os, "geteuid", lambda: 1000)
    with pytest.raises(UserError, match="starting it needs root"):
        libvirt.start_daemons({}, print)


def test_the_accelerator_is_tcg_where_kvm_cannot_be_opened(monkeypatch, tmp_path):
    from harness.clusters import libvirt
    monkeypatch.setattr(libvirt.os, "access", lambda path, mode: False)
    assert libvirt.accelerator(tmp_path / "vmlinuz") == \
        ("qemu", "/dev/kvm is missing or not usable by this user")


def test_the_box_recipe_hash_follows_the_recipe(monkeypatch):
    """The hash follows the recipe, whether or not Vagrant (whose insecure key the box holds)
    is installed: a bare machine runs this too."""
    from harness.clusters import vmbox
    monkeypatch.setattr(vmbox, "insecure_key", lambda: "ssh-rsa AAAA vagrant insecure public key")
    first = vmbox.recipe_hash()
    monkeypatch.setitem(vmbox.RECIPE, "packages", vmbox.RECIPE["packages"] + ["htop"])
    assert vmbox.recipe_hash() != first and vmbox.box_name().endswith(vmbox.recipe_hash())


def test_envs_built_into_the_box_are_the_stacks_and_make_another_box(monkeypatch):
    """DLBENCH_VM_BOX_ENVS names envs as provisioning names them (their folder carries the
    hash of their pins, so that provisioning finds them complete), they join the box's hash,
    and a stack on another Python than the box's is refused before anything is built."""
    from harness.clusters import vmbox
    from harness.nodes import stacks
    monkeypatch.setattr(vmbox, "insecure_key", lambda: "ssh-rsa AAAA vagrant insecure public key")
    monkeypatch.setenv("DLBENCH_VM_BOX_ENVS", "paper-py39:mxnet")
    (env,) = stacks.box_envs()
    stack = stacks.load("paper-py39")
    assert (env["dirname"], env["packages"]) == (stack.env("mxnet").dirname,
                                                 stack.env("mxnet").packages)
    assert (env["python"], env["seed"]) == ("3.9", ["pip==23.0.1", "setuptools==58.1.0"])
    assert len(stacks.box_envs("paper-py39")) == len(stack.envs) and stacks.box_envs("") == []
    plain = vmbox.recipe_hash()
    assert vmbox.recipe_hash(()) == plain != vmbox.recipe_hash([env])
    assert vmbox.box_name([env]).endswith(vmbox.recipe_hash([env]))
    with pytest.raises(UserError, match="stack current is on another Python"):
        vmbox.check_envs(stacks.box_envs("current:pytorch"))
    with pytest.raises(UserError, match="has no environment for caffe"):
        stacks.box_envs("paper-py39:caffe")


def test_envs_for_the_box_with_another_box_named_are_an_error_not_ignored(monkeypatch, tmp_path):
    monkeypatch.setattr(vagrant, "STATE", tmp_path)
    monkeypatch.setattr(os, "environ", dict(os.environ, DLBENCH_VM_BOX="generic/ubuntu2204"))
    monkeypatch.setattr(vagrant, "provider", lambda: "libvirt")
    with pytest.raises(UserError, match="but the VMs use generic/ubuntu2204"):
        vagrant.machine_setup(progress=lambda *a: None, box_envs=[{"dirname": "x"}])
    monkeypatch.setattr(vagrant, "provider", lambda: "virtualbox")
    with pytest.raises(UserError, match="but the VMs use virtualbox"):
        vagrant.machine_setup(progress=lambda *a: None, box_envs=[{"dirname": "x"}])


def test_console_tails_show_why_a_vm_did_not_boot(monkeypatch, tmp_path):
    (tmp_path / "node2.log").write_text("Booting\n" + "".join("line %d\n" % i for i in range(30))
                                        + "Kernel panic - not syncing: VFS: Unable to mount "
                                          "root fs\n")
    monkeypatch.setenv("DLBENCH_VM_CONSOLE", str(tmp_path))
    text = vagrant.console_tails(["node1", "node2"])
    assert "node2's console" in text and "Unable to mount root fs" in text
    assert "node1" not in text and "line 10\n" not in text  # the last 15 lines only


def test_down_destroys_only_where_vagrant_created_machines(monkeypatch, tmp_path):
    # CI's cleanup ran `vagrant destroy` with no VM and no libvirtd, and failed on the socket
    from harness.clusters import libvirt
    monkeypatch.setattr(vagrant, "REPO", tmp_path)
    monkeypatch.setattr(vagrant, "INVENTORY", tmp_path / "vagrant.yml")
    monkeypatch.setattr(vagrant, "STATE", tmp_path / "state")
    monkeypatch.setattr(libvirt, "read_state", lambda: None)
    for name in ("DLBENCH_VM_BOX", "VAGRANT_DEFAULT_PROVIDER", "DLBENCH_VM_NODES"):  # down()
        # sets them for vagrant:
        monkeypatch.delenv(name, raising=False)  # they must not reach the later VM tests
    calls, said = [], []
    run = lambda args, stream=False: calls.append(args)
    (tmp_path / ".vagrant" / "machines" / "node1" / "libvirt").mkdir(parents=True)
    vagrant.down(run=run, echo=said.append)
    assert calls == [] and said == ["no VMs are up: nothing to destroy"]
    (tmp_path / ".vagrant" / "machines" / "node1" / "libvirt" / "id").write_text("uuid")
    monkeypatch.setattr(vagrant.shutil, "which", lambda tool: "/usr/bin/" + tool)
    vagrant.down(run=run, echo=said.append)
    assert calls == [["destroy", "-f"]] and vagrant.created_machines() == ["node1"]


def test_down_destroys_the_vms_of_an_earlier_larger_cluster(monkeypatch, tmp_path):
    """Three VMs created, then DLBENCH_VM_NODES=2 (the test suite's size): `vagrant destroy`
    must still see node3, or it is left running beside a stopped libvirt."""
    from harness.clusters import libvirt
    monkeypatch.setattr(vagrant, "REPO", tmp_path)
    monkeypatch.setattr(vagrant, "INVENTORY", tmp_path / "vagrant.yml")
    monkeypatch.setattr(vagrant, "STATE", tmp_path / "state")
    monkeypatch.setattr(libvirt, "read_state", lambda: None)
    monkeypatch.setattr(vagrant.shutil, "which", lambda tool: "/usr/bin/" + tool)
    for name in ("DLBENCH_VM_BOX", "VAGRANT_DEFAULT_PROVIDER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DLBENCH_VM_NODES", "2")
    for name in ("node1", "node2", "node3"):
        folder = tmp_path / ".vagrant" / "machines" / name / "libvirt"
        folder.mkdir(parents=True)
        (folder / "id").write_text("uuid-" + name)
    seen = []
    vagrant.down(run=lambda args, stream=False: seen.append(os.environ["DLBENCH_VM_NODES"]),
                 echo=print)
    assert seen == ["3"]
    monkeypatch.setenv("DLBENCH_VM_NODES", "2")
    assert vagrant.nodes_to_destroy(["node1"]) == 2  # never fewer than asked for


def test_only_a_probed_accelerator_is_reused(monkeypatch, tmp_path):
    # a record written for a user's own box ("kvm, no kernel to probe") once made the next
    # `vagrant up` of the package's box take KVM, where KVM guests cannot run
    monkeypatch.setattr(vagrant, "STATE", tmp_path)
    record = {"provider": "libvirt", "box": "b1", "accelerator": "kvm",
              "why": "box b1 (no kernel to probe)"}
    (tmp_path / "vm.json").write_text(json.dumps(record))
    assert vagrant.known_accelerator("b1") is None
    (tmp_path / "vm.json").write_text(json.dumps(dict(record, accelerator="qemu",
                                                      why="KVM failed", probed=True)))
    assert vagrant.known_accelerator("b1") == ("qemu", "KVM failed")
    assert vagrant.known_accelerator("b2") is None


def test_a_second_setup_in_one_process_keeps_the_probed_accelerator(monkeypatch, tmp_path):
    """vm-bench sets the machine up, then prepares the inventory, which sets it up again: the
    second call took the variables the first had exported for the Vagrantfile for the user's
    own, and recorded "qemu (DLBENCH_VM_DRIVER)" instead of why KVM was given up."""
    monkeypatch.setattr(vagrant, "STATE", tmp_path)
    monkeypatch.setattr(vagrant, "_SET_HERE", {})
    # machine_setup exports to the environment: a copy, or the VM test would inherit box-x
    monkeypatch.setattr(os, "environ", {k: v for k, v in os.environ.items()
                                        if k not in vagrant.DEFAULTS})
    monkeypatch.setattr(vagrant, "provider", lambda: "libvirt")
    monkeypatch.setattr(vagrant.libvirt, "ensure", lambda progress: None)
    monkeypatch.setattr(vagrant.libvirt, "FILES", tmp_path)
    monkeypatch.setattr(vagrant.vmbox, "ensure", lambda progress, envs: ("box-x", tmp_path))
    monkeypatch.setattr(vagrant.libvirt, "readable_copies", lambda files: files)
    probes = []
    monkeypatch.setattr(vagrant.libvirt, "accelerator",
                        lambda kernel: probes.append(kernel) or ("qemu", "KVM failed: MSR"))
    first = vagrant.machine_setup(progress=lambda *a: None)
    second = vagrant.machine_setup(progress=lambda *a: None)
    assert first == second == {"provider": "libvirt", "box": "box-x", "accelerator": "qemu",
                               "why": "KVM failed: MSR", "probed": True}
    assert len(probes) == 1 and vagrant.vm_record() == first  # the second reused the probe
    monkeypatch.setenv("DLBENCH_VM_DRIVER", "kvm")  # the user's own choice still wins
    assert vagrant.machine_setup(progress=lambda *a: None)["why"] == "DLBENCH_VM_DRIVER"


def test_a_daemon_pid_recorded_before_a_reboot_is_not_stopped(monkeypatch, tmp_path):
    """CI's machine kept the record of an interrupted run (its cache survives): the libvirtd
    pid in it now names another program, which `vagrant.down` must leave alone."""
    import subprocess
    from harness.clusters import libvirt
    other = subprocess.Popen(["sleep", "60"])
    try:
        monkeypatch.setattr(libvirt, "state_path", lambda: tmp_path / "state.json")
        monkeypatch.setattr(libvirt, "responding", lambda: False)
        monkeypatch.setattr(libvirt, "remove_firewall_chains", lambda: None)
        libvirt.write_state({"started": {"libvirtd": other.pid}, "ip_forward": None})
        deadline = time.monotonic() + 10  # the child runs Python's code until it execs sleep
        while not libvirt.is_daemon(other.pid, "sleep") and time.monotonic() < deadline:
            time.sleep(0.01)
        assert libvirt.is_daemon(other.pid, "sleep") and not libvirt.is_daemon(other.pid,
                                                                                  "libvirtd")
        assert libvirt.down(progress=lambda line: None) == []
        assert other.poll() is None  # still running
    finally:
        other.kill()
        other.wait()


# a node's console line as CI's node2 wrote it: colour codes and all
GAVE_UP_LINE = "\x1b[K[\x1b[0;1;31mFAILED\x1b[0m] Failed to start \x1b[0;1;39mRaise network " \
               "interfaces\x1b[0m.\n"


def test_a_vm_whose_dhcp_client_gave_up_is_restarted_once(tmp_path):
    from harness.clusters import vmwatch
    old = tmp_path / "node1.log"
    old.write_text(GAVE_UP_LINE)  # an earlier VM's console: not this boot's
    os.utime(old, (1000.0, 1000.0))
    (tmp_path / "node2.log").write_text("Starting Raise network interfaces...\n")
    (tmp_path / "node3.log").write_text("[  OK  ] Finished Raise network interfaces.\n")
    restarted, said = [], []
    watch = vmwatch.DhcpWatch(["node1", "node2", "node3"], str(tmp_path), restarted.append,
                              said.append, clock=lambda: 2000.0)
    watch.check()
    assert restarted == [] and said == []
    with open(str(tmp_path / "node2.log"), "a") as log:
        log.write(GAVE_UP_LINE)
    watch.check()
    watch.check()
    assert restarted == ["node2"] and len(said) == 1
    assert said[0].startswith("node2: its DHCP client gave up with no address")


def test_a_console_stamped_a_tick_before_the_watch_began_is_read(tmp_path):
    """The kernel's coarse clock may stamp a write a few ms before time.time() said."""
    from harness.clusters import vmwatch
    log = tmp_path / "node3.log"
    log.write_text(GAVE_UP_LINE)
    os.utime(str(log), (2000.0, 2000.0))
    restarted = []
    watch = vmwatch.DhcpWatch(["node3"], str(tmp_path), restarted.append, lambda _: None,
                              clock=lambda: 2000.004)
    watch.check()
    assert restarted == ["node3"]


def test_a_restart_that_fails_is_said_and_leaves_vagrant_to_fail(tmp_path):
    from harness.clusters import vmwatch
    (tmp_path / "node2.log").write_text(GAVE_UP_LINE)
    said = []

    def restart(name):
        raise UserError("`virsh start 1234` failed: no domain with matching uuid", "")
    watch = vmwatch.DhcpWatch(["node2"], str(tmp_path), restart, said.append, clock=lambda: 0.0)
    watch.check()
    assert said[-1] == "node2: the restart failed: `virsh start 1234` failed: no domain with " \
        "matching uuid"


def test_the_console_tail_names_what_failed_to_start(monkeypatch, tmp_path):
    (tmp_path / "node2.log").write_text("Booting\n" + GAVE_UP_LINE + "dlbench login: \n")
    monkeypatch.setenv("DLBENCH_VM_CONSOLE", str(tmp_path))
    text = vagrant.console_tails(["node2"])
    assert "; failed to start: Raise network interfaces, last 3 lines:" in text
    assert "[FAILED] Failed to start Raise network interfaces." in text  # without colour codes


def test_vagrant_up_runs_with_the_watch_beside_it(monkeypatch, tmp_path):
    """The watch's thread reads the consoles while `vagrant up` runs and is stopped after it;
    a newer systemd's wording ("networking.service - Raise ...") is read as the same failure."""
    from harness.clusters import vmwatch
    monkeypatch.setattr(vmwatch, "POLL_SECONDS", 0.01)
    monkeypatch.setenv("DLBENCH_VM_CONSOLE", str(tmp_path))
    restarted, said = [], []
    monkeypatch.setattr(vagrant, "restart_vm", restarted.append)

    def up(args, stream=False):
        (tmp_path / "node3.log").write_text("[FAILED] Failed to start networking.service - "
                                            "Raise network interfaces.\n")
        deadline = time.monotonic() + 10
        while not restarted and time.monotonic() < deadline:
            time.sleep(0.01)
        return ""
    monkeypatch.setattr(vagrant, "_vagrant", up)
    watches = []

    class Watch(vmwatch.DhcpWatch):
        def __enter__(self):
            watches.append(self)
            return super().__enter__()
    monkeypatch.setattr(vmwatch, "DhcpWatch", Watch)
    vagrant.bring_up(up, ["node3"], {"provider": "libvirt"}, said.append)
    assert restarted == ["node3"] and said[0].startswith("node3: its DHCP client gave up"), said
    assert len(watches) == 1 and not watches[0]._thread.is_alive()
