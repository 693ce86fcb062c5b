"""The points at which a caller of bench acts on a run, instead of a keyword of bench or a call
around it: invoke explain, the same-math check and the fault tests each pass a Hook.

A run goes through RUN_STAGES and each cell attempt through CELL_STAGES (harness/run/
lifecycle.py, harness/run/pipeline.py). Before each stage every hook's `before` is called;
after it every hook's `after`, which gets the stage's value and returns it, changed or not:

    stage      its value                                    used by
    plan       Plan: every cell of the run, those to run    GivenCells, explain's Round
    estimate   estimate.plan_seconds' (rows, total)
    preflight  the cells checked
    open       the run folder's path
    probe      the contention probe's measurement
    cells      {run_id, path, outcomes}
    close      the run folder's path
    prepare    the cell's processes, cell.json in .config   the same-math check (SameMath)
    poll       the cell's processes, freshly polled, once   faults (selfcheck/faults.py)
               per round of the watch loop
    launch     the cell's status once its processes stopped
    fetch      the number of files fetched
    judge      the cell's status
    record     the cell's status
"""
from typing import List, NamedTuple, Optional

RUN_STAGES = ("plan", "estimate", "preflight", "open", "probe", "cells", "close")
CELL_STAGES = ("prepare", "poll", "launch", "fetch", "judge", "record")


class Plan(NamedTuple):
    """A run's cells: every cell of it, those that run now, and the seed that drew their order
    (None where they came from a manifest or a hook, whose order is kept)."""
    cells: List
    todo: List
    order_seed: Optional[int] = None


class Hook:
    """Acts at the stages it names; each method left as here changes nothing. run: the
    lifecycle.Run (its options, nodes, folder); cell: the cell of a cell stage, else None."""

    def before(self, stage, run, cell=None):
        pass

    def after(self, stage, run, value, cell=None):
        return value


class Hooks:
    """The run's hooks, called in the order given."""

    def __init__(self, hooks=()):
        self.hooks = list(hooks or ())

    def before(self, stage, run, cell=None):
        check_stage(stage)
        for hook in self.hooks:
            hook.before(stage, run, cell)

    def after(self, stage, run, value, cell=None):
        check_stage(stage)
        for hook in self.hooks:
            value = hook.after(stage, run, value, cell)
        return value

    def around(self, stage, run, work, cell=None):
        """work() as the stage: before, work, after; returns its value as the hooks left it."""
        self.before(stage, run, cell)
        return self.after(stage, run, work(), cell)


def check_stage(stage):
    if stage not in RUN_STAGES + CELL_STAGES:
        raise ValueError("no stage %r: the stages are %s" % (stage, ", ".join(
            RUN_STAGES + CELL_STAGES)))


class GivenCells(Hook):
    """A new run of these cells, in this order, planned by the caller (None: the run's own).
    A resumed run keeps its manifest's."""

    def __init__(self, cells):
        self.cells = cells

    def after(self, stage, run, value, cell=None):
        if stage != "plan" or self.cells is None or run.resuming:
            return value
        return Plan(list(self.cells), list(self.cells), None)
