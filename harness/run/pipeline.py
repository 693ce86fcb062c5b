"""A run and its cells' pipeline.

A Run owns what every cell of it shares: its folder, its nodes, the stacks, bench's options, the
contention probe and the estimates. Each cell goes through the same named stages:

    prepare -> launch and watch -> fetch -> judge -> record

and a cell that crashed in native code, or was disturbed, goes through them once more
(run_cell). The controller (harness/commands.py) plans the cells and hands them to run_cells.
A self-check or invoke explain changes what a stage does through a Hook (BenchOptions.hooks),
not through a keyword of bench: the same-math check gives every cell.json its initial weights'
checksum and its planted error; explain gives a new run its cells and runs one round at a time.
"""
import re
import time

from . import disturbance, interrupts, launch, stall
from .progress import RunSoFar
from ..clusters import links
from ..nodes import datasets
from ..plan import estimate
from ..results import collect
from contract.errors import RunIncomplete
from contract.runfolder import CellStatus, RunFolder

CRASH = re.compile(r"exited with (134|139)\b")  # 128 + SIGABRT, 128 + SIGSEGV


class Hook:
    """What a caller of bench may change, stage by stage; each method left as here changes
    nothing. planned: a new run's cells (None: the run plans its own from the options);
    chosen: which of the cells left run now; cell_config: more keys of every cell.json of
    a cell (contract/cellconfig.py), given its dataset's classes."""

    def planned(self):
        return None

    def chosen(self, todo):
        return todo

    def cell_config(self, cell, classes):
        return {}


class GivenCells(Hook):
    """A new run of these cells, in this order, planned by the caller (None: the run's own)."""

    def __init__(self, cells):
        self.cells = cells

    def planned(self):
        return self.cells


def planned(hooks):
    """The cells a hook plans for a new run, or None."""
    given = [cells for cells in (hook.planned() for hook in hooks or ()) if cells is not None]
    return given[-1] if given else None


def chosen(hooks, todo):
    for hook in hooks or ():
        todo = hook.chosen(todo)
    return todo


class Run:
    """One run of the matrix on its nodes. options: harness/plan/options.py BenchOptions
    (timeout and fail_fast are read here); basis: the estimates of earlier runs by cell key;
    probe: the run's contention probe; expected: estimate.plan_seconds' rows for the ETA."""

    def __init__(self, path, run_id, nodes, stacks, options, basis=None, probe=None,
                 expected=()):
        """stacks: harness/nodes/stacks.py RunStacks, which gives each cell its stack."""
        self.path, self.run_id, self.nodes, self.stacks = path, run_id, nodes, stacks
        self.options, self.basis, self.probe = options, basis or {}, probe
        self.seconds = {cell.id: s for cell, s, _ in expected}
        self.folder = RunFolder(path)

    def run_cells(self, cells):
        """Each cell in turn; returns {run_id, path, outcomes}. Whatever ends the loop, the
        manifest and records are written and the nodes' connections closed."""
        outcomes, began = {}, time.monotonic()
        tally = {"done": 0, "failed": 0, "disturbed": 0}
        interrupts.install()  # Ctrl-C, `kill` or a CI timeout: stop the cell, clean up, keep data
        try:
            for index, cell in enumerate(cells, 1):
                interrupts.check()
                so_far = self._after(cells[index:], index=index, total=len(cells), began=began,
                                     **tally)
                print(so_far.text(), flush=True)
                outcomes[cell.id] = self.run_cell(cell, so_far)
                self._count(tally, cell.id, outcomes[cell.id])
                if not self._go_on(outcomes[cell.id], len(cells) - index):
                    break
        except KeyboardInterrupt:
            print("\ninterrupted: the running cell was stopped on every node and marked failed "
                  "(interrupted); resume with `invoke bench --run %s`" % self.run_id, flush=True)
            raise
        finally:
            interrupts.restore()
            self._close()
        failed = [cid for cid, s in outcomes.items() if s != "succeeded"]
        print("run %s: %d succeeded, %d failed; results in %s"
              % (self.run_id, len(outcomes) - len(failed), len(failed), self.path))
        return {"run_id": self.run_id, "path": self.path, "outcomes": outcomes}

    def _after(self, later, **place):
        """RunSoFar: the expected seconds of the cells still to come, how many have no
        estimate, and `place` (the cell's index and the run's counts)."""
        after = [self.seconds.get(c.id) for c in later]
        return RunSoFar(sum(s for s in after if s is not None), after.count(None), **place)

    def _count(self, tally, cell_id, outcome):
        """Adds a cell just done to the run's counts (done, failed, disturbed)."""
        tally["done"] += 1
        if outcome != "succeeded":
            tally["failed"] += 1
        elif self.folder.status(cell_id).get("disturbed"):
            tally["disturbed"] += 1

    def _go_on(self, outcome, left):
        """After a cell: whether the next runs. A node taken away (Slurm's drain or down, a
        dead host) stops the run, --fail-fast a failed cell."""
        if outcome == "succeeded" or not left:
            return True
        taken = launch.unusable(self.nodes, fresh=True)
        if taken:
            raise RunIncomplete("%s: %d cell(s) left pending" % (taken, left),
                                "resume with `invoke bench --run %s` once the nodes are back, "
                                "or in a new allocation" % self.run_id)
        if self.options.fail_fast:
            print("stopping (--fail-fast): %d cell(s) left pending; resume with "
                  "`invoke bench --run %s`" % (left, self.run_id), flush=True)
            return False
        return True

    def _close(self):
        collect.keep_slurm_accounting(self.path)
        collect.finish_manifest(self.path, self.nodes)
        collect.build_records(self.path)
        for node in self.nodes:
            node.close()

    def bounds(self, cell):
        """The cell's stall bounds, from its estimate (an earlier run's, else the prior)."""
        return stall.Bounds.for_cell(
            cell, self.basis.get(estimate.key(cell.settings, self.stacks.of(cell).name)) or
            estimate.prior(cell, self.probe), estimate.slowness(self.probe))

    def run_cell(self, cell, after=RunSoFar()):
        """A cell runs once more (once) when it failed because a framework crashed in native
        code (SIGSEGV or SIGABRT: TF 2.21's coordinator and profiler have, at random), or when
        it succeeded disturbed: other programs or steal took more than the bound of a node's
        CPUs (harness/run/disturbance.py). The first attempt is kept in .attempts/, and the
        cell's warning, which the report lists, names it. A kill (SIGKILL, a fault) or any other
        failure is not retried; a cell disturbed again is kept, marked `disturbed`, out of the
        verdicts. after: the run's ETA beyond this cell (_after)."""
        links.apply(cell)
        cell_run = CellRun(self, cell, after)
        outcome = cell_run.go()
        why = retry_reason(outcome, self.folder.status(cell.id))
        if not why:
            return outcome
        print("  %s: running it once more, %s (the first attempt is kept in .attempts/)"
              % (cell.id, why), flush=True)
        self.folder.set_aside(cell.id)
        outcome = CellRun(self, cell, after).go()
        status = self.folder.status(cell.id)
        status["warning"] = "; ".join(filter(None, [
            "ran twice: the first attempt %s" % why, status.get("warning")]))
        if status.get("disturbed"):
            status["warning"] += "; disturbed%s: kept out of the verdicts" % (
                " again" if why.startswith("was disturbed") else "")
            print("  %s: %s again: kept, out of the verdicts" % (cell.id, status["disturbed"]),
                  flush=True)
        self.save(status)
        return outcome

    def save(self, status):
        self.folder.save_status(status, time.time())


class CellRun:
    """One attempt at a cell, stage by stage: prepare, launch_and_watch, fetch, judge,
    record."""

    def __init__(self, run, cell, after=RunSoFar()):
        self.run, self.cell, self.after = run, cell, after
        self.bounds = run.bounds(cell)
        self.status = CellStatus(cell.id, status="running", settings=cell.settings)

    def go(self):
        """The stages in order; fetch, judge and record whatever launch_and_watch raised.
        Returns the cell's status word."""
        processes = self.prepare()
        self.run.save(self.status)
        try:
            self.launch_and_watch(processes)
        finally:
            self.fetch()
            self.judge()
            self.record()
        return self.status["status"]

    def prepare(self):
        """Each process's script and cell.json, rendered for its node; hooks (the options'
        `hooks`: the self-checks') may add to cell.json through cell_config(cell, classes)."""
        shards = shard_index(self.cell, self.cell.nodes)
        extra = {}
        for hook in self.run.options.hooks or ():
            extra.update(hook.cell_config(self.cell, shards["classes"]))
        return launch.prepare(
            self.cell, self.run.run_id, self.run.nodes, self.run.stacks.of(self.cell), shards,
            launch.lease_seconds(self.bounds),
            launch.calibrate_together(self.run.probe, self.bounds,
                                      self.run.nodes[:self.cell.nodes]), extra)

    def launch_and_watch(self, processes):
        """Start every process, watch them to the end (or the first fault), stop them."""
        timeout = self.run.options.timeout or self.cell.default_timeout() * self.bounds.slowness
        launch.run_cell(self.cell, processes, timeout, self.status,
                        save=lambda: self.run.save(self.status), after=self.after,
                        bounds=self.bounds)

    def fetch(self):
        self.status["fetched_files"] = collect.fetch_cell(self.run.path, self.status,
                                                          self.run.nodes)

    def judge(self):
        """What else ran on each node while the cell did, and whether that disturbed it."""
        self.status["interference"] = disturbance.per_node(self.run.path / self.cell.id)
        if self.status["status"] == "succeeded" and \
                disturbance.judged(self.run.probe, self.bounds):
            self.status["disturbed"] = disturbance.disturbed(self.status["interference"])

    def record(self):
        self.run.save(self.status)
        report(self.cell, self.status)


def shard_index(cell, nodes_count):
    return datasets.index_of(datasets.prepare(cell.dataset, cell.data, nodes_count,
                                              progress=lambda m: None))


def retry_reason(outcome, status):
    """Why a cell's attempt is run once more ('failed (...)', 'was disturbed (...)'), or ''."""
    if outcome != "succeeded":
        return "failed (%s)" % status["reason"] if CRASH.search(status.get("reason", "")) \
            else ""
    # a cell salvaged after a fault is not run again: its timing is whole, its profile not
    return "was %s" % status["disturbed"] if status.get("disturbed") and \
        not (status.get("warning") or "").startswith(launch.SALVAGED) else ""


def report(cell, status):
    """The cell's line (and its processes' last log lines where it failed)."""
    line = "  %s: %s in %.1f s" % (cell.id, status["status"], status.get("seconds", 0.0))
    if status.get("reason"):
        line += " (%s)" % status["reason"]
    if status.get("disturbed"):
        line += ", %s" % status["disturbed"]
    print(line, flush=True)
    for label, tail in (status.get("log_tails") or {}).items():
        if tail.strip():
            print("  --- last lines of %s ---\n%s" % (label, tail))
