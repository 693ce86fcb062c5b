"""The user's words: `invoke provision bench collect analyze` (and `reproduce` for all four).

Options in, one call into harness/, nothing else. Defaults come from invoke.yaml.
"""
import functools
import inspect
import sys
from types import SimpleNamespace

import invoke
from invoke import Collection, Exit

import registry
from harness.plan import options, task_options as more
from harness.plan.options import BenchOptions
from harness.plan.task_options import built, listed


class _Task(invoke.Task):
    """Invoke's task, whose automatic short flags follow conventions: `-h` is help alone, and
    a short flag is a letter (Invoke otherwise takes the next character of the name that is
    free, which gave --sbatch `-h` and --retry-failed a bare `--`)."""

    def arg_opts(self, name, default, taken_names):
        return super().arg_opts(name, default, set(taken_names) | set("h-_0123456789"))


def task(*args, **kwargs):
    return invoke.task(*args, klass=_Task, **kwargs)


def _options(c, **given):
    """The task's options, each one not given (None) taken from invoke.yaml's `dlbench`
    section: the one place where defaults are merged."""
    defaults = c.config.get("dlbench", {})
    return SimpleNamespace(**{k: defaults.get(k) if v is None else v for k, v in given.items()})


# --profile, the old name of --size: taken here alone, with a notice ('profile' means the
# operator profile everywhere else: docs/glossary.md)
OLD_SIZE = "profile"
OLD_SIZE_HELP = ("the old name of --size, kept for now ('profile' now means operator profiles "
                 "only)")


def _size(size, profile):
    """--size, or its old name --profile with a notice: one word per concept (docs/glossary.md)."""
    if profile is None:
        return size
    print("notice: --profile is now --size (a run's size); --profile works for now",
          file=sys.stderr)
    return profile if size is None else size


def _command_line(options_type):
    """(name, default, help) of a task's options: its dataclass's fields that have help, and
    the old name of --size after --size."""
    out = []
    for f in options.on_command_line(options_type):
        default = inspect.Parameter.empty if f.metadata.get("required") else f.default
        out.append((f.name, default, _help(f.metadata["help"])))
        if f.name == "size":
            out.append((OLD_SIZE, None, OLD_SIZE_HELP))
    return out


def _user_errors(function):
    """Expected problems print their cause and fix, no traceback, and exit 2."""
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        from contract.errors import EXIT_INTERRUPTED, UserError
        try:
            return function(*args, **kwargs)
        except UserError as exc:
            raise Exit("error: %s" % exc, code=exc.exit_code)
        except KeyboardInterrupt:  # Ctrl-C or SIGTERM, after cleanup: no traceback
            raise Exit("interrupted", code=EXIT_INTERRUPTED)
    return wrapper


def _exit_unless_whole(unfinished, run_id):
    """Exit 3 when cells of the run failed, were disturbed or are pending (contract/errors.py
    lists the codes): a script or a batch job can tell a whole run from one that is not."""
    from contract.errors import EXIT_INCOMPLETE
    if unfinished:
        raise Exit("incomplete: run %s has %s cell(s); what was measured is kept (the report "
                   "lists them); `invoke bench --run %s --retry-failed` runs the failed again"
                   % (run_id, unfinished, run_id), code=EXIT_INCOMPLETE)


def _listed():
    """What the help texts list, read from the repository (stacks/, inventory/, the sizes
    and benchmarks), so that they cannot lag behind it."""
    from bench.common import samemath
    from harness.nodes import inventory
    from harness.plan import matrix
    from harness.paths import STACKS
    files = sorted(p.stem for p in inventory.INVENTORIES.glob("*.yml"))
    return SimpleNamespace(
        stacks=", ".join(sorted(p.stem for p in STACKS.glob("*.yml"))),
        inventories=", ".join(files + ["%s (written by `%s`)" % (name, how) for name, how
                                       in sorted(inventory.GENERATED.items())
                                       if name not in files]),
        benchmarks=",".join(matrix.BENCHMARKS), planted_list=", ".join(samemath.PLANTED),
        frameworks=",".join(registry.frameworks()), vm_smoke=registry.vm_smoke(),
        profile_steps=", ".join("%s %d" % (name, size.profile_steps)
                                for name, size in matrix.SIZES.items()),
        local_batch=matrix.LOCAL_BATCH, verdict_repeats=matrix.SIZES["verdict"].repeats,
        paper_and_today=",".join(matrix.PAPER_AND_TODAY),
        systems=",".join(registry.systems()),
        **{name: matrix.shape(name) for name in ("smoke", "quick", "verdict", "paper")})


LISTED = _listed()


def _help(text):
    """A help text with what the repository lists filled in."""
    return text.format(**vars(LISTED))


def _options_task(options_type, **task_args):
    """A task whose command-line options are options_type's fields that have help (Invoke
    reads the signature built here); the body gets them whole, as a dict: function(c, given).
    An option is so declared once, in its dataclass (harness/plan/options.py)."""
    def decorate(function):
        on_line = _command_line(options_type)
        parameters = [inspect.Parameter("c", inspect.Parameter.POSITIONAL_OR_KEYWORD)] + [
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default)
            for name, default, _ in on_line]

        @functools.wraps(function)
        def body(c, **given):
            _refuse_help_as_value(given, function.__name__, task_args.get("name"))
            return function(c, given)
        body.__signature__ = inspect.Signature(parameters)
        del body.__wrapped__  # Invoke reads the signature above, not function's
        made = task(help={name: text for name, _, text in on_line},
                    **task_args)(_user_errors(body))
        made.options_type = options_type
        return made
    return decorate


def _refuse_help_as_value(given, function_name, name):
    """Invoke reads the word after a task with a required option as that option's value, so
    `invoke compare --help` would look for a run called --help: say where the help is."""
    if any(v in ("-h", "--help") for v in given.values()):
        from contract.errors import UserError
        group = function_name.split("_")[0]
        shown = "%s.%s" % (group, name) if name and function_name.startswith(
            ("ledger_", "cluster_", "vagrant_")) else name or function_name.replace("_", "-")
        raise UserError("--help was read as the value of one of %s's options (Invoke does "
                        "that after a task with a required option)" % shown,
                        "`invoke --help %s` shows its help" % shown)


def _where(c, given):
    """given with --size (or its old name --profile) and the inventory, stack and results
    folder taken from invoke.yaml where not given (by _options); where neither --stack nor
    --stacks is given, the stacks of its size (matrix.PAPER_AND_TODAY for those that measure)."""
    out = dict(given)
    if "size" in out:
        out["size"] = _size(out["size"], out.pop(OLD_SIZE, None))
    chose_stacks = bool(out.get("stack") or out.get("stacks"))
    named = {k: out[k] for k in ("inventory", "stack", "results", "size") if k in out}
    out.update(vars(_options(c, **named)))
    if "stacks" in out and not chose_stacks:
        from harness.plan import matrix
        size = matrix.SIZES.get(out.get("size"))
        out["stacks"] = ",".join(size.stacks if size else ()) or None
    return out



@_options_task(options.ProvisionOptions)
def provision(c, given):
    """Build the framework envs, install bench/, push dataset shards, record host facts."""
    from harness.nodes import provision as prov
    prov.run(options.ProvisionOptions(**_where(c, given)))


@_options_task(BenchOptions)
def bench(c, given):
    """Run the matrix (or resume a run): one cell at a time on every node at once, watched,
    stopped by pid. Exits 0 when every cell is measured and usable, 2 when it refused to start
    (bad input; pre-flight), 3 when cells failed, were disturbed or are pending, 130 when
    interrupted."""
    from harness import commands
    outcome = commands.bench(BenchOptions.parsed(**_where(c, given)))
    _exit_unless_whole(commands.unfinished(outcome), outcome and outcome.get("run_id"))


@_options_task(options.EstimateOptions)
def estimate(c, given):
    """Time a few steps of every cell of a plan, so that `bench --dry-run` and --max-hours can
    tell how long the real run will take."""
    from harness import commands
    commands.estimate_run(options.EstimateOptions(**_where(c, given)))


@_options_task(more.CollectOptions)
def collect(c, given):
    """Fetch results and logs from every node; write manifest.json and records.jsonl."""
    from harness import commands
    o = built(more.CollectOptions, _where(c, given))
    # not given: the inventory the run recorded (bench --inventory X, then collect alone)
    path = commands.collect_run(given.get("inventory"), o.results, o.run,
                                default_inventory=o.inventory)
    print("next: `invoke analyze --run %s` makes its report and adds its cells and claims to "
          "the ledger (%s)" % (path.name, commands.ledger_path(o.results)))


@_options_task(more.AnalyzeOptions)
def analyze(c, given):
    """Tidy table, figures (PNG, PDF) and report.md for a run; for an explain folder, its
    result rebuilt from its plan.json and the runs."""
    from harness import commands
    o = built(more.AnalyzeOptions, _where(c, given))
    commands.analyze(o.results, o.run, o.ledger)


@_options_task(more.CompareOptions)
def compare(c, given):
    """Two runs side by side: every claim and cell with both values, intervals and the change,
    and whether each finding holds under one stack, both or neither."""
    from harness import commands
    o = built(more.CompareOptions, _where(c, given))
    commands.compare(o.results, o.run_a, o.run_b, o.out)


@_options_task(options.ReproduceOptions)
def reproduce(c, given):
    """provision, bench, collect, analyze in order, with any option of provision and bench;
    prints where the report is. Exits as bench does (0 whole, 2 refused, 3 incomplete: the
    report is written all the same)."""
    from harness import commands
    built = commands.reproduce(options.ReproduceOptions(**_where(c, given)))
    _exit_unless_whole(built["unfinished"], built["run_id"])


@_options_task(more.OverheadOptions)
def overhead(c, given):
    """Benchmark: each framework's loop bare and instrumented on node 1; prints the ratio."""
    from selfcheck import overhead_check as oh
    o = built(more.OverheadOptions, _where(c, given))
    oh.run(o.inventory, o.stack, o.benchmark, o.steps, o.rounds, listed(o.frameworks))


@_options_task(more.CrosscheckOptions)
def crosscheck(c, given):
    """Benchmark: forward/backward from the calibration vs the profiler's operator times (the
    framework with a cross-check in registry/systems.yml)."""
    from selfcheck import overhead_check as oh
    o = built(more.CrosscheckOptions, _where(c, given))
    oh.crosscheck(o.inventory, o.stack, o.benchmark, o.steps)


@_options_task(options.FaultBenchOptions, name="fault-bench")
def fault_bench(c, given):
    """Benchmark: per system-mode, kill node 2's worker mid-cell; print launch-to-first-step,
    detection, cleanup, strays, and a no-op provisioning re-run. --campaign: every role
    killed and stopped once; --random N: a campaign of random faults of every role."""
    from selfcheck import campaign, faults
    o = built(options.FaultBenchOptions, _where(c, given))
    if o.campaign:
        campaign.fixed(o.inventory, o.stack, o.results, o.systems)
    elif o.random is not None:
        import secrets
        campaign.run(o.inventory, o.stack, o.results, o.random,
                     seed=int(o.seed) if o.seed is not None else secrets.randbelow(10 ** 6),
                     systems=o.systems)
    else:
        faults.benchmark(o.inventory, o.stack, o.results, o.systems, o.steps)


@_options_task(more.SlurmBenchOptions, name="slurm-bench")
def slurm_bench(c, given):
    """Benchmark (root, `cluster.up --slurm`): the smoke matrix on the emulated hosts over SSH
    and through Slurm job steps, interleaved; per system-mode the cell's wall time each way."""
    from selfcheck import launchers
    o = built(more.SlurmBenchOptions, _where(c, given))
    launchers.run(o.stack, o.results, o.repeats, o.systems)


@_options_task(more.AnalysisBenchOptions, name="analysis-bench")
def analysis_bench(c, given):
    """Benchmark: time the analysis of a paper-sized, hand-made run (goal < 30 s)."""
    from selfcheck import analysis_bench
    o = built(more.AnalysisBenchOptions, given)
    analysis_bench.run(o.repeats, float(o.hours))


@_options_task(more.ArtifactOptions)
def artifact(c, given):
    """One archive of a run for artifact evaluation: results, logs, report, environments,
    provenance, ARTIFACT.md (ACM badges) and SHA256SUMS; or --verify one."""
    from harness.results import artifact as bundle
    o = built(more.ArtifactOptions, _where(c, given))
    if o.verify:
        differing = bundle.verify(o.verify)
        for archived, rebuilt in differing[:20]:
            print("- archived: %s\n+ rebuilt:  %s" % (archived, rebuilt))
        if differing:
            raise Exit("error: the rebuilt report differs from the archived one", code=1)
        return
    bundle.build(o.results, o.run)


@_options_task(more.VerdictCheckOptions, name="verdict-check")
def verdict_check(c, given):
    """Benchmark: one benchmark (LeNet-5) at the paper's full length against the verdict
    size's projection of it, per system-mode (goal: error within 5%); prints the table and
    both wall times."""
    from selfcheck import validation
    o = built(more.VerdictCheckOptions, _where(c, given))
    validation.run(o.inventory, o.stack, o.results, systems=o.systems, benchmark=o.benchmark)


@_options_task(options.IntervalCheckOptions, name="interval-check")
def interval_check(c, given):
    """Benchmark: how often the verdict size's 95% intervals hold what they are about (the
    confidence interval: the mean of full-length runs; the prediction: one full run), per cell
    and per ratio of two system-modes (goal: 90-99%); prints the tables. Its folder
    (results/interval-check-<time>) gives later one-repeat runs on this CPU their run-to-run
    variation."""
    from selfcheck import interval_check
    given = _where(c, given)
    if given["again"]:
        interval_check.again(given["again"], given["results"])
        return
    interval_check.run(built(options.IntervalCheckOptions, given))


@_options_task(more.SameMathOptions, name="same-math")
def same_math(c, given):
    """Check: the five system-modes train a network for 30 steps from the same weights and
    batches; losses and weights must agree across frameworks. Exits 1 when they do not."""
    from selfcheck import math_check
    o = built(more.SameMathOptions, _where(c, given))
    if o.plant and o.plant not in math_check.PLANTED:
        raise Exit("error: unknown --plant %r; use one of %s"
                   % (o.plant, ", ".join(math_check.PLANTED)), code=2)
    found = math_check.run(o.inventory, o.stack, o.results, benchmark=o.benchmark,
                           systems=o.systems, planted=o.plant, floor=True if o.floor else None)
    if not found["ok"]:
        raise Exit("same-math: the frameworks' arithmetic differs (above)", code=1)


@_options_task(more.ReferenceCheckOptions, name="reference-check")
def reference_check(c, given):
    """Benchmark: each network against its framework's own (torchvision, Gluon model zoo,
    keras.applications) on node 1, interleaved rounds; prints the ratios (goal: within 10%)."""
    from selfcheck import reference_check
    o = built(more.ReferenceCheckOptions, _where(c, given))
    reference_check.run(o.inventory, o.stack, o.rounds, o.steps, listed(o.frameworks),
                        listed(o.networks))


@_options_task(options.ExplainOptions)
def explain(c, given):
    """Each claim's gap taken apart, one factor at a time (registry/factors.yml): runs the
    settings it needs and writes results/explain-<id>/ (table, waterfalls, sentences)."""
    from harness import commands, ladder_run
    size = _size(given.pop("size"), given.pop(OLD_SIZE)) or "quick"  # not invoke.yaml's
    o = built(options.ExplainOptions, dict(_where(c, given), size=size))
    found = ladder_run.run(o)
    if o.run:
        commands.attach_explain(o.results, o.run, found["path"])


@_options_task(more.StackEnvsOptions, name="stack-envs")
def stack_envs(c, given):
    """Write stacks/conda/<stack>-<framework>.yml, the conda environment files provisioning
    builds on nodes whose Python comes from conda (Vagrant, the paper stack)."""
    from harness.nodes import stacks
    for path in stacks.write_conda_envs(built(more.StackEnvsOptions, given).stack):
        print(path)


# --- the ledger: `invoke ledger.add`, `ledger.claims` ---------------------------------------

@_options_task(more.LedgerAddOptions, name="add")
def ledger_add(c, given):
    """Add an analysed run to the ledger (invoke analyze adds each run it analyses)."""
    from harness import commands
    from harness.results import run_manifest
    o = built(more.LedgerAddOptions, _where(c, given))
    commands.add_to_ledger(run_manifest.run_dir(o.results, o.run),
                           o.ledger or commands.ledger_path(o.results))


@_options_task(more.LedgerImportOptions, name="import")
def ledger_import(c, given):
    """Add the run of an `invoke artifact` archive (another machine's) to the ledger: its
    digest (--digest), its SHA256SUMS and its format checked first, a run already there
    refused; unpacked into <results>/imported/."""
    from harness import commands
    from harness.results import artifact
    o = built(more.LedgerImportOptions, _where(c, given))
    artifact.import_run(o.archive, o.results, o.ledger or commands.ledger_path(o.results),
                        o.digest)


@_options_task(more.LedgerClaimsOptions, name="claims")
def ledger_claims(c, given):
    """Each claim across the ledger's runs: per stack and machine class, and over every
    machine, the runs, the random-effects pooled ratio with its 95% interval, tau^2 and I^2,
    and the pooled verdict (which says when the runs disagree beyond their intervals)."""
    from analysis import ledger as ledgers
    from harness import commands
    o = built(more.LedgerClaimsOptions, _where(c, given))
    print(ledgers.claims_text(o.ledger or commands.ledger_path(o.results),
                              listed(o.claims)))


@_options_task(more.LedgerExportOptions, name="export")
def ledger_export(c, given):
    """The ledger as text git can diff (one CSV per table, in key order): what a notebook
    entry's measurements are committed as; every ledger task reads such a folder as --ledger."""
    from analysis import ledger as ledgers
    from harness import commands
    o = built(more.LedgerExportOptions, _where(c, given))
    print("exported to %s" % ledgers.export(o.ledger or commands.ledger_path(o.results), o.out))


@_options_task(more.LedgerCoverageOptions, name="coverage")
def ledger_coverage(c, given):
    """How often the verdict size's 95% intervals held, per interval kind and machine class,
    scored by the paper-size runs of the same setting in the ledger: counts and a
    Clopper-Pearson interval (the interval check, grown from every run)."""
    from analysis import ledger as ledgers
    from harness import commands
    o = built(more.LedgerCoverageOptions, _where(c, given))
    print(ledgers.coverage_text(o.ledger or commands.ledger_path(o.results)))


# --- the emulated cluster (root): `invoke cluster.up`, `cluster.status`, `cluster.down` -------

@_options_task(options.ClusterUpOptions, name="up")
def cluster_up(c, given):
    """Create the emulated hosts (namespaces, sshd, shaped links, cgroups) and inventory/netns.yml."""
    from harness.clusters import emulated as cluster
    cluster.up(options.ClusterUpOptions(**given))


@task(name="down")
@_user_errors
def cluster_down(c):
    """Remove everything cluster.up made, and nothing else (results stay)."""
    from harness.clusters import emulated as cluster
    cluster.down()


@task(name="status")
@_user_errors
def cluster_status(c):
    """Show the emulated hosts, their links and limits."""
    from harness.clusters import emulated as cluster
    cluster.status()


@_options_task(more.VmBenchOptions, name="vm-bench")
def vm_bench(c, given):
    """Benchmark: the Vagrant VMs from a cold start (box, boot to SSH per VM, provisioning per
    framework, one smoke cell per system-mode) under the accelerator used; prints the times."""
    from selfcheck import vmbench
    o = built(more.VmBenchOptions, _where(c, given))
    vmbench.run(o.stack, o.results, systems=o.systems, benchmark=o.benchmark, keep=o.keep)


# --- Vagrant VMs: `invoke vagrant.box`, `vagrant.down` -------------------------------------

@task(name="box")
@_user_errors
def vagrant_box(c):
    """Build the libvirt box from Debian's packages (root; about 2 minutes; cached by recipe)
    and `vagrant box add` it; prints its name (DLBENCH_VM_BOX). DLBENCH_VM_BOX_ENVS (e.g.
    paper-py39:mxnet) builds those framework envs into it, which provisioning then skips."""
    from harness.clusters import vmbox
    from harness.nodes import stacks
    name, folder = vmbox.ensure(envs=stacks.box_envs())
    print("%s (%s)" % (name, folder))


@task(name="up")
@_user_errors
def vagrant_up(c):
    """Boot the VMs (libvirt started, the box built, the accelerator chosen where needed) and
    write inventory/vagrant.yml; `invoke provision --inventory vagrant` does this first."""
    from harness.clusters import vagrant
    from harness.nodes import stacks
    vagrant.prepare(box_envs=stacks.box_envs())


@task(name="down")
@_user_errors
def vagrant_down(c):
    """Destroy the VMs and stop what the package started for them (libvirt's daemons, its
    network and pool), and nothing else."""
    from harness.clusters import vagrant
    vagrant.down()


@_options_task(options.IntervalCheckOptions)
def calibration(c, given):
    """The old name of interval-check, kept for now ('calibration' also names the trainers'
    timed passes: one word per concept, docs/glossary.md)."""
    print("notice: `invoke calibration` is now `invoke interval-check`; the old name works for "
          "now", file=sys.stderr)
    interval_check(c, **given)


ns = Collection(provision, bench, estimate, collect, analyze, compare, explain, reproduce, overhead,
                crosscheck, verdict_check, interval_check, calibration, same_math,
                reference_check, artifact, vm_bench, analysis_bench, fault_bench, slurm_bench,
                stack_envs)
ns.add_collection(Collection("cluster", cluster_up, cluster_down, cluster_status))
ns.add_collection(Collection("vagrant", vagrant_box, vagrant_up, vagrant_down))
ns.add_collection(Collection("ledger", ledger_add, ledger_import, ledger_claims,
                             ledger_coverage, ledger_export))
