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
from harness.plan import options
from harness.plan.options import BenchOptions, check_positive


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
        out.append((f.name, f.default, _help(f.metadata["help"])))
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
        benchmarks=",".join(matrix.BENCHMARKS), planted=samemath.PLANTED,
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
            return function(c, given)
        body.__signature__ = inspect.Signature(parameters)
        del body.__wrapped__  # Invoke reads the signature above, not function's
        return task(help={name: text for name, _, text in on_line},
                    **task_args)(_user_errors(body))
    return decorate


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


COMMON = {name: _help(text) for name, text in options.HELP.items() if name != "results"}


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


@task(help={"inventory": COMMON["inventory"], "run": "run id (default: the latest)",
            "results": "results folder [invoke.yaml: results]"})
@_user_errors
def collect(c, inventory=None, run=None, results=None):
    """Fetch results and logs from every node; write manifest.json and records.jsonl."""
    from harness import commands
    o = _options(c, inventory=inventory, results=results)
    commands.collect_run(o.inventory, o.results, run)


@task(help={"run": "run id (default: the latest), or an explain folder (explain-<id>)",
            "results": "results folder [invoke.yaml: results]"})
@_user_errors
def analyze(c, run=None, results=None):
    """Tidy table, figures (PNG, PDF) and report.md for a run; for an explain folder, its
    result rebuilt from its plan.json and the runs."""
    from harness import commands
    commands.analyze(_options(c, results=results).results, run)


@task(help={"run_a": "the first run's id (e.g. a run on the paper-py39 stack)",
            "run_b": "the second run's id (e.g. the same matrix on the current stack)",
            "results": "results folder [invoke.yaml: results]",
            "out": "folder for the report [<results>/compare-<A>-vs-<B>]"})
@_user_errors
def compare(c, run_a, run_b, results=None, out=None):
    """Two runs side by side: every claim and cell with both values, intervals and the change,
    and whether each finding holds under one stack, both or neither."""
    from harness import commands
    commands.compare(_options(c, results=results).results, run_a, run_b, out)


@_options_task(options.ReproduceOptions)
def reproduce(c, given):
    """provision, bench, collect, analyze in order, with any option of provision and bench;
    prints where the report is. Exits as bench does (0 whole, 2 refused, 3 incomplete: the
    report is written all the same)."""
    from harness import commands
    built = commands.reproduce(options.ReproduceOptions(**_where(c, given)))
    _exit_unless_whole(built["unfinished"], built["run_id"])


@task(help={"inventory": COMMON["inventory"], "stack": COMMON["stack"],
            "benchmark": "benchmark whose network runs [lenet5-cifar10]",
            "steps": "measured steps per run [200]", "rounds": "bare/instrumented pairs [5]",
            "frameworks": "comma-separated subset of %s [all]" % ",".join(registry.frameworks())})
@_user_errors
def overhead(c, inventory=None, stack=None, benchmark="lenet5-cifar10", steps=200, rounds=5,
             frameworks=None):
    """Benchmark: each framework's loop bare and instrumented on node 1; prints the ratio."""
    from selfcheck import overhead_check as oh
    o = _options(c, inventory=inventory, stack=stack)
    oh.run(o.inventory, o.stack, benchmark,
           check_positive("steps", steps), check_positive("rounds", rounds),
           frameworks.split(",") if frameworks else None)


@task(help={"inventory": COMMON["inventory"], "stack": COMMON["stack"],
            "benchmark": "benchmark whose network runs [lenet5-cifar10]",
            "steps": "calibration and profiled steps [20]"})
@_user_errors
def crosscheck(c, inventory=None, stack=None, benchmark="lenet5-cifar10", steps=20):
    """Benchmark: forward/backward from the calibration vs the profiler's operator times (the
    framework with a cross-check in registry/systems.yml)."""
    from selfcheck import overhead_check as oh
    o = _options(c, inventory=inventory, stack=stack)
    oh.crosscheck(o.inventory, o.stack, benchmark,
                  check_positive("steps", steps))


@_options_task(options.FaultBenchOptions, name="fault-bench")
def fault_bench(c, given):
    """Benchmark: per system-mode, kill node 2's worker mid-cell; print launch-to-first-step,
    detection, cleanup, strays, and a no-op provisioning re-run. --campaign: every role
    killed and stopped once; --random N: a campaign of random faults of every role."""
    from selfcheck import campaign, faults
    o = options.FaultBenchOptions(**_where(c, given))
    if o.campaign:
        campaign.fixed(o.inventory, o.stack, o.results, o.systems)
    elif o.random is not None:
        import secrets
        campaign.run(o.inventory, o.stack, o.results, check_positive("random", o.random),
                     seed=int(o.seed) if o.seed is not None else secrets.randbelow(10 ** 6),
                     systems=o.systems)
    else:
        faults.benchmark(o.inventory, o.stack, o.results, o.systems,
                         check_positive("steps", o.steps))


@task(name="slurm-bench", help={"stack": COMMON["stack"],
                                "repeats": "smoke runs each way, interleaved [2]",
                                "systems": "comma-separated subset [all five]",
                                "results": "results folder [invoke.yaml: results]"})
@_user_errors
def slurm_bench(c, stack=None, repeats=2, systems=None, results=None):
    """Benchmark (root, `cluster.up --slurm`): the smoke matrix on the emulated hosts over SSH
    and through Slurm job steps, interleaved; per system-mode the cell's wall time each way."""
    from selfcheck import launchers
    o = _options(c, stack=stack, results=results)
    launchers.run(o.stack, o.results, check_positive("repeats", repeats), systems)


@task(name="analysis-bench", help={"repeats": "repeats of each of the 30 cells [3]",
                                   "hours": "hours of 1 Hz memory log per process [1]"})
def analysis_bench(c, repeats=3, hours=1.0):
    """Benchmark: time the analysis of a paper-sized, hand-made run (goal < 30 s)."""
    from selfcheck import analysis_bench
    analysis_bench.run(int(repeats), float(hours))


@task(help={"run": "run id (default: the latest)", "results": "results folder [invoke.yaml: "
            "results]", "verify": "path of an artifact to check instead: its sums, and its "
            "report rebuilt from its records"})
@_user_errors
def artifact(c, run=None, results=None, verify=None):
    """One archive of a run for artifact evaluation: results, logs, report, environments,
    provenance, ARTIFACT.md (ACM badges) and SHA256SUMS; or --verify one."""
    from harness.results import artifact as bundle
    if verify:
        differing = bundle.verify(verify)
        for archived, rebuilt in differing[:20]:
            print("- archived: %s\n+ rebuilt:  %s" % (archived, rebuilt))
        if differing:
            raise Exit("error: the rebuilt report differs from the archived one", code=1)
        return
    bundle.build(_options(c, results=results).results, run)


@task(name="verdict-check", help={"inventory": COMMON["inventory"], "stack": COMMON["stack"],
                                  "systems": "comma-separated subset [all five]",
                                  "benchmark": "the benchmark run at full length "
                                               "[lenet5-cifar10]",
                                  "results": "results folder [invoke.yaml: results]"})
@_user_errors
def verdict_check(c, inventory=None, stack=None, systems=None, benchmark="lenet5-cifar10",
                  results=None):
    """Benchmark: one benchmark (LeNet-5) at the paper's full length against the verdict
    size's projection of it, per system-mode (goal: error within 5%); prints the table and
    both wall times."""
    from selfcheck import validation
    o = _options(c, inventory=inventory, stack=stack, results=results)
    validation.run(o.inventory, o.stack, o.results, systems=systems, benchmark=benchmark)


@_options_task(options.IntervalCheckOptions, name="interval-check")
def interval_check(c, given):
    """Benchmark: how often the verdict size's 95% intervals hold what they are about (the
    confidence interval: the mean of full-length runs; the prediction: one full run), per cell
    and per ratio of two system-modes (goal: 90-99%); prints the tables. Its folder
    (results/calibration-<time>) gives later one-repeat runs on this CPU their run-to-run
    variation."""
    from selfcheck import calibration as calibrating
    given = _where(c, given)
    if given["again"]:
        calibrating.again(given["again"], given["results"])
        return
    given.update(short=check_positive("short", given["short"], 1),
                 full=check_positive("full", given["full"], 2))
    calibrating.run(options.IntervalCheckOptions(**given))


@task(name="same-math", help={
    "inventory": COMMON["inventory"], "stack": COMMON["stack"],
    "systems": "comma-separated subset of system-modes [all five]",
    "results": "results folder [invoke.yaml: results]",
    "benchmark": "lenet5-cifar10 (the check CI runs) or resnet18-cifar10 / resnet50-cifar10 "
                 "(minutes) [lenet5-cifar10]",
    "plant": "put in one error on purpose, which the check must catch (a test of the "
             "check): one of %s" % ", ".join(LISTED.planted),
    "floor": "also run each framework against itself from perturbed weights and let the "
             "tolerance follow that noise floor (always on for the ResNets)"})
@_user_errors
def same_math(c, inventory=None, stack=None, systems=None, results=None, plant="",
              benchmark="lenet5-cifar10", floor=False):
    """Check: the five system-modes train a network for 30 steps from the same weights and
    batches; losses and weights must agree across frameworks. Exits 1 when they do not."""
    from selfcheck import math_check
    o = _options(c, inventory=inventory, stack=stack, results=results)
    if plant and plant not in math_check.PLANTED:
        raise Exit("error: unknown --plant %r; use one of %s"
                   % (plant, ", ".join(math_check.PLANTED)), code=2)
    found = math_check.run(o.inventory, o.stack, o.results, benchmark=benchmark,
                           systems=systems, planted=plant, floor=True if floor else None)
    if not found["ok"]:
        raise Exit("same-math: the frameworks' arithmetic differs (above)", code=1)


@task(name="reference-check", help={
    "inventory": COMMON["inventory"], "stack": COMMON["stack"],
    "rounds": "interleaved rounds [6]", "steps": "steps of each model per round [5]",
    "frameworks": "comma-separated subset of %s [all]" % ",".join(registry.frameworks()),
    "networks": "comma-separated subset of resnet18, resnet50, alexnet [all]"})
@_user_errors
def reference_check(c, inventory=None, stack=None, rounds=6, steps=5, frameworks=None,
                    networks=None):
    """Benchmark: each network against its framework's own (torchvision, Gluon model zoo,
    keras.applications) on node 1, interleaved rounds; prints the ratios (goal: within 10%)."""
    from selfcheck import reference_check
    o = _options(c, inventory=inventory, stack=stack)
    reference_check.run(o.inventory, o.stack, check_positive("rounds", rounds),
                  check_positive("steps", steps),
                  frameworks.split(",") if frameworks else None,
                  networks.split(",") if networks else None)


@_options_task(options.ExplainOptions)
def explain(c, given):
    """Each claim's gap taken apart, one factor at a time (registry/factors.yml): runs the
    settings it needs and writes results/explain-<id>/ (table, waterfalls, sentences)."""
    from harness import commands, ladder_run
    size = _size(given.pop("size"), given.pop(OLD_SIZE)) or "quick"  # not invoke.yaml's
    o = options.ExplainOptions(size=size, **_where(c, given))
    o.repeats = check_positive("repeats", o.repeats)
    found = ladder_run.run(o)
    if o.run:
        commands.attach_explain(o.results, o.run, found["path"])


@task(name="stack-envs", help={"stack": "one stack (default: every stack in stacks/)"})
@_user_errors
def stack_envs(c, stack=None):
    """Write stacks/conda/<stack>-<framework>.yml, the conda environment files provisioning
    builds on nodes whose Python comes from conda (Vagrant, the paper stack)."""
    from harness.nodes import stacks
    for path in stacks.write_conda_envs(stack):
        print(path)


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


@task(name="vm-bench", help={
    "stack": "stack whose Python the box has [paper-py39]",
    "systems": "comma-separated system-modes, one smoke cell each [%s]" % registry.vm_smoke(),
    "benchmark": "the smoke cells' benchmark [lenet5-cifar10]",
    "results": "results folder [invoke.yaml: results]",
    "keep": "leave the VMs up at the end"})
@_user_errors
def vm_bench(c, stack="paper-py39", systems=None, benchmark="lenet5-cifar10",
             results=None, keep=False):
    """Benchmark: the Vagrant VMs from a cold start (box, boot to SSH per VM, provisioning per
    framework, one smoke cell per system-mode) under the accelerator used; prints the times."""
    from selfcheck import vmbench
    o = _options(c, results=results)
    vmbench.run(stack, o.results, systems=systems, benchmark=benchmark, keep=keep)


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
