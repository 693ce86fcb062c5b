"""A cell's pipeline: one attempt at a cell goes through the same named stages,

    prepare -> launch (start, poll until it ends, stop) -> fetch -> judge -> record

each called through the run's hooks (harness/run/hooks.py), and a cell that crashed in native
code, or was disturbed, goes through them once more (run_cell). The run that owns the cells
(its folder, nodes, stacks, options, probe and estimates) is harness/run/lifecycle.py's.
"""
import re

from . import disturbance, launch
from .progress import RunSoFar
from ..clusters import links
from ..nodes import datasets
from ..results import fetch
from contract.runfolder import CellStatus

CRASH = re.compile(r"exited with (134|139)\b")  # 128 + SIGABRT, 128 + SIGSEGV


def run_cell(run, cell, after=RunSoFar()):
    """A cell of `run` (harness/run/lifecycle.py Run) runs once more (once) when it failed
    because a framework crashed in native code (SIGSEGV or SIGABRT: TF 2.21's coordinator and
    profiler have, at random), or when it succeeded disturbed: other programs or steal took
    more than the bound of a node's CPUs (harness/run/disturbance.py). The first attempt is
    kept in .attempts/, and the cell's warning, which the report lists, names it. A kill
    (SIGKILL, a fault) or any other failure is not retried; a cell disturbed again is kept,
    marked `disturbed`, out of the verdicts. after: the run's ETA beyond this cell."""
    links.apply(cell)
    outcome = CellRun(run, cell, after).go()
    why = retry_reason(outcome, run.folder.status(cell.id))
    if not why:
        return outcome
    print("  %s: running it once more, %s (the first attempt is kept in .attempts/)"
          % (cell.id, why), flush=True)
    run.folder.set_aside(cell.id)
    outcome = CellRun(run, cell, after).go()
    status = run.folder.status(cell.id)
    status["warning"] = "; ".join(filter(None, [
        "ran twice: the first attempt %s" % why, status.get("warning")]))
    if status.get("disturbed"):
        status["warning"] += "; disturbed%s: kept out of the verdicts" % (
            " again" if why.startswith("was disturbed") else "")
        print("  %s: %s again: kept, out of the verdicts" % (cell.id, status["disturbed"]),
              flush=True)
    run.save(status)
    return outcome


class CellRun:
    """One attempt at a cell, stage by stage (CELL_STAGES of harness/run/hooks.py)."""

    def __init__(self, run, cell, after=RunSoFar()):
        self.run, self.cell, self.after = run, cell, after
        self.bounds = run.bounds(cell)
        self.status = CellStatus(cell.id, status="running", settings=cell.settings)

    def go(self):
        """The stages in order; fetch, judge and record whatever the launch raised. Returns
        the cell's status word."""
        processes = self.stage("prepare", self.prepare)
        self.run.save(self.status)
        try:
            self.stage("launch", lambda: self.launch(processes))
        finally:
            self.status["fetched_files"] = self.stage("fetch", self.fetch)
            self.stage("judge", self.judge)
            self.stage("record", self.record)
        return self.status["status"]

    def stage(self, name, work):
        return self.run.hooks.around(name, self.run, work, self.cell)

    def prepare(self):
        """Each process's script and cell.json, rendered for its node."""
        shards = shard_index(self.cell, self.cell.nodes)
        return launch.prepare(
            self.cell, self.run.run_id, self.run.nodes, self.run.stacks.of(self.cell), shards,
            launch.lease_seconds(self.bounds),
            launch.calibrate_together(self.run.probe, self.bounds,
                                      self.run.nodes[:self.cell.nodes]))

    def launch(self, processes):
        """Start every process, poll them to the end (or the first fault; each round of polls
        is the hooks' `poll` stage), stop them."""
        timeout = self.run.options.timeout or self.cell.default_timeout() * self.bounds.slowness
        launch.run_cell(self.cell, processes, timeout, self.status,
                        save=lambda: self.run.save(self.status), after=self.after,
                        bounds=self.bounds, polled=self.polled)
        return self.status

    def polled(self, processes):
        self.run.hooks.after("poll", self.run, processes, self.cell)

    def fetch(self):
        return fetch.fetch_cell(self.run.path, self.status, self.run.nodes)

    def judge(self):
        """What else ran on each node while the cell did, and whether that disturbed it."""
        self.status["interference"] = disturbance.per_node(self.run.path / self.cell.id)
        if self.status["status"] == "succeeded" and \
                disturbance.judged(self.run.probe, self.bounds):
            self.status["disturbed"] = disturbance.disturbed(self.status["interference"])
        return self.status

    def record(self):
        self.run.save(self.status)
        report(self.cell, self.status)
        return self.status


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
