"""Vagrant VMs under libvirt (two here: see VMS below), booted for real (root; KVM where a guest boots under it,
QEMU's TCG emulation where not, as here): the box built from Debian's packages, the VMs up
with their addresses from libvirt's DHCP, SSH into each, one system-mode end to end through
them (provisioned over SSH with Ansible, MXNet's env found complete in the box, where it was
built at the host's speed: DLBENCH_VM_BOX_ENVS; a smoke cell across the VMs, collect and
analyze), a VM destroyed mid-cell failing its cell within 10 s, and
`vagrant.down` leaving nothing behind: no VM, no QEMU, no libvirt daemon or dnsmasq that the
package started, no network, no firewall rule, /dev/kvm as it was.

What it costs under TCG on a 2-core machine, box cached: about 10 min with two VMs (up about
100 s, provisioning about 240-310 s, the cell about 120-190 s, the destroyed-VM cell about
50 s); docs/notebook.md, "What the VM tests cost", lists each measurement and its machine.
The run resuming once the destroyed VM is up again
(provisioning it again, the 60-step cell again: about 16 min more) runs with
DLBENCH_VM_E2E=1; `pytest -s` prints each step's time, and `invoke vm-bench` times a cold
start.

Sized for CI under TCG: 1 vCPU and 1.5 GB per VM."""
import json
import os
import shutil
import subprocess
import time

import pytest

from harness.clusters import libvirt, vagrant
from harness.nodes import inventory, access as nodes
from harness.plan import matrix
from selfcheck import faults
from tests.conftest import invoke
from harness.paths import REPO
import registry

NEEDED = ("vagrant", "libvirtd", "virsh", "qemu-system-x86_64", "debootstrap")
MISSING = [tool for tool in NEEDED if not shutil.which(tool)]
if MISSING and os.environ.get("DLBENCH_CI"):
    raise RuntimeError("%s not installed (.ci/run installs them)" % ", ".join(MISSING))

pytestmark = [pytest.mark.cluster, pytest.mark.root,
              pytest.mark.skipif(os.geteuid() != 0, reason="libvirt's VMs need root here"),
              pytest.mark.skipif(bool(MISSING), reason=(
                  "not installed: %s (apt-get install vagrant vagrant-libvirt "
                  "libvirt-daemon-system qemu-system-x86 debootstrap)" % ", ".join(MISSING)))]

# Two VMs, not the paper's three: on CI's 2 cores three emulated vCPUs share them, and the
# module took 16 min 15 s against 9 min 54 s with two (docstring), for no more proof of the
# machinery, which is the same for any number of nodes (three hosts over SSH: the emulated
# cluster's and Slurm's tests). A user's `invoke vagrant.up` still brings up three.
VMS = 2
LAST = "node%d" % VMS
STACK = ("--stack", "paper-py39")
SYSTEM = registry.vm_smoke()
FRAMEWORK = registry.system(SYSTEM)["framework"]
# The framework's env is built into the box, at the host's speed (vmbox.py), and provisioning
# finds it complete: inside each TCG guest, building it took 118 s and seeding it 69 s of the
# VM's provisioning (the Xeon's figures in the docstring), for a proof given elsewhere: envs
# built by the playbook on Debian 11's Python (test_paper_stack.py) and from a wheelhouse over
# SSH behind a bastion (test_emulated_cluster.py).
SIZE = {"DLBENCH_VM_CPUS": "1", "DLBENCH_VM_MEMORY": "1536", "DLBENCH_VM_NODES": str(VMS),
        "DLBENCH_VM_BOX_ENVS": "%s:%s" % (STACK[1], FRAMEWORK)}


def processes(name):
    """How many run under `name` (as the kernel keeps it: 15 characters at most)."""
    found = subprocess.run(["pgrep", "-x", name], capture_output=True, text=True).stdout
    return len(found.split())


def counts():
    """What the VMs could leave behind, counted on this machine."""
    answering = libvirt.responding() if shutil.which("virsh") else False
    listed = (lambda *a: len(libvirt.virsh(*a, "--name").stdout.split())) if answering \
        else (lambda *a: 0)
    rules = subprocess.run(["iptables-save"], capture_output=True, text=True).stdout
    return {"vms": listed("list", "--all"), "networks": listed("net-list", "--all"),
            "qemu": processes("qemu-system-x86"), "libvirtd": processes("libvirtd"),
            "virtlogd": processes("virtlogd"), "dnsmasq": processes("dnsmasq"),
            "firewall rules": len([r for r in rules.splitlines() if r.startswith("-A")]),
            "ip_forward": open("/proc/sys/net/ipv4/ip_forward").read().strip()}


E2E = pytest.mark.skipif(not os.environ.get("DLBENCH_VM_E2E"),
                         reason="about 20 minutes more under TCG: DLBENCH_VM_E2E=1 "
                                "(module docstring)")


def timed(*args, **kwargs):
    """`invoke` that prints how long it took (`pytest -s` shows what the VMs cost)."""
    began = time.monotonic()
    result = invoke(*args, **kwargs)
    print("\ninvoke %s: %.0f s" % (" ".join(args[:3]), time.monotonic() - began))
    return result


@pytest.fixture(scope="module")
def vms():
    """Counts before; the VMs up; `vagrant.down` at the end whatever failed. What an
    interrupted earlier run left (its record of what it started: CI's machine kept one, with
    libvirt's firewall rules and ip_forward 1) is taken down first, as a user would: the
    counts before are the machine's own."""
    if libvirt.read_state():
        print("\nleft by an earlier run: %s" % invoke("vagrant.down", env=SIZE,
                                                      check=False).stdout.strip())
    before = counts()
    began = time.monotonic()
    out = invoke("vagrant.up", env=SIZE).stdout
    print("\nVMs up in %.0f s; before: %s; with the VMs up: %s"
          % (time.monotonic() - began, before, counts()))
    yield {"before": before, "up": out}
    invoke("vagrant.down", env=SIZE, check=False)


@pytest.fixture(scope="module")
def provisioned_vms(vms):
    timed("provision", "--inventory", "vagrant", *STACK, "--frameworks", FRAMEWORK, env=SIZE)
    return vms


def test_the_vms_boot_and_say_which_accelerator_they_run_on(vms):
    record = vagrant.vm_record()
    assert record["provider"] == "libvirt" and record["box"].startswith("dlbench-bullseye-")
    assert record["accelerator"] in ("kvm", "qemu") and record["why"]
    assert "accelerator: %s" % record["accelerator"] in vms["up"]
    inv = inventory.load("vagrant")
    assert [h.name for h in inv.hosts] == ["node%d" % i for i in range(1, VMS + 1)]
    addresses = {h.address for h in inv.hosts}
    assert len(addresses) == VMS
    for host in inv.hosts:  # addresses libvirt's DHCP chose on the package's network
        assert host.address.startswith(libvirt.SUBNET + ".") and host.cluster_interface == "eth0"
        answer = nodes.SshNode(host).run("nproc; hostname; python3.9 --version").stdout.split()
        assert answer[:2] == ["1", host.name] and answer[-1].startswith("3.9")


def test_the_vms_reach_each_other_on_the_package_network(vms):
    inv = inventory.load("vagrant")
    first = nodes.SshNode(inv.hosts[0])
    for host in inv.hosts[1:]:
        reached = first.run("timeout 10 bash -c '</dev/tcp/%s/22' && echo ok" % host.address,
                            check=False)
        assert reached.stdout.strip() == "ok", reached.stderr


@pytest.mark.timeout(2700)  # provisioning the VMs (its fixture) took 312-780 s of it
def test_a_system_mode_end_to_end_through_the_vms(provisioned_vms, tmp_path):
    # no operator profile, 4 steps (2 timed) instead of the smoke size's 12, and no
    # calibration pass on emulated CPUs (harness/run/launch.py calibration): its subject is
    # the path through the VMs (the profiler, the step statistics and the breakdown are the
    # local cluster's tests'), and each step of emulated MXNet took 22.6 s here (start-up
    # 112 s, 12 steps 273 s, the calibration 200 s)
    out = timed("bench", "--inventory", "vagrant", *STACK, "--systems", SYSTEM,
                "--benchmarks", "lenet5-cifar10", "--profile-steps", "0", "--steps", "4",
                "--results", str(tmp_path), env=SIZE).stdout
    assert "1 succeeded, 0 failed" in out, out
    timed("collect", "--inventory", "vagrant", "--results", str(tmp_path), env=SIZE)
    (run,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    record = vagrant.vm_record()
    for result in map(json.loads, (p.read_text() for p in run.glob("*/*/*/result.json"))):
        assert result["config"]["address"].startswith(libvirt.SUBNET)
        if record["accelerator"] == "qemu" and result["config"]["role"] == "worker":
            assert result["summary"]["forward"] is None  # no calibration pass on emulated CPUs
    timed("analyze", "--results", str(tmp_path))
    report = (run / "analysis" / "report.md").read_text()
    print("## ".join(report.split("## ")[1:3])[:6000])  # what was run, the setup, node tables
    assert "VM accelerator" in report and "box %s" % record["box"] in report
    if record["accelerator"] == "qemu":
        assert "emulated_cpu" in report and "| reproduced |" not in report


@pytest.fixture(scope="module")
def destroyed_mid_cell(provisioned_vms, tmp_path_factory):
    """`virsh destroy` of the last node mid-cell, through the run's poll hook
    (faults.NodeFault): once every process of a 60-step cell is launched (their pids
    recorded) and one on that node reports progress. Its worker is still importing MXNet
    then: waiting for its steps would add a minute or two of emulated start-up, and the poll
    that finds the VM gone is the same in every phase (in training: docs/reproducing.md).
    Returns when bench has ended."""
    from harness import commands
    from harness.run import hooks
    results = tmp_path_factory.mktemp("destroyed")
    run_id = "vm-destroyed-%d" % time.time()
    (cell,) = matrix.plan("smoke", VMS, systems=SYSTEM, benchmarks="lenet5-cifar10", steps=60)

    def destroy():
        domain = [d for d in libvirt.virsh("list", "--name").stdout.split()
                  if d.endswith("_" + LAST)]
        libvirt.virsh("destroy", domain[0])
    fault = faults.NodeFault(LAST, cell.id, destroy)
    with pytest.MonkeyPatch.context() as patch:
        for name, value in SIZE.items():
            patch.setenv(name, value)
        commands.bench_named("vagrant", STACK[1], "smoke", str(results), run=run_id,
                             systems=SYSTEM, benchmarks="lenet5-cifar10", steps=60,
                             hooks=[hooks.GivenCells([cell]), fault])
    assert fault.injected_at, "no process on %s reported progress" % LAST
    status = json.loads((results / run_id / cell.id / "status.json").read_text())
    return {"run_id": run_id, "results": results, "destroyed": fault.injected_at,
            "status": status}


def test_a_vm_destroyed_mid_cell_fails_the_cell_within_10_s(destroyed_mid_cell):
    status = destroyed_mid_cell["status"]
    assert status["status"] == "failed" and LAST in status["reason"], status
    detected = status["detected"] - destroyed_mid_cell["destroyed"]
    assert detected <= 10.0, (detected, status["reason"])
    print("\n%s destroyed: the cell failed %.1f s later: %s" % (LAST, detected,
                                                             status["reason"]))


@E2E
def test_the_run_resumes_once_the_destroyed_vm_is_up_again(destroyed_mid_cell):
    """`invoke provision` brings the last node up again; the run then resumes its failed cell."""
    timed("provision", "--inventory", "vagrant", *STACK, "--frameworks", FRAMEWORK, env=SIZE)
    out = timed("bench", "--inventory", "vagrant", *STACK, "--run", destroyed_mid_cell["run_id"],
                "--retry-failed", "--results", str(destroyed_mid_cell["results"]),
                env=SIZE).stdout
    assert "1 succeeded, 0 failed" in out, out


def test_down_stops_what_the_package_started_and_nothing_else(vms):
    invoke("vagrant.down", env=SIZE)
    after = counts()
    print("\nafter vagrant.down: %s" % after)
    assert after == vms["before"], (vms["before"], after)
    assert not (REPO / "inventory" / "vagrant.yml").exists()
