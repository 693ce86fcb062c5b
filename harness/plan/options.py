"""What `invoke bench` is asked, as one type: tasks.py fills it from the command line, the
callers of commands.bench (explain, the self-checks) by name, a resumed run checks it against
its manifest, and a Slurm batch script turns it back into options."""
from dataclasses import dataclass, field, fields, make_dataclass

from contract.errors import UserError
from .matrix import Choice

# What each option of bench is, in its field's metadata (`kind`), read by the methods below:
CHOOSES = "chooses"  # picks cells: a resumed run refuses it (its cells come from its manifest)
WHERE = "where"  # where it runs and with what: the manifest records them itself
RUNS = "runs"  # how a run goes, not what it is: left out of the manifest
SETTING = "setting"  # what the run is beyond its cells (the timeout): the manifest keeps it
CALLERS = "callers"  # the package's own callers' objects (hooks): not a setting of the run


def option(default=None, help=None, kind=SETTING, least=None, passed_on=False):
    """A field of an options dataclass. help: its text for `invoke <task> --help` ({name} is
    filled in by tasks.py from what the repository lists); None: not on the command line, set
    only by the package's own callers (invoke explain, the self-checks). kind: above; least:
    a whole number on the command line, at least this (check_positive); passed_on: a flag a
    batch script passes on when it resumes the run."""
    return field(default=default, metadata={"help": help, "kind": kind, "least": least,
                                            "passed_on": passed_on})


def of_kind(options_type, kind):
    """The names of the fields of that kind, in order."""
    return tuple(f.name for f in fields(options_type) if f.metadata.get("kind") == kind)


HELP = {  # the options several tasks share
    "inventory": "inventory name in inventory/ ({inventories}) or a path to an Ansible YAML "
                 "inventory [invoke.yaml: local]",
    "stack": "version set in stacks/ ({stacks}) [invoke.yaml: current]",
    "stacks": "comma-separated version sets, every cell run under each, the stack a factor of "
              "every random block [the verdict and paper sizes: {paper_and_today}; the others: "
              "--stack]",
    "size": "the run's size: smoke (the five system-modes on LeNet-5, {smoke}), quick (all 30 "
            "cells, {quick}), verdict (all 30 cells, {verdict}: a projection of paper) or "
            "paper (Tables III-IV: {paper}) [invoke.yaml: smoke]",
    "data": "synthetic (generated CIFAR-format data) or real (the official archives); "
            "default: the size's",
    "results": "results folder [invoke.yaml: results]",
}


def on_command_line(options_type):
    """The fields of an options dataclass that its task takes, in order."""
    return [f for f in fields(options_type) if f.metadata.get("help")]


COMMON_KIND = {"inventory": WHERE, "stack": WHERE, "stacks": WHERE, "size": WHERE,
               "results": WHERE, "data": CHOOSES}


def common(name, default=None):
    """A field whose help is the shared one (HELP)."""
    return option(default, HELP[name], COMMON_KIND[name])


@dataclass
class BenchOptions:
    """Every option of `invoke bench`, declared once: tasks.py gives Invoke a parameter per
    field with help, and the whole object travels to harness/commands.py."""
    inventory: str = common("inventory")
    stack: str = common("stack")
    stacks: str = common("stacks")
    size: str = common("size")
    run: str = option(
        kind=WHERE, help="run id (default: a new one, the start time); an existing run is "
                         "resumed: its unfinished cells run, its succeeded ones are kept")
    dry_run: bool = option(
        False, kind=RUNS, help="print the cells, their estimates and each node's script as the "
                               "run will write it; change nothing on any node")
    benchmarks: str = option(kind=CHOOSES, help="comma-separated subset of: {benchmarks}")
    systems: str = option(kind=CHOOSES, help="comma-separated subset of: {systems}")
    epochs: int = option(kind=CHOOSES, least=1, help="override the size's epochs")
    steps: int = option(kind=CHOOSES, least=1, help="override the size's steps per epoch")
    data: str = common("data")
    timeout: int = option(least=1, help="seconds before a cell is stopped (default: from the "
                                        "size)")
    repeats: int = option(
        least=1, help="run every cell N times, each time every cell in a new random order (the "
                      "analysis gives each setting's expected time a 95% confidence interval) "
                      "[the verdict size {verdict_repeats}, others 1]")
    network: str = option(
        kind=CHOOSES, help="emulated cluster only: run the cells at each link setting, e.g. "
                           "50mbit,1gbit,10gbit (reshaped between settings, recorded per cell)")
    nodes: str = option(
        kind=CHOOSES, help="scaling: run each cell on the first k hosts for each k, e.g. 1,2,3 "
                           "(local batch stays {local_batch}; provision with the same --nodes)")
    results: str = common("results")
    fail_fast: bool = option(
        False, kind=RUNS, passed_on=True,
        help="stop at the first failed cell (the rest stay pending, resumable)")
    retry_failed: bool = option(
        False, kind=RUNS, passed_on=True,
        help="when resuming, run the failed cells again too, and those disturbed in both "
             "attempts")
    force: bool = option(
        False, kind=RUNS, passed_on=True,
        help="when resuming, run every cell again (earlier attempts are kept in .attempts/)")
    profile_steps: int = option(
        kind=CHOOSES, least=0, help="profiled steps per cell after the timed ones, for the "
                                    "operator profiles (0: none) [{profile_steps}]")
    max_hours: float = option(
        kind=RUNS, help="refuse to start a plan expected to take longer (estimates from "
                        "earlier runs or `invoke estimate`; see --dry-run)")
    partition: str = option(
        kind=WHERE, help="--inventory slurm outside an allocation: ask Slurm for one in this "
                         "partition (nodes and time limit from the plan), run the plan in it, "
                         "release it at the end")
    sbatch: bool = option(
        False, kind=WHERE, help="--inventory slurm: write a batch script that runs the plan in "
                                "one allocation (submitting it again resumes the run)")
    submit: bool = option(False, kind=WHERE, help="--sbatch, and submit the script (sbatch)")
    # the package's own callers only
    environment: str = option()  # a factor's level (invoke explain): framework -> "NAME=value;..."
    threads: int = option(0)
    # what the self-checks, the fault tests and invoke explain change in a run: objects the
    # run calls at its stages (harness/run/hooks.py), not settings of the run
    hooks: list = option(kind=CALLERS)

    @classmethod
    def parsed(cls, **given):
        """From the command line's strings: counts checked and made whole numbers, hours a
        number; a bad value is a UserError that names the option."""
        for f in fields(cls):
            if f.metadata.get("least") is not None:
                given[f.name] = check_positive(f.name, given.get(f.name), f.metadata["least"])
        given["max_hours"] = check_hours(given.get("max_hours"))
        return cls.given(**given)

    @classmethod
    def given(cls, **options):
        """From keyword arguments; an unknown name is an error."""
        unknown = sorted(set(options) - {f.name for f in fields(cls)})
        if unknown:
            raise TypeError("bench has no option %s" % ", ".join(unknown))
        return cls(**options)

    def chosen(self):
        """The options given that choose cells (a resumed run may not take them)."""
        given = [k for k in of_kind(BenchOptions, CHOOSES) if getattr(self, k) is not None
                 and getattr(self, k) != "" and getattr(self, k) is not False]  # 0 is given
        return given + (["repeats"] if (self.repeats or 1) > 1 else [])

    def refuse_choosing(self, run_name):
        chosen = self.chosen()
        if chosen:
            raise UserError("run %s exists and its cells come from its manifest: --%s would "
                            "plan others" % (run_name, ", --".join(chosen)),
                            "leave them out to resume it, or start a new run (no --run)")

    def choice(self, node_counts=None, networks=None, order_seed=None, stacks=None):
        """The cells these options choose, as one matrix.Choice (matrix.plan takes it whole):
        the options that choose cells, with what the run adds (the node counts and link
        settings it checked, the seed of its order, the stacks cells name)."""
        return Choice(benchmarks=self.benchmarks, systems=self.systems, epochs=self.epochs,
                      steps=self.steps, data=self.data, repeats=self.repeats,
                      profile_steps=self.profile_steps, environment=self.environment,
                      threads=self.threads or 0, networks=networks, node_counts=node_counts,
                      order_seed=order_seed, stacks=stacks)

    def stack_names(self):
        """The version sets the run's cells run under, in order."""
        return stack_names(self.stacks, self.stack)

    def manifest(self):
        """What the run's manifest records of them (its cells are listed on their own)."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if f.metadata.get("kind") in (CHOOSES, SETTING)}

    def command_line(self, choosing):
        """`invoke bench` options that ask for the same (choosing: with the cell-choosing
        ones, for a new run; without, to resume it)."""
        args = []
        for name, value in self.manifest().items():
            if value in (None, "", False) or \
                    (name in of_kind(BenchOptions, CHOOSES) + ("repeats",) and not choosing):
                continue
            args += ["--" + name.replace("_", "-"), str(value)]
        return args + ["--" + f.name.replace("_", "-") for f in fields(self)
                       if f.metadata.get("passed_on") and getattr(self, f.name)]


def stack_names(stacks, stack):
    """--stacks as a list, or --stack alone."""
    names = [s.strip() for s in str(stacks).split(",") if s.strip()] if stacks else [stack]
    return list(dict.fromkeys(names))


def check_hours(value):
    """--max-hours: None, or a positive number of hours."""
    if value is None:
        return None
    try:
        hours = float(value)
    except ValueError:
        hours = 0
    if not hours > 0:
        raise UserError("--max-hours must be a positive number of hours, not %r" % value,
                        "e.g. --max-hours 2.5")
    return hours


def check_positive(name, value, least=1):
    """A command-line count: None, or a whole number >= least."""
    if value is None:
        return None
    try:
        number = int(value)
    except ValueError:
        number = least - 1
    if number < least:
        raise UserError("--%s must be a whole number >= %d (got %r)" % (
            name.replace("_", "-"), least, value))
    return number


@dataclass
class ProvisionOptions:
    """`invoke provision`'s options."""
    inventory: str = common("inventory")
    stack: str = common("stack")
    stacks: str = common("stacks")
    size: str = common("size")
    data: str = common("data")
    data_archive: str = option(help="path of cifar-10-binary.tar.gz / cifar-100-binary.tar.gz "
                                    "already downloaded (md5-checked) instead of downloading it")
    nodes: str = option(help="node counts `bench --nodes` will use, e.g. 1,2,3: shards for "
                             "each [all the inventory's nodes]")
    frameworks: str = option(help="comma-separated subset of the stack's frameworks to build "
                                  "envs for (slow nodes: emulated VMs) [all]")
    wheelhouse: str = option(help="nodes without a package index: download every wheel the "
                                  "stack needs into this folder here, push them, and install "
                                  "from them alone (docs/reproducing.md)")
    check: bool = option(False)  # ansible-playbook --check

    def stack_names(self):
        return stack_names(self.stacks, self.stack)

    def framework_list(self):
        return self.frameworks.split(",") if isinstance(self.frameworks, str) \
            else self.frameworks


# bench's options that leave nothing here for collect and analyze to read (a dry run, a batch
# script, an allocation of its own): bench takes them, reproduce does not
BENCH_ONLY = ("dry_run", "partition", "sbatch", "submit")


class _Reproducing:
    """What ReproduceOptions adds to its fields: the options of each step it runs."""

    def provision_options(self):
        return ProvisionOptions(**self._of(ProvisionOptions))

    def bench_options(self):
        """BenchOptions, its counts checked as bench's command line checks them."""
        return BenchOptions.parsed(**self._of(BenchOptions))

    def _of(self, options_type):
        return {f.name: getattr(self, f.name) for f in fields(options_type)
                if hasattr(self, f.name)}


def _reproduce_fields():
    """bench's options (but BENCH_ONLY), then those of provision that bench has not: each
    declared where its step declares it."""
    taken = {}
    for f in on_command_line(BenchOptions) + on_command_line(ProvisionOptions):
        if f.name not in BENCH_ONLY:
            taken.setdefault(f.name, f)
    return [(f.name, f.type, field(default=f.default, metadata=f.metadata))
            for f in taken.values()]


# `invoke reproduce`'s options: every option of provision and bench (collect and analyze take
# the inventory, run and results folder that bench does), declared there once
ReproduceOptions = make_dataclass("ReproduceOptions", _reproduce_fields(),
                                  bases=(_Reproducing,))


@dataclass
class EstimateOptions:
    """`invoke estimate`'s options."""
    inventory: str = common("inventory")
    stack: str = common("stack")
    size: str = common("size")
    benchmarks: str = option(help="comma-separated subset")
    systems: str = option(help="comma-separated subset")
    data: str = common("data")
    results: str = common("results")


@dataclass
class IntervalCheckOptions:
    """`invoke interval-check`'s options."""
    inventory: str = common("inventory")
    stack: str = common("stack")
    benchmarks: str = option("lenet5-cifar10", "comma-separated [lenet5-cifar10]")
    systems: str = option(help="comma-separated subset [all five]")
    short: int = option(4, "verdict runs per benchmark, interleaved with the full rounds [4]",
                        least=1)
    full: int = option(3, "full-length rounds per benchmark, each every system-mode once [3]",
                       least=2)
    results: str = common("results")
    again: str = option(help="an earlier interval check's folder (interval-check-<time>): its "
                             "table again, nothing run")


@dataclass
class FaultBenchOptions:
    """`invoke fault-bench`'s options."""
    inventory: str = common("inventory")
    stack: str = common("stack")
    systems: str = option(help="comma-separated subset of system-modes [all five]")
    steps: int = option(200, "steps of each cell (the fault comes at step 2) [200]", least=1)
    results: str = common("results")
    random: int = option(least=1, help="instead: N faults, each a random role of a random system-mode "
                              "killed at a random moment; prints per role detection, cleanup, "
                              "strays, next cell, records lost")
    seed: int = option(help="--random's seed (default: a new one, printed)")
    campaign: bool = option(False, "instead: every role of every system-mode killed once in "
                                   "training and stopped once before its first step, in one "
                                   "run; prints per fault when it was detected and whether the "
                                   "reason named the role and node")


@dataclass
class ExplainOptions:
    """`invoke explain`'s options."""
    inventory: str = common("inventory")
    stack: str = option(help="the stack of every setting where no factor picks one (versions "
                             "does) [invoke.yaml: current]")
    size: str = option(help="the cells' size [quick]")
    benchmarks: str = option(help="comma-separated [lenet5-cifar10,resnet18-cifar10]")
    claims: str = option(help="comma-separated claim ids (analysis/reference/paper.yml) [the "
                              "headline and operator claims about the benchmarks]")
    factors: str = option(help="comma-separated factors of registry/factors.yml [those that "
                               "differ between 2021's software and today's]")
    repeats: int = option(3, "repeats of every setting, interleaved round by round [3]",
                          least=1)
    results: str = common("results")
    run: str = option(help="a run whose report gets a column 'what moves it' from this result")


@dataclass
class ClusterUpOptions:
    """`invoke cluster.up`'s options."""
    hosts: int = option(3, "how many emulated hosts [3]")
    network: str = option("1gbit", "link preset: 1gbit, 10gbit, 100mbit, 50mbit [1gbit]")
    rate: str = option(help="link rate instead of a preset, e.g. 200mbit")
    delay: str = option(help="added one-way delay, e.g. 5ms (needs the kernel's netem)")
    loss: str = option(help="packet loss, e.g. 0.1% (needs the kernel's netem)")
    vcpus: int = option(1, "CPU quota per host, in cores [1]")
    memory: int = option(4096, "memory limit per host, MB [4096]")
    slurm: bool = option(False, "also run Slurm on them: munged and slurmctld here, a slurmd in "
                                "each host (Debian's slurm-wlm and munge)")
