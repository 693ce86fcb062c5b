"""A run's whole life, from its plan to its close: `Run.start(options)` for a new run,
`Run.resume(path, options)` for one that exists.

    plan -> estimate -> preflight -> open -> probe -> cells -> close

Each stage is a method, called through the run's hooks (harness/run/hooks.py); the cells stage
runs each cell through its own stages (harness/run/pipeline.py). Whatever ends the cells stage,
close writes the manifest and records and closes the nodes' connections.
"""
import time
from pathlib import Path

from . import contention, hooks, interrupts, launch, pipeline, preflight, resume, stall
from .progress import RunSoFar
from ..clusters import links
from ..nodes import access, datasets, inventory, provision
from ..nodes.stacks import RunStacks
from ..plan import estimate, matrix
from ..results import run_manifest, run_records
from contract import manifest as manifests
from contract.errors import RunIncomplete, UserError
from contract.runfolder import CellStatus, RunFolder


class Run:
    """One run of the matrix on its nodes. options: harness/plan/options.py BenchOptions;
    resuming: the run's folder exists and its manifest plans it."""

    def __init__(self, options, path, resuming=False, nodes=None):
        # a bad setting stops the run before it starts
        stall.frozen_seconds(), launch.base_lease(), launch.calibration_seconds()
        self.options, self.path, self.run_id = options, Path(path), Path(path).name
        self.resuming, self.folder = resuming, RunFolder(path)
        self.hooks = hooks.Hooks(options.hooks)
        self.inventory = inventory.load(options.inventory) if nodes is None else None
        self.nodes = access.connect_all(self.inventory) if nodes is None else nodes
        self.stacks = RunStacks.load(run_stacks(options, self.path, resuming))
        self.basis = estimate.history(options.results, self.inventory.name,
                                      self.stacks.names) if nodes is None else {}
        self.probe, self.seconds = None, {}

    @classmethod
    def start(cls, options):
        """A new run of the options' plan (its id: --run, else the time now)."""
        path = Path(options.results) / (options.run or run_manifest.new_run_id())
        return cls(options, path).go()

    @classmethod
    def resume(cls, path, options):
        """The run at `path` again: what its manifest plans and is unfinished."""
        return cls(options, path, resuming=True).go()

    def go(self):
        """The run's stages in order; returns {run_id, path, outcomes} (a dry run: its cells)."""
        plan = self.stage("plan", self.plan)
        # before this run's probe, the newest probe of the same nodes gives the prior
        expected = self.stage("estimate", lambda: self.estimate(plan.todo, recent=True))
        if self.options.dry_run:
            return dry_run(self, plan.todo, expected)
        check_limit(expected, self.options.max_hours)
        if not plan.todo:
            print("run %s: nothing left to run (--retry-failed or --force run cells again)"
                  % self.run_id)
            return {"run_id": self.run_id, "path": self.path, "outcomes": {}}
        self.stage("preflight", lambda: self.preflight(plan.todo))
        self.stage("open", lambda: self.open(plan))
        self.probe = self.stage("probe", lambda: self.probe_contention(plan.todo))
        expected = self.estimate(plan.todo)  # with the probe just measured: a prior
        print(estimate.summary(*expected), flush=True)
        self.seconds = {cell.id: s for cell, s, _ in expected[0]}
        return self.stage("cells", lambda: self.run_cells(plan.todo))

    def stage(self, name, work):
        return self.hooks.around(name, self, work)

    def plan(self):
        """hooks.Plan: a resumed run's cells from its manifest, a new run's from the options,
        in an order drawn from a seed of its id."""
        if self.resuming:
            return hooks.Plan(*resume.plan(self.path, self.options))
        seed = matrix.order_seed(self.run_id)
        cells = plan_cells(self.options, len(self.inventory.hosts), links.check(
            self.inventory, self.options.network), self.stacks.names, seed)
        return hooks.Plan(cells, cells, seed)

    def estimate(self, todo, recent=False):
        """estimate.plan_seconds of the cells: from earlier runs, else a prior from the run's
        probe (recent: the newest probe of the same nodes)."""
        probe = contention.last_measured(*probe_nodes(self.nodes, self.stacks, todo)) \
            if recent and todo else self.probe
        return estimate.plan_seconds(todo, self.basis, probe, self.stacks.names[0])

    def preflight(self, todo):
        for stack in self.stacks:
            preflight.check(self.nodes, stack, [c for c in todo if self.stacks.of(c) is stack],
                            self.inventory)
        if self.inventory.layout():
            print("layout: %s" % self.inventory.layout(), flush=True)
        return todo

    def open(self, plan):
        """A new run's folder with its manifest and every cell pending; a resumed run's cells
        to run again stopped where a dead controller left them and set aside."""
        if self.resuming:
            resume.prepare(self.path, plan.todo, self.nodes)
            return self.path
        self.path.mkdir(parents=True, exist_ok=True)
        run_manifest.start_manifest(self.path, self.inventory, self.stacks, self.options.size,
                               plan.cells, dict(self.options.manifest(),
                                                order_seed=plan.order_seed),
                               link_mbit=links.link_mbits(self.inventory, plan.cells))
        print("run %s: %d cell(s) -> %s" % (self.run_id, len(plan.cells), self.path),
              flush=True)
        for cell in plan.cells:
            self.save(CellStatus(cell.id))
        return self.path

    def probe_contention(self, todo):
        """The contention probe on the run's nodes (or one of the same nodes minutes ago), kept
        in the manifest; the setup section and the verdicts read it."""
        measured = contention.measured_or_recent(*probe_nodes(self.nodes, self.stacks, todo))
        print(contention.describe(measured), flush=True)
        manifest = self.folder.manifest()
        manifest["contention"] = measured
        self.folder.write_manifest(manifest)
        return measured

    def run_cells(self, cells):
        """Each cell in turn; returns {run_id, path, outcomes}. Whatever ends the loop, the
        close stage runs."""
        outcomes, began = {}, time.monotonic()
        tally = {"done": 0, "failed": 0, "disturbed": 0}
        interrupts.install()  # Ctrl-C, `kill` or a CI timeout: stop the cell, clean up, keep data
        try:
            for index, cell in enumerate(cells, 1):
                interrupts.check()
                so_far = self._after(cells[index:], index=index, total=len(cells), began=began,
                                     **tally)
                print(so_far.text(), flush=True)
                outcomes[cell.id] = pipeline.run_cell(self, cell, so_far)
                self._count(tally, cell.id, outcomes[cell.id])
                if not self._go_on(outcomes[cell.id], len(cells) - index):
                    break
        except KeyboardInterrupt:
            print("\ninterrupted: the running cell was stopped on every node and marked failed "
                  "(interrupted); resume with `invoke bench --run %s`" % self.run_id, flush=True)
            raise
        finally:
            interrupts.restore()
            self.stage("close", self.close)
        failed = [cid for cid, s in outcomes.items() if s != "succeeded"]
        print("run %s: %d succeeded, %d failed; results in %s"
              % (self.run_id, len(outcomes) - len(failed), len(failed), self.path))
        return {"run_id": self.run_id, "path": self.path, "outcomes": outcomes}

    def close(self):
        run_manifest.keep_slurm_accounting(self.path)
        run_manifest.finish_manifest(self.path, self.nodes)
        run_records.build_records(self.path)
        for node in self.nodes:
            node.close()
        return self.path

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

    def bounds(self, cell):
        """The cell's stall bounds, from its estimate (an earlier run's, else the prior)."""
        return stall.Bounds.for_cell(
            cell, self.basis.get(estimate.key(cell.settings, self.stacks.of(cell).name)) or
            estimate.prior(cell, self.probe), estimate.slowness(self.probe))

    def save(self, status):
        self.folder.save_status(status, time.time())


def run_stacks(options, path, resuming):
    """The stacks of the run: a resumed run's from its manifest (--stack and --stacks may not
    change them), a new run's from the options."""
    if not resuming:
        return options.stack_names()
    names = manifests.stack_names(RunFolder(path).manifest())
    if options.stacks and options.stack_names() != names:
        raise UserError("run %s runs under %s: --stacks %s would plan others"
                        % (path.name, ",".join(names), options.stacks),
                        "leave --stacks out to resume it, or start a new run (no --run)")
    return names


def plan_cells(options, hosts, networks=None, stack_names=None, order_seed=None):
    """The cells of a new run on `hosts` nodes, from bench's options, each under each stack,
    in the order drawn from order_seed (None: the matrix's own order)."""
    return matrix.plan(options.size, hosts, options.choice(
        provision.node_counts(options.nodes, hosts), networks, order_seed,
        stacks_apart(stack_names or options.stack_names())))


def stacks_apart(names):
    """The stacks that cells name: those of a run of several; a run of one stack plans cells
    that name none (their ids stay what they were)."""
    return names if len(names) > 1 else None


def probe_nodes(nodes, stacks, cells):
    """(the nodes the cells use, node name -> the python the probe runs under: the first
    cell's env)."""
    env = stacks.of(cells[0]).env(cells[0].framework)
    used = nodes[:max(c.nodes for c in cells)]
    return used, {n.name: env.python(n.path(n.host.env_root)) for n in used}


def check_limit(expected, max_hours):
    """--max-hours: refuse, before anything starts, a plan expected to take longer, or one
    whose duration cannot be told."""
    if max_hours is None:
        return
    rows, total = expected
    unknown = [cell.id for cell, seconds, _ in rows if seconds is None]
    if unknown:
        raise UserError("--max-hours %g: %d cell(s) have no estimate yet (e.g. %s)"
                        % (max_hours, len(unknown), unknown[0]),
                        "run `invoke estimate` with the same options first, or drop "
                        "--max-hours")
    if total > max_hours * 3600:
        raise UserError("the plan is expected to take %s, over --max-hours %g"
                        % (estimate.duration(total), max_hours),
                        "narrow it (--benchmarks, --systems, --size verdict) or raise "
                        "--max-hours; `invoke bench --dry-run` lists each cell's estimate")


def dry_run(run, cells, expected):
    """Print the cells, their expected durations and each node's script exactly as a run
    renders it; changes nothing on any node (it only asks each its home directory, for `~/`
    paths)."""
    print("%d cell(s)%s:" % (len(cells), " in the order drawn for run %s (`--run %s` runs "
                                          "them in this order)" % (run.run_id, run.run_id)
                             if any(c.repeat for c in cells) else ""))
    for cell in cells:
        print("  %s  %s x %d nodes, %d epoch(s) x %d steps, local batch %d, data %s, stack %s%s"
              % (cell.id, cell.system, cell.nodes, cell.epochs, cell.steps_per_epoch,
                 cell.local_batch, cell.data, run.stacks.of(cell).name,
                 ", links %s" % cell.link if cell.link else ""))
    print("\n".join(["expected durations (from earlier runs on this inventory and stacks, or a "
                     "prior from the newest contention probe of these nodes):"]
                    + estimate.describe(*expected) + repeats_note(cells, *expected)))
    for cell in cells:
        shards = {"id": datasets.dataset_id(cell.dataset, cell.data),
                  "classes": datasets.spec(cell.dataset).classes,
                  "label_bytes": datasets.spec(cell.dataset).label_bytes}
        for proc in launch.prepare(cell, run.run_id, run.nodes, run.stacks.of(cell), shards):
            print("\n# ---- %s: %s ----\n%s" % (cell.id, proc.label, proc.script), end="")
    return {"run_id": run.run_id, "cells": cells}


def repeats_note(cells, rows, total):
    """A plan of one repeat: what it will not measure, and what 3 repeats would cost ("no
    basis" where a cell has no estimate: a sum without it would be a time the plan does not
    have)."""
    if not cells or any(cell.repeat for cell in cells):
        return []
    unknown = sum(1 for _, seconds, _ in rows if seconds is None)
    cost = "about %s" % estimate.duration(3 * total) if not unknown else \
        "no basis to say how long (%d cell(s) without an estimate: `invoke estimate`)" % unknown
    return ["1 repeat: run-to-run variation will not be measured (the newest `invoke "
            "interval-check` on this CPU supplies it; without one every verdict will be "
            "indicative); --repeats 3: %s" % cost]
