"""The user's four words, each one call from tasks.py."""
import contextlib
import dataclasses
import io
import os
import sqlite3
import time
from pathlib import Path

from .results import fetch, run_manifest, run_records
from .run import lifecycle, preflight, resume
from .nodes import datasets, inventory, access as nodes_mod, provision
from .nodes import stacks as stacks_mod
from .plan import estimate, matrix
from .plan.options import BenchOptions, ProvisionOptions
from .clusters import links, slurm_jobs
from contract.errors import UserError, incomplete_cells
from contract.explain_plan import PLAN as EXPLAIN_PLAN
from contract import ledger as ledger_schema, manifest as manifests, runfolder
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
        with slurm_jobs.allocated(options.partition, *slurm.allocation()):
            return _bench_on(dataclasses.replace(options, run=slurm.run_id))
    return _bench_on(options)


def _bench_on(options):
    """bench on the inventory's nodes (for --inventory slurm: the allocation's): a run that
    exists resumed, else a new one started."""
    path = Path(options.results) / (options.run or "")
    if options.run and RunFolder(path).exists():
        return lifecycle.Run.resume(path, options)
    return lifecycle.Run.start(options)


def bench_named(inventory_name, stack_name, size, results, **given):
    """bench for the package's own callers: the four names every run needs, the rest of
    BenchOptions by name."""
    return bench(BenchOptions.given(inventory=inventory_name, stack=stack_name, size=size,
                                    results=results, **given))


class SlurmRequest:
    """A plan to run through Slurm from outside an allocation: how many nodes and how long to
    ask for, and the batch script that runs it."""

    def __init__(self, options):
        self.options, self.results = options, Path(options.results)
        self.run_id = options.run or run_manifest.new_run_id()
        self.path = self.results / self.run_id

    def allocation(self):
        """(nodes, minutes) to ask Slurm for: the plan's largest node count (the paper's 3 by default), and
        its expected time x 1.5 + 10 min, counting a cell with no estimate at its timeout."""
        if RunFolder(self.path).exists():
            cells, todo = resume.plan(self.path, self.options)
        else:
            counts = self.options.nodes
            most = max(int(k) for k in str(counts).split(",")) if counts else 3
            todo = cells = lifecycle.plan_cells(self.options, most)
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
        nodes, minutes = self.allocation()
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


def unfinished(outcome):
    """What keeps a bench's run from being whole ('2 failed, 1 disturbed'), over every cell of
    its folder (a resume's earlier cells too), or '' (and for a dry run or a batch script)."""
    if not isinstance(outcome, dict) or not outcome.get("path"):
        return ""
    return incomplete_cells(RunFolder(outcome["path"]).statuses())


def collect_run(inventory_name, results, run_id=None, default_inventory=None):
    """Fetch the run's files from its nodes and build its records. inventory_name None: the
    inventory the run recorded, where it is still there (else default_inventory)."""
    path = run_manifest.run_dir(results, run_id)
    run_manifest.check_format(path)
    run = RunFolder(path)
    chosen = inventory_name or inventory.recorded(run.manifest()) or default_inventory
    nodes_of = inventory.for_collect(chosen, run.manifest())
    if not inventory_name:
        print("collecting %s with inventory %s (%s)" % (
            path.name, nodes_of.name, "the one it was run with" if chosen != default_inventory
            else "the default: the run's own is not there"), flush=True)
    inventory.check_has_run_nodes(nodes_of, run.statuses(), path.name, run.manifest())
    nodes = nodes_mod.connect_all(nodes_of)
    fetched = 0
    for status in run.statuses():
        if status.get("processes"):
            fetched += fetch.fetch_cell(path, status, nodes)
    run_manifest.keep_slurm_accounting(path)
    run_manifest.finish_manifest(path, nodes)
    records = run_records.build_records(path)
    print("collected %s: %d files, %d records -> %s"
          % (path.name, fetched, len(records), run.records_path))
    return path


def analyze(results, run_id=None, ledger=None):
    """A run's report, and the run added to the ledger (contract/ledger.py; `ledger`, or the
    results folder's); or, given an explain folder (explain-<id>), its result rebuilt from the
    plan and the runs it names, as `invoke explain` built it."""
    if run_id and (Path(results) / run_id / EXPLAIN_PLAN).is_file():
        from analysis import explain
        return explain.build(Path(results) / run_id)
    from analysis import report  # heavy imports (pandas, matplotlib) only when analysing

    path = run_manifest.run_dir(results, run_id)
    run_manifest.check_format(path)
    RunFolder(path).require_records()
    ledger = ledger or ledger_path(results)
    built = report.build(path, ledger=Path(ledger))
    add_to_ledger(path, ledger, again=True)
    return built


def ledger_path(results):
    return str(Path(results) / ledger_schema.FILE)


def add_to_ledger(path, ledger, again=False):
    """The analysed run into the ledger, once (`again`: analysed anew, resumed or by a newer
    analysis, its rows replaced): says which. A fault of the ledger's own is said and leaves the
    report as it is (the run's folder keeps everything the ledger reads: `invoke ledger.add
    --run RUN` adds it later)."""
    from analysis import ledger as ledgers
    try:
        key, how = ledgers.add(path, ledger, again=again)
    except (sqlite3.Error, OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        print("ledger: run %s was not added to %s (%s: %s); its report is written, and "
              "`invoke ledger.add --run %s` adds it" % (Path(path).name, ledger,
                                                       type(exc).__name__, exc,
                                                       Path(path).name), flush=True)
        return
    said = {"added": "added to", "replaced": "read again: its earlier rows replaced in",
            "already": "already in"}[how]
    print("ledger: run %s %s %s (key %s)" % (Path(path).name, said, ledger, key), flush=True)


def compare(results, run_a, run_b, out=None):
    """Two collected runs side by side (analysis/compare.py)."""
    from analysis import compare as comparison  # heavy imports only when analysing

    paths = []
    for run_id in (run_a, run_b):
        path = run_manifest.run_dir(results, run_id)
        run_manifest.check_format(path)
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


def reproduce(options):
    """provision, bench, collect, analyze (options: harness/plan/options.py ReproduceOptions,
    every option of the steps), every cell under each stack of the options."""
    from .nodes import provision

    began = time.monotonic()
    bench_options = options.bench_options()
    if provisioned_already(bench_options):
        print("provisioned already: pre-flight finds every node ready for this run (envs, "
              "this code, the shards, the ports); `invoke provision` to provision anyway",
              flush=True)
    else:
        provision.run(options.provision_options())
    outcome = bench(bench_options)
    collect_run(options.inventory, options.results, outcome["run_id"])
    built = analyze(options.results, outcome["run_id"])
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


def provisioned_already(options):
    """Whether bench's own pre-flight passes on the nodes for a new run of bench's options, as
    it would after provisioning: then reproduce need not provision again (about 20 s of
    Ansible finding nothing to change). False wherever anything is amiss (a run to resume
    too), the reason left to provisioning and the pre-flight after it to say."""
    try:
        if options.run and RunFolder(Path(options.results) / options.run).exists():
            return False
        inv = inventory.load(options.inventory)
        nodes = nodes_mod.connect_all(inv)
        names = options.stack_names()
        todo = lifecycle.plan_cells(options, len(inv.hosts), links.check(inv, options.network),
                                    names)
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
    run_id = "estimate-%s" % run_manifest.new_run_id()
    return bench_named(options.inventory, options.stack, options.size, options.results,
                       run=run_id, benchmarks=options.benchmarks, systems=options.systems,
                       data=options.data, epochs=1, steps=estimate.ESTIMATE_STEPS,
                       profile_steps=0, repeats=1)


