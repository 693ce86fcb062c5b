"""Faults made on purpose, for `invoke fault-bench` and the tests, each through the run's hooks
(harness/run/hooks.py): kill or stop one process of a running cell (KillWhenTraining), or
fault a node (NodeFault: a link cut, a VM destroyed); and the count of what a run left behind
on every node.

fault-bench runs, per system-mode, one cell whose worker on node 2 is killed (SIGKILL, as the
OOM killer does) once node 1 reports training, then the same cell again: it prints launch-to-
first-step, detection and cleanup times, stray processes, and a no-op provisioning re-run.
"""
from dataclasses import dataclass
import time
from pathlib import Path

from contract import runfolder
from harness.plan.options import ProvisionOptions
from harness.results import run_manifest
from harness import commands
from harness.run import hooks
from harness.nodes import inventory, access as nodes_mod, provision
from harness.plan import matrix
from contract import nodefolder

VICTIM = ("worker", 1)  # node 2's worker: never the process that coordinates


def run_folder(node, run_id):
    return nodefolder.run_dir(node.path(node.host.workdir), run_id)


@dataclass
class Kill:
    """When and how KillWhenTraining kills: at `step` (0: at the cell's first poll; or in
    `phase`), `delay` s later, with `signal`, the process `label`."""
    step: int = 2
    phase: str = None
    signal: str = "KILL"
    label: str = "%s-%d" % VICTIM
    delay: float = 0.0
    # the whole process group the harness started (the role's shell, its trainer, its lease),
    # by the pid the harness recorded: a role caught before it wrote any progress
    group: bool = False


class KillWhenTraining(hooks.Hook):
    """A run's hook (harness/run/hooks.py) at the poll stage of the cell `cell_id`: once a
    process on node `trigger` reports `step` (or, given `phase`, once it and the victim report
    that phase), and `delay` s more have passed, it sends SIGKILL (or `signal`) to the `label`
    process on node `victim` by the pid that process reports, once per run: killed_at, the
    pid, and the victim's phase then. It reads what the watch loop has just polled: no poll of
    its own. how: the fields of Kill, by name."""

    def __init__(self, trigger, victim, cell_id, **how):
        self.trigger, self.victim, self.cell_id = trigger, victim, cell_id
        kill = Kill(**how)
        self.step, self.phase, self.signal = kill.step, kill.phase, kill.signal
        self.label, self.delay, self.group = kill.label, kill.delay, kill.group
        self.killed_at = self.pid = self.victim_phase = self.due_at = None

    def after(self, stage, run, value, cell=None):
        if stage == "poll" and cell.id == self.cell_id and self.killed_at is None:
            self.polled(value)
        return value

    def polled(self, processes):
        victim = next((p for p in processes if p.node.name == self.victim and
                       "%s-%d" % (p.role, p.rank) == self.label), None)
        progress = (victim.progress or {}) if victim else {}
        if self.due_at is None and self._due(
                [p.progress or {} for p in processes if p.node.name == self.trigger], progress):
            self.due_at = time.monotonic() + self.delay
        pid = (victim.pid if self.group else progress.get("pid")) if victim else None
        if self.due_at is not None and time.monotonic() >= self.due_at and pid and \
                victim.rc is None:
            self._kill(victim.node, pid, progress)

    def _kill(self, node, pid, progress):
        target = "-- -%d" % pid if self.group else "%d" % pid
        if node.run("kill -%s %s" % (self.signal, target), check=False).exited == 0:
            self.pid, self.killed_at = pid, time.time()
            self.victim_phase = progress.get("phase")

    def _due(self, trigger, victim):
        if self.phase:
            return victim.get("phase") == self.phase and \
                any(p.get("phase") == self.phase for p in trigger)
        return any(p.get("step", 0) >= self.step for p in trigger)


class NodeFault(hooks.Hook):
    """A fault of a node, not of one role (its link cut, its VM destroyed), through the run's
    hooks: at the poll stage of the cell `cell_id`, once a process on node `trigger` reports
    `step` (None: any progress at all), inject() once (injected_at); once the cell's launch
    stage has ended (its processes watched to the failure and stopped where they can be
    reached), before its fetch, which runs whatever the launch raised: repair(), once, so
    that the cell's files are fetched and the next cell (or its retry) runs on whole nodes."""

    def __init__(self, trigger, cell_id, inject, repair=None, step=None):
        self.trigger, self.cell_id, self.step = trigger, cell_id, step
        self.inject, self.repair = inject, repair
        self.injected_at = self.repaired_at = None

    def after(self, stage, run, value, cell=None):
        if stage == "poll" and self._ours(cell) and self.injected_at is None and \
                self._due(value):
            self.inject()
            self.injected_at = time.time()
        return value

    def before(self, stage, run, cell=None):
        if stage == "fetch" and self._ours(cell) and self.injected_at and self.repair and \
                self.repaired_at is None:
            self.repair()
            self.repaired_at = time.time()

    def _ours(self, cell):
        return cell is not None and cell.id == self.cell_id

    def _due(self, processes):
        reports = [p.progress for p in processes if p.node.name == self.trigger and p.progress]
        if self.step is None:
            return bool(reports)
        return any(r.get("step", 0) >= self.step for r in reports)


def keep(results, name, table):
    """A fault benchmark's table, as results/<name>-<time>.json; says where."""
    out = Path(results) / ("%s-%s.json" % (name, run_manifest.new_run_id()))
    runfolder.write_json(out, table)
    print("written to %s" % out)
    return out


def strays(nodes, run_id):
    """node -> pids still running in the run's folders (0 everywhere after a clean stop)."""
    return {node.name: node.processes_in(run_folder(node, run_id)) for node in nodes}


def launch_to_first_step(cell_path, started):
    """Seconds from launch until the last process that reports steps had finished its first."""
    stamps = [runfolder.read_json(p, {}).get("first_step_at")
              for p in nodefolder.fetched(cell_path, nodefolder.PROGRESS)]
    stamps = [s for s in stamps if s]
    return max(stamps) - started if stamps else None


def benchmark(inventory_name, stack_name, results, systems=None, steps=200):
    inv = inventory.load(inventory_name)
    chosen = [c.system for c in matrix.plan("smoke", len(inv.hosts), systems=systems)]
    recap = provision.run(ProvisionOptions(inventory=inventory_name, stack=stack_name,
                                           size="smoke"))
    rows = [{"fault": "no-op provisioning re-run", "seconds": recap["seconds"],
             "changed": recap["changed"]}]
    for system in chosen:
        rows.append(fault_row(inv, inventory_name, stack_name, results, system, steps))
    print_table(rows)
    keep(results, "fault-bench", {"inventory": inventory_name, "steps": steps, "rows": rows})
    return rows


def fault_row(inv, inventory_name, stack_name, results, system, steps):
    """One system-mode: the cell run first is faulted, the same cell run next must succeed
    (which repeat comes first is bench's seeded draw)."""
    nodes = nodes_mod.connect_all(inv)
    run_id = "fault-%s-%s" % (system, run_manifest.new_run_id())
    cells = run_order(inv, run_id, system, steps)
    killer = KillWhenTraining(nodes[0].name, nodes[1].name, cells[0].id)
    # no profiled steps: the fault comes at step 2, and the next cell proves the run goes on
    # whether or not it profiles (the profile phase's faults are the campaign's)
    commands.bench_named(inventory_name, stack_name, "smoke", results, run=run_id,
                         systems=system, steps=steps, repeats=2, profile_steps=0,
                         hooks=[killer])
    path = Path(results) / run_id
    faulted, after = (runfolder.RunFolder(path).status(c.id) for c in cells)
    return {
        "fault": "%s: worker on node 2 killed" % system, "system": system, "run": str(path),
        "killed_at": killer.killed_at, "status": faulted.get("status"),
        "reason": faulted.get("reason"),
        "launch_to_first_step": launch_to_first_step(path / cells[0].id, faulted.get("started")),
        "detection": (faulted["detected"] - killer.killed_at) if killer.killed_at else None,
        "cleanup": faulted.get("ended", 0) - faulted.get("detected", 0),
        "strays": sum(len(p) for p in strays(nodes, run_id).values()),
        "next_cell": next_cell(faulted, after),
    }


def run_order(inv, run_id, system, steps):
    """The two repeats of a smoke cell in the order bench will run them in run `run_id`."""
    return matrix.plan("smoke", len(inv.hosts), systems=system, steps=steps, repeats=2,
                       order_seed=matrix.order_seed(run_id))


def next_cell(faulted, after):
    """The status of the cell run after the faulted one: "ran before the fault" where it
    started first (a fault test would then prove nothing about what follows a fault)."""
    if faulted.get("started") and after.get("started") and \
            after["started"] < faulted["started"]:
        return "ran before the fault"
    return after.get("status")


def print_table(rows):
    print("\n%-42s %9s %9s %9s %6s %20s" % ("fault", "to step 1", "detected", "cleanup",
                                           "strays", "next cell"))
    for row in rows:
        if "system" not in row:
            print("%-42s %29s changed=%s" % (row["fault"], "%.1f s" % row["seconds"],
                                             row["changed"]))
            continue
        print("%-42s %9s %9s %9s %6d %20s" % (
            row["fault"], _seconds(row["launch_to_first_step"]), _seconds(row["detection"]),
            _seconds(row["cleanup"]), row["strays"], row["next_cell"]))


def _seconds(value):
    return "-" if value is None else "%.1f s" % value
