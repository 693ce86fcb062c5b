"""What `invoke bench` is asked, as one type: tasks.py fills it from the command line, the
callers of commands.bench (explain, the self-checks) by name, a resumed run checks it against
its manifest, and a Slurm batch script turns it back into options."""
from dataclasses import dataclass, fields

from contract.errors import UserError

# options that choose cells: a resumed run's cells come from its manifest instead
CHOOSING = ("benchmarks", "systems", "epochs", "steps", "data", "network", "nodes",
            "profile_steps")
# how a run goes, not what it is: left out of the manifest
RUNNING = ("dry_run", "fail_fast", "retry_failed", "force", "max_hours")
FLAGS = ("fail_fast", "retry_failed", "force")  # the ones a batch script passes on
ALIASES = {"node_counts": "nodes", "round_": "round"}  # the callers' older names


@dataclass
class BenchOptions:
    benchmarks: str = None
    systems: str = None
    epochs: int = None
    steps: int = None
    data: str = None
    timeout: float = None
    repeats: int = None
    network: str = None
    nodes: str = None  # node counts, e.g. "1,2,3"
    profile_steps: int = None
    planted: str = ""  # the same-math check's planted error
    environment: str = None  # a factor's level (invoke explain): framework -> "NAME=value;..."
    threads: int = 0
    round: int = None  # run only the cells of that repeat (explain interleaves rounds)
    cells: list = None  # a new run's cells, planned by the caller (explain)
    order_seed: int = None
    dry_run: bool = False
    fail_fast: bool = False
    retry_failed: bool = False
    force: bool = False
    max_hours: float = None

    @classmethod
    def given(cls, **options):
        """From keyword arguments, the older names included; an unknown name is an error."""
        named = {ALIASES.get(k, k): v for k, v in options.items()}
        unknown = sorted(set(named) - {f.name for f in fields(cls)})
        if unknown:
            raise TypeError("bench has no option %s" % ", ".join(unknown))
        return cls(**named)

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
                if f.name not in RUNNING and f.name != "cells"}

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
