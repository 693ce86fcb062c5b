"""The user's four words, each one call from tasks.py."""
import contextlib
import dataclasses
import io
import os
import time
from pathlib import Path

from .results import collect
from .run import contention, launch, pipeline, preflight, resume, stall
from .nodes import datasets, inventory, access as nodes_mod, provision
from .nodes import stacks as stacks_mod
from .plan import estimate, matrix
from .plan.options import BenchOptions, ProvisionOptions
from .clusters import links, slurm_jobs
from contract.errors import UserError, incomplete_cells
from contract.explain_plan import PLAN as EXPLAIN_PLAN
from contract import manifest as manifests, runfolder
from contract.runfolder import CellStatus, RunFolder


def bench(options):
    """`invoke bench`. options: a BenchOptions (harness/plan/options.py): tasks.py fills it from
    the command line, the package's own callers by name (bench_named). --partition, --sbatch,
    --submit: --inventory slurm from outside an allocation (harness/clusters/slurm_jobs.py)."""
    if options.sbatch or options.submit or (options.partition and
                                            not os.environ.get("SLURM_JOB_ID")):
        slurm = SlurmRequest(options)
        if options.sbatch or options.submit:
            return slurm.write_batch()
        with slurm_jobs.allocated(options.partition, *slurm.size()):
            return _bench_on(dataclasses.replace(options, run=slurm.run_id))
    return _bench_on(options)


def bench_named(inventory_name, stack_name, size, results, **given):
    """bench for the package's own callers: the four names every run needs, the rest of
    BenchOptions by name."""
    return bench(BenchOptions.given(inventory=inventory_name, stack=stack_name, size=size,
                                    results=results, **given))


def _bench_on(options):
    """bench on the inventory's nodes (for --inventory slurm: the allocation's)."""
    # a bad setting stops the run before it starts
    stall.frozen_seconds(), launch.base_lease(), launch.calibration_seconds()
    inv = inventory.load(options.inventory)
    nodes = nodes_mod.connect_all(inv)
    run_id = options.run or collect.new_run_id()
    path = Path(options.results) / run_id
    resuming = options.run is not None and RunFolder(path).exists()  # a dry run shows it
    stacks = stacks_mod.RunStacks.load(run_stacks(options, path, resuming))
    cells, todo = _cells(options, inv, path, resuming, stacks.names)
    basis = estimate.history(options.results, inv.name, stacks.names)
    # before this run's probe, the newest probe of the same nodes gives the prior
    expected = estimate.plan_seconds(todo, basis, todo and contention.last_measured(
        *probe_nodes(nodes, stacks, todo)), stacks.names[0])
    if options.dry_run:
        return _dry_run(todo, run_id, nodes, stacks, expected)
    _check_limit(expected, options.max_hours)
    if not todo:
        print("run %s: nothing left to run (--retry-failed or --force run cells again)" % run_id)
        return {"run_id": run_id, "path": path, "outcomes": {}}
    for stack in stacks:
        preflight.check(nodes, stack, [c for c in todo if stacks.of(c) is stack], inv)
    if inv.layout():
        print("layout: %s" % inv.layout(), flush=True)
    if resuming:
        resume.prepare(path, todo, nodes)
    else:
        _start_run(path, inv, stacks, cells, options)
    probe = probe_contention(path, nodes, stacks, todo)
    expected = estimate.plan_seconds(todo, basis, probe, stacks.names[0])  # never run: a prior
    print(estimate.summary(*expected), flush=True)
    return pipeline.Run(path, run_id, nodes, stacks, options, basis, probe,
                        expected[0]).run_cells(todo)


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


def _cells(options, inv, path, resuming, stack_names):
    """(every cell of the run, the cells to run now): a resumed run's from its manifest, a
    new run's planned (or a hook's: invoke explain's rounds), those the hooks choose."""
    if resuming:
        cells, todo = resume.plan(path, options)
    else:
        networks = links.check(inv, options.network)
        given = pipeline.planned(options.hooks)
        # in the manifest; cells given (invoke explain's rounds) keep their order: no seed
        options.order_seed = None if given else matrix.order_seed(path.name)
        cells = todo = given or plan_cells(options.size, len(inv.hosts), options, networks,
                                           stack_names)
    return cells, pipeline.chosen(options.hooks, todo)


def plan_cells(profile, hosts, options, networks=None, stack_names=None):
    """The cells of a new run on `hosts` nodes, from bench's options, each under each stack."""
    return matrix.plan(profile, hosts, benchmarks=options.benchmarks, systems=options.systems,
                       epochs=options.epochs, steps=options.steps, data=options.data,
                       repeats=options.repeats, networks=networks,
                       order_seed=options.order_seed,
                       node_counts=provision.node_counts(options.nodes, hosts),
                       profile_steps=options.profile_steps,
                       environment=options.environment, threads=options.threads or 0,
                       stacks=stacks_apart(stack_names or options.stack_names()))


def stacks_apart(names):
    """The stacks that cells name: those of a run of several; a run of one stack plans cells
    that name none (their ids stay what they were)."""
    return names if len(names) > 1 else None


class SlurmRequest:
    """A plan to run through Slurm from outside an allocation: how many nodes and how long to
    ask for, and the batch script that runs it."""

    def __init__(self, options):
        self.options, self.results = options, Path(options.results)
        self.run_id = options.run or collect.new_run_id()
        self.path = self.results / self.run_id

    def size(self):
        """(nodes, minutes): the plan's largest node count (the paper's 3 by default), and
        its expected time x 1.5 + 10 min, counting a cell with no estimate at its timeout."""
        if RunFolder(self.path).exists():
            cells, todo = resume.plan(self.path, self.options)
        else:
            counts = self.options.nodes
            most = max(int(k) for k in str(counts).split(",")) if counts else 3
            todo = cells = plan_cells(self.options.size, most, self.options)
        rows, _ = estimate.plan_seconds(todo, estimate.history(
            self.results, self.options.inventory, self.options.stack_names()), None,
            self.options.stack_names()[0])
        return max(c.nodes for c in cells), slurm_jobs.time_limit_minutes(rows)

    def bench_args(self, choosing):
        return ["--inventory", self.options.inventory, "--stack", self.options.stack,
                "--stacks", ",".join(self.options.stack_names()),
                "--size", self.options.size, "--results", str(self.results.resolve())] + \
            self.options.command_line(choosing)

    def write_batch(self):
        partition, submit = self.options.partition, self.options.submit
        nodes, minutes = self.size()
        self.results.mkdir(parents=True, exist_ok=True)
        script = self.results / ("%s.sbatch" % self.run_id)
        script.write_text(slurm_jobs.batch_script(
            self.run_id, nodes, minutes, partition, self.bench_args(True),
            self.bench_args(False), self.results))
        print("batch script: %s (%d node(s), up to %s); submit it with `sbatch %s`"
              % (script, nodes, slurm_jobs.slurm_time(minutes), script), flush=True)
        if submit:
            job = slurm_jobs.submit(script)
            print("submitted: job %s (`squeue -j %s`); then `invoke collect --run %s`"
                  % (job, job, self.run_id), flush=True)
        return {"run_id": self.run_id, "script": script}


def _check_limit(expected, max_hours):
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


def probe_contention(path, nodes, stacks, cells):
    """The contention probe on the run's nodes (or one of the same nodes minutes ago), kept
    in the manifest; the setup section and the verdicts read it."""
    measured = contention.measured_or_recent(*probe_nodes(nodes, stacks, cells))
    print(contention.describe(measured), flush=True)
    run = RunFolder(path)
    manifest = run.manifest()
    manifest["contention"] = measured
    run.write_manifest(manifest)
    return measured


def probe_nodes(nodes, stacks, cells):
    """(the nodes the cells use, node name -> the python the probe runs under: the first
    cell's env)."""
    env = stacks.of(cells[0]).env(cells[0].framework)
    used = nodes[:max(c.nodes for c in cells)]
    return used, {n.name: env.python(n.path(n.host.env_root)) for n in used}


def _start_run(path, inv, stacks, cells, options):
    path.mkdir(parents=True, exist_ok=True)
    collect.start_manifest(path, inv, stacks, options.size, cells, options.manifest(),
                           link_mbit=links.link_mbits(inv, cells))
    print("run %s: %d cell(s) -> %s" % (path.name, len(cells), path), flush=True)
    for cell in cells:
        _write_status(path, cell, CellStatus(cell.id))


def unfinished(outcome):
    """What keeps a bench's run from being whole ('2 failed, 1 disturbed'), over every cell of
    its folder (a resume's earlier cells too), or '' (and for a dry run or a batch script)."""
    if not isinstance(outcome, dict) or not outcome.get("path"):
        return ""
    return incomplete_cells(RunFolder(outcome["path"]).statuses())


def _write_status(path, cell, status):
    RunFolder(path).save_status(status, time.time())


def _dry_run(cells, run_id, nodes, stacks, expected):
    """Print the cells, their expected durations and each node's script exactly as a run
    renders it; changes nothing on any node (it only asks each its home directory, for `~/`
    paths)."""
    print("%d cell(s)%s:" % (len(cells), " in the order drawn for run %s (`--run %s` runs "
                                          "them in this order)" % (run_id, run_id)
                             if any(c.repeat for c in cells) else ""))
    for cell in cells:
        print("  %s  %s x %d nodes, %d epoch(s) x %d steps, local batch %d, data %s, stack %s%s"
              % (cell.id, cell.system, cell.nodes, cell.epochs, cell.steps_per_epoch,
                 cell.local_batch, cell.data, stacks.of(cell).name,
                 ", links %s" % cell.link if cell.link else ""))
    print("\n".join(["expected durations (from earlier runs on this inventory and stacks, or a "
                     "prior from the newest contention probe of these nodes):"]
                    + estimate.describe(*expected) + repeats_note(cells, *expected)))
    for cell in cells:
        shards = {"id": datasets.dataset_id(cell.dataset, cell.data),
                  "classes": datasets.spec(cell.dataset).classes,
                  "label_bytes": datasets.spec(cell.dataset).label_bytes}
        for proc in launch.prepare(cell, run_id, nodes, stacks.of(cell), shards):
            print("\n# ---- %s: %s ----\n%s" % (cell.id, proc.label, proc.script), end="")
    return {"run_id": run_id, "cells": cells}


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


def collect_run(inventory_name, results, run_id=None):
    path = collect.run_dir(results, run_id)
    collect.check_format(path)
    run = RunFolder(path)
    nodes = nodes_mod.connect_all(inventory.for_collect(inventory_name, run.manifest()))
    fetched = 0
    for status in run.statuses():
        if status.get("processes"):
            fetched += collect.fetch_cell(path, status, nodes)
    collect.keep_slurm_accounting(path)
    collect.finish_manifest(path, nodes)
    records = collect.build_records(path)
    print("collected %s: %d files, %d records -> %s"
          % (path.name, fetched, len(records), run.records_path))
    return path


def analyze(results, run_id=None):
    """A run's report; or, given an explain folder (explain-<id>), its result rebuilt from the
    plan and the runs it names, as `invoke explain` built it."""
    if run_id and (Path(results) / run_id / EXPLAIN_PLAN).is_file():
        from analysis import explain
        return explain.build(Path(results) / run_id)
    from analysis import report  # heavy imports (pandas, matplotlib) only when analysing

    path = collect.run_dir(results, run_id)
    collect.check_format(path)
    RunFolder(path).require_records()
    return report.build(path)


def compare(results, run_a, run_b, out=None):
    """Two collected runs side by side (analysis/compare.py)."""
    from analysis import compare as comparison  # heavy imports only when analysing

    paths = []
    for run_id in (run_a, run_b):
        path = collect.run_dir(results, run_id)
        collect.check_format(path)
        RunFolder(path).require_records()
        paths.append(path)
    if paths[0] == paths[1]:
        raise UserError("compare needs two different runs (both are %s)" % paths[0].name,
                        "name two run ids: `invoke compare RUN_A RUN_B`")
    return comparison.build(paths[0], paths[1], out)


def attach_explain(results, run_id, explain_path):
    """Copy an explain result into a run's folder and analyze the run again: its claims table
    gets the column "what moves it"."""
    import shutil
    path = runfolder.find(results, run_id)
    shutil.copy(str(Path(explain_path) / runfolder.EXPLAIN), str(path / runfolder.EXPLAIN))
    return analyze(results, path.name)


def reproduce(inventory_name, stack_names, profile, results, data=None, timeout=None):
    """provision, bench, collect and analyze, every cell under each of stack_names; timeout:
    bench's --timeout (seconds before a cell is stopped; None: the size's)."""
    from .nodes import provision

    began = time.monotonic()
    stacks = ",".join(stack_names)
    if provisioned_already(inventory_name, stacks, profile, data):
        print("provisioned already: pre-flight finds every node ready for this run (envs, "
              "this code, the shards, the ports); `invoke provision` to provision anyway",
              flush=True)
    else:
        provision.run(ProvisionOptions(inventory=inventory_name, stack=stack_names[0],
                                       stacks=stacks, size=profile, data=data))
    outcome = bench_named(inventory_name, stack_names[0], profile, results, data=data,
                          stacks=stacks, timeout=timeout)
    collect_run(inventory_name, results, outcome["run_id"])
    built = analyze(results, outcome["run_id"])
    print("\nreproduce finished in %.0f s\n  report:  %s\n  figures: %s\n  results: %s"
          % (time.monotonic() - began, built["report"], " ".join(built["figures"]),
             outcome["path"]))
    if built.get("layout"):
        print("  layout:  %s" % built["layout"])
    for text in built.get("against_paper") or []:
        print("  against the paper: %s" % text)
    print("  claims:  %s" % built.get("verdicts"))
    if built.get("disturbed"):
        print("  disturbed: %s" % built["disturbed"])
    built.update(unfinished=unfinished(outcome), run_id=outcome["run_id"])
    return built


def provisioned_already(inventory_name, stacks, size, data):
    """Whether bench's own pre-flight passes on the nodes for a new run of this size, as it
    would after provisioning: then reproduce need not provision again (about 20 s of Ansible
    finding nothing to change). False wherever anything is amiss, the reason left to
    provisioning and the pre-flight after it to say."""
    options = BenchOptions.given(inventory=inventory_name, stack=stacks.split(",")[0],
                                 stacks=stacks, size=size, results="", data=data)
    try:
        inv = inventory.load(inventory_name)
        nodes = nodes_mod.connect_all(inv)
        names = options.stack_names()
        _, todo = _cells(options, inv, Path(collect.new_run_id()), False, names)
        run_stacks = stacks_mod.RunStacks.load(names)
        for stack in run_stacks:
            with contextlib.redirect_stdout(io.StringIO()):
                preflight.check(nodes, stack, [c for c in todo if run_stacks.of(c) is stack])
    except UserError:
        return False
    return True


def estimate_run(options):
    """`invoke estimate` (options: harness/plan/options.py EstimateOptions): every cell of the
    plan for a few steps, no profiled steps, in a run
    of its own (estimate-<time>): the basis of later estimates (harness/plan/estimate.py)."""
    run_id = "estimate-%s" % collect.new_run_id()
    return bench_named(options.inventory, options.stack, options.size, options.results,
                       run=run_id, benchmarks=options.benchmarks, systems=options.systems,
                       data=options.data, epochs=1, steps=estimate.ESTIMATE_STEPS,
                       profile_steps=0, repeats=1)


