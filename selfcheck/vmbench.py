"""`invoke vm-bench`: what the Vagrant VMs cost, from a cold start, under the accelerator the
machine gives (KVM, or QEMU's TCG emulation where KVM does not boot a guest). A benchmark that
prints figures: nothing here asserts them.

Phases, each timed: the box (built only if its recipe's folder lacks it), each VM's boot to
SSH (one `vagrant up` per VM, one after the other, so that each time is its own), provisioning
one framework at a time (envs built inside the VMs from PyPI), and one smoke cell per
system-mode asked for; then collect, analyze and `vagrant.down`. Writes vm-bench.json and
prints the table."""
import json
import os
import time
from pathlib import Path

from harness.plan.options import ProvisionOptions
from harness import commands
from harness.clusters import vagrant
from harness.nodes import provision, stacks
from harness.results import run_manifest
from contract.runfolder import RunFolder
import registry


def run(stack_name, results, systems=None, benchmark="lenet5-cifar10", keep=False):
    """systems: comma-separated (default: the registry's vm_smoke); keep: leave the VMs up
    at the end (for more runs)."""
    chosen = systems.split(",") if systems else [registry.vm_smoke()]
    out = Path(results) / ("vm-bench-%s" % run_manifest.new_run_id())
    out.mkdir(parents=True)
    figures = {"stack": stack_name, "phases": []}

    def timed(name, action):
        began = time.monotonic()
        value = action()
        figures["phases"].append({"phase": name, "seconds": time.monotonic() - began})
        print("== %s: %.0f s" % (name, figures["phases"][-1]["seconds"]), flush=True)
        (out / "vm-bench.json").write_text(json.dumps(figures, indent=1))
        return value

    vagrant.down(echo=print)  # a cold start: no VM, nothing of libvirt's that the package made
    figures["vm"] = timed("setup (libvirt, box, accelerator)", vagrant.machine_setup)
    for index in range(1, int(vagrant.settings()["DLBENCH_VM_NODES"]) + 1):
        name = "node%d" % index
        timed("boot %s to SSH" % name, lambda: vagrant._vagrant(["up", name], stream=True))
    timed("inventory", vagrant.prepare)
    for framework in sorted({registry.system(s)["framework"] for s in chosen}):
        stacks.load(stack_name).env(framework)
        timed("provision %s" % framework, lambda: provision.run(ProvisionOptions(
            inventory="vagrant", stack=stack_name, size="smoke", frameworks=[framework])))
    for system in chosen:
        outcome = timed("bench %s (smoke)" % system, lambda: commands.bench_named(
            "vagrant", stack_name, "smoke", out, run=system, benchmarks=benchmark,
            systems=system))
        timed("collect %s" % system, lambda: commands.collect_run("vagrant", out, system))
        figures.setdefault("cells", []).extend(cell_times(outcome["path"]))
    if not keep:
        timed("vagrant.down", vagrant.down)
    lines = table(figures)
    (out / "vm-bench.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return figures


def cell_times(run_path):
    return [{"cell": s["cell_id"], "status": s.get("status"), "seconds": s.get("seconds") or 0.0}
            for s in RunFolder(run_path).statuses()]


def table(figures):
    vm = figures.get("vm") or {}
    lines = ["# VM bench: %s, accelerator %s (%s), %s vCPU x %s MB per VM"
             % (vm.get("box"), vm.get("accelerator"), vm.get("why"),
                os.environ.get("DLBENCH_VM_CPUS", vagrant.DEFAULTS["DLBENCH_VM_CPUS"]),
                os.environ.get("DLBENCH_VM_MEMORY", vagrant.DEFAULTS["DLBENCH_VM_MEMORY"])),
             "", "| phase | seconds |", "|---|---|"]
    lines += ["| %s | %.0f |" % (p["phase"], p["seconds"]) for p in figures["phases"]]
    lines += ["", "| cell | status | seconds |", "|---|---|---|"]
    lines += ["| %s | %s | %.0f |" % (c["cell"], c["status"], c["seconds"])
              for c in figures.get("cells", [])]
    total = sum(p["seconds"] for p in figures["phases"])
    return lines + ["", "total: %.0f s (%.1f min)" % (total, total / 60)]
