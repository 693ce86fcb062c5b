"""What `invoke bench` is asked, as one type: tasks.py fills it from the command line, the
callers of commands.bench (explain, the self-checks) by name, a resumed run checks it against
its manifest, and a Slurm batch script turns it back into options."""
from dataclasses import dataclass, field, fields

from contract.errors import UserError

# options that choose cells: a resumed run's cells come from its manifest instead
CHOOSING = ("benchmarks", "systems", "epochs", "steps", "data", "network", "nodes",
            "profile_steps")
# how a run goes, not what it is: left out of the manifest
RUNNING = ("dry_run", "fail_fast", "retry_failed", "force", "max_hours")
# where it runs and what with: the manifest records them itself, a batch script on its own
WHERE = ("inventory", "stack", "size", "profile", "run", "results", "partition", "sbatch",
         "submit")
FLAGS = ("fail_fast", "retry_failed", "force")  # the ones a batch script passes on
# whole numbers on the command line, and the least each may be (check_positive)
COUNTS = {"epochs": 1, "steps": 1, "timeout": 1, "repeats": 1, "profile_steps": 0}


def option(default=None, help=None):
    """A field of BenchOptions. help: its text for `invoke bench --help` ({name} is filled in
    by tasks.py from what the repository lists); None: not on the command line, set only by
    the package's own callers (invoke explain, the self-checks)."""
    return field(default=default, metadata={"help": help})


@dataclass
class BenchOptions:
    """Every option of `invoke bench`, declared once: tasks.py gives Invoke a parameter per
    field with help, and the whole object travels to harness/commands.py."""
    inventory: str = option(help="inventory name in inventory/ ({inventories}) or a path to an "
                                 "Ansible YAML inventory [invoke.yaml: local]")
    stack: str = option(help="version set in stacks/ ({stacks}) [invoke.yaml: current]")
    size: str = option(help="the run's size: smoke (the five system-modes on LeNet-5, {smoke}), "
                            "quick (all 30 cells, {quick}), verdict (all 30 cells, {verdict}: "
                            "a projection of paper) or paper (Tables III-IV: {paper}) "
                            "[invoke.yaml: smoke]")
    profile: str = option(help="the old name of --size, kept for now ('profile' now means "
                               "operator profiles only)")
    run: str = option(help="run id (default: a new one, the start time); an existing run is "
                           "resumed: its unfinished cells run, its succeeded ones are kept")
    dry_run: bool = option(False, "print the cells, their estimates and each node's script as "
                                  "the run will write it; change nothing on any node")
    benchmarks: str = option(help="comma-separated subset of: {benchmarks}")
    systems: str = option(help="comma-separated subset of: {systems}")
    epochs: int = option(help="override the size's epochs")
    steps: int = option(help="override the size's steps per epoch")
    data: str = option(help="synthetic (generated CIFAR-format data) or real (the official "
                            "archives); default: the size's")
    timeout: int = option(help="seconds before a cell is stopped (default: from the size)")
    repeats: int = option(help="run every cell N times, each time every cell in a new random "
                               "order (the analysis gives each setting's expected time a 95% "
                               "confidence interval) [the verdict size {verdict_repeats}, "
                               "others 1]")
    network: str = option(help="emulated cluster only: run the cells at each link setting, e.g. "
                               "50mbit,1gbit,10gbit (reshaped between settings, recorded per "
                               "cell)")
    nodes: str = option(help="scaling: run each cell on the first k hosts for each k, e.g. "
                             "1,2,3 (local batch stays {local_batch}; provision with the same "
                             "--nodes)")
    results: str = option(help="results folder [invoke.yaml: results]")
    fail_fast: bool = option(False, "stop at the first failed cell (the rest stay pending, "
                                    "resumable)")
    retry_failed: bool = option(False, "when resuming, run the failed cells again too, and "
                                       "those disturbed in both attempts")
    force: bool = option(False, "when resuming, run every cell again (earlier attempts are kept "
                                "in .attempts/)")
    profile_steps: int = option(help="profiled steps per cell after the timed ones, for the "
                                     "operator profiles (0: none) [{profile_steps}]")
    max_hours: float = option(help="refuse to start a plan expected to take longer (estimates "
                                   "from earlier runs or `invoke estimate`; see --dry-run)")
    partition: str = option(help="--inventory slurm outside an allocation: ask Slurm for one in "
                                 "this partition (nodes and time limit from the plan), run the "
                                 "plan in it, release it at the end")
    sbatch: bool = option(False, "--inventory slurm: write a batch script that runs the plan in "
                                 "one allocation (submitting it again resumes the run)")
    submit: bool = option(False, "--sbatch, and submit the script (sbatch)")
    # the package's own callers only
    planted: str = option("")  # the same-math check's planted error
    environment: str = option()  # a factor's level (invoke explain): framework -> "NAME=value;..."
    threads: int = option(0)
    round: int = option()  # run only the cells of that repeat (explain interleaves rounds)
    cells: list = option()  # a new run's cells, planned by the caller (explain)
    order_seed: int = option()

    @classmethod
    def on_command_line(cls):
        """The fields `invoke bench` takes, in order."""
        return [f for f in fields(cls) if f.metadata.get("help")]

    @classmethod
    def parsed(cls, **given):
        """From the command line's strings: counts checked and made whole numbers, hours a
        number; a bad value is a UserError that names the option."""
        for name, least in COUNTS.items():
            given[name] = check_positive(name, given.get(name), least)
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
        given = [k for k in CHOOSING if getattr(self, k) is not None
                 and getattr(self, k) != "" and getattr(self, k) is not False]  # 0 is given
        return given + (["repeats"] if (self.repeats or 1) > 1 else [])

    def refuse_choosing(self, run_name):
        chosen = self.chosen()
        if chosen:
            raise UserError("run %s exists and its cells come from its manifest: --%s would "
                            "plan others" % (run_name, ", --".join(chosen)),
                            "leave them out to resume it, or start a new run (no --run)")

    def manifest(self):
        """What the run's manifest records of them (its cells are listed on their own)."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if f.name not in RUNNING + WHERE and f.name != "cells"}

    def command_line(self, choosing):
        """`invoke bench` options that ask for the same (choosing: with the cell-choosing
        ones, for a new run; without, to resume it)."""
        args = []
        for name, value in self.manifest().items():
            if value in (None, "", False) or name == "order_seed" or \
                    (name in CHOOSING + ("repeats",) and not choosing):
                continue
            args += ["--" + name.replace("_", "-"), str(value)]
        return args + ["--" + k.replace("_", "-") for k in FLAGS if getattr(self, k)]


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
