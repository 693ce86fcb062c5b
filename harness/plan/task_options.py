"""The options of the tasks that run no matrix of their own: collect, analyze, compare and
artifact read what a run left; stack-envs writes files; the benchmarks and checks of
selfcheck/ run what they measure. Each task's options are one dataclass, as bench's are
(options.py): tasks.py gives Invoke a parameter per field with help, and fills the task's
object from the command line, checking each count (`least`) on the way."""
from dataclasses import dataclass, field, fields

from .options import check_positive, common, option

RUN = "run id (default: the latest)"
BENCHMARK = "benchmark whose network runs [lenet5-cifar10]"


def required(help):
    """A field the command line must give, in order (a positional argument)."""
    return field(metadata={"help": help, "kind": None, "least": None, "passed_on": False,
                           "required": True})


def built(options_type, given):
    """options_type from the command line's values: each count (`least`) a whole number at
    least that, or a UserError naming the option."""
    for f in fields(options_type):
        if f.metadata.get("least") is not None and f.name in given:
            given[f.name] = check_positive(f.name, given[f.name], f.metadata["least"])
    return options_type(**given)


def listed(text):
    """A comma-separated option as a list; None for all."""
    return text.split(",") if text else None


@dataclass
class CollectOptions:
    """`invoke collect`'s options."""
    inventory: str = common("inventory")
    run: str = option(help=RUN)
    results: str = common("results")


LEDGER = ("the ledger every analysed run is added to, one SQLite file that several users or "
          "machines may share [<results>/ledger.sqlite]")


@dataclass
class AnalyzeOptions:
    """`invoke analyze`'s options."""
    run: str = option(help="run id (default: the latest), or an explain folder (explain-<id>)")
    results: str = common("results")
    ledger: str = option(help=LEDGER)


@dataclass
class LedgerAddOptions:
    """`invoke ledger.add`'s options: an analysed run added (analyze does it itself)."""
    run: str = option(help=RUN)
    results: str = common("results")
    ledger: str = option(help=LEDGER)


@dataclass
class LedgerImportOptions:
    """`invoke ledger.import`'s options."""
    archive: str = required("an archive `invoke artifact` made (another machine's, say)")
    digest: str = option(help="the archive's sha256 as its author published it: checked before "
                              "anything is read (its SHA256SUMS prove integrity, not who made "
                              "it)")
    results: str = common("results")
    ledger: str = option(help=LEDGER)


@dataclass
class LedgerExportOptions:
    """`invoke ledger.export`'s options."""
    out: str = required("the folder for the text form (CSV per table, in key order)")
    results: str = common("results")
    ledger: str = option(help=LEDGER)


@dataclass
class LedgerCoverageOptions:
    """`invoke ledger.coverage`'s options."""
    results: str = common("results")
    ledger: str = option(help=LEDGER)


@dataclass
class LedgerClaimsOptions:
    """`invoke ledger.claims`'s options."""
    results: str = common("results")
    ledger: str = option(help=LEDGER)
    claims: str = option(help="comma-separated claim ids [every claim measured]")


@dataclass
class CompareOptions:
    """`invoke compare`'s options: the two runs, in order."""
    run_a: str = required("the first run's id (e.g. a run on the paper-py39 stack)")
    run_b: str = required("the second run's id (e.g. the same matrix on the current stack)")
    results: str = common("results")
    out: str = option(help="folder for the report [<results>/compare-<A>-vs-<B>]")


@dataclass
class ArtifactOptions:
    """`invoke artifact`'s options."""
    run: str = option(help=RUN)
    results: str = common("results")
    verify: str = option(help="path of an artifact to check instead: its sums, and its report "
                              "rebuilt from its records")


@dataclass
class StackEnvsOptions:
    """`invoke stack-envs`'s options (no invoke.yaml default: every stack)."""
    stack: str = option(help="one stack (default: every stack in stacks/)")


@dataclass
class OverheadOptions:
    """`invoke overhead`'s options."""
    inventory: str = common("inventory")
    stack: str = common("stack")
    benchmark: str = option("lenet5-cifar10", BENCHMARK)
    steps: int = option(200, "measured steps per run [200]", least=1)
    rounds: int = option(5, "bare/instrumented pairs [5]", least=1)
    frameworks: str = option(help="comma-separated subset of {frameworks} [all]")


@dataclass
class CrosscheckOptions:
    """`invoke crosscheck`'s options."""
    inventory: str = common("inventory")
    stack: str = common("stack")
    benchmark: str = option("lenet5-cifar10", BENCHMARK)
    steps: int = option(20, "calibration and profiled steps [20]", least=1)


@dataclass
class SlurmBenchOptions:
    """`invoke slurm-bench`'s options."""
    stack: str = common("stack")
    repeats: int = option(2, "smoke runs each way, interleaved [2]", least=1)
    systems: str = option(help="comma-separated subset [all five]")
    results: str = common("results")


@dataclass
class AnalysisBenchOptions:
    """`invoke analysis-bench`'s options."""
    repeats: int = option(3, "repeats of each of the 30 cells [3]", least=1)
    hours: float = option(1.0, "hours of 1 Hz memory log per process [1]")


@dataclass
class VerdictCheckOptions:
    """`invoke verdict-check`'s options."""
    inventory: str = common("inventory")
    stack: str = common("stack")
    systems: str = option(help="comma-separated subset [all five]")
    benchmark: str = option("lenet5-cifar10", "the benchmark run at full length "
                                              "[lenet5-cifar10]")
    results: str = common("results")


@dataclass
class SameMathOptions:
    """`invoke same-math`'s options."""
    inventory: str = common("inventory")
    stack: str = common("stack")
    systems: str = option(help="comma-separated subset of system-modes [all five]")
    results: str = common("results")
    plant: str = option("", "put in one error on purpose, which the check must catch (a test "
                            "of the check): one of {planted_list}")
    benchmark: str = option("lenet5-cifar10", "lenet5-cifar10 (the check CI runs) or "
                                              "resnet18-cifar10 / resnet50-cifar10 (minutes) "
                                              "[lenet5-cifar10]")
    floor: bool = option(False, "also run each framework against itself from perturbed weights "
                                "and let the tolerance follow that noise floor (always on for "
                                "the ResNets)")


@dataclass
class ReferenceCheckOptions:
    """`invoke reference-check`'s options."""
    inventory: str = common("inventory")
    stack: str = common("stack")
    rounds: int = option(6, "interleaved rounds [6]", least=1)
    steps: int = option(5, "steps of each model per round [5]", least=1)
    frameworks: str = option(help="comma-separated subset of {frameworks} [all]")
    networks: str = option(help="comma-separated subset of resnet18, resnet50, alexnet [all]")


@dataclass
class VmBenchOptions:
    """`invoke vm-bench`'s options."""
    stack: str = option("paper-py39", "stack whose Python the box has [paper-py39]")
    systems: str = option(help="comma-separated system-modes, one smoke cell each [{vm_smoke}]")
    benchmark: str = option("lenet5-cifar10", "the smoke cells' benchmark [lenet5-cifar10]")
    results: str = common("results")
    keep: bool = option(False, "leave the VMs up at the end")
