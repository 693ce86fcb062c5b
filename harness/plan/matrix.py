"""A run's size -> the list of cells to run. A cell is one benchmark under one system-mode."""
import hashlib
import json
import random
import zlib
from dataclasses import asdict, dataclass, replace

import registry

from contract import paper
from contract.errors import UserError

BENCHMARKS = paper.BENCHMARKS  # Table III: benchmark -> (network, dataset)

# system-mode -> framework, mode, template, roles, ports, ...: registry/systems.yml
SYSTEMS = registry.systems()
NETWORKS_BUILT = {name: tuple(f["networks"]) for name, f in registry.frameworks().items()}

# Generous upper bound on one step (s) on a 4-vCPU node; sets the default cell timeout.
STEP_BOUND = {"lenet5": 2, "alexnet": 20, "resnet18": 20, "resnet50": 40}
STARTUP_BOUND = 300

# The sizes that measure run every cell under the paper's releases and under today's, each
# stack a factor of every random block (the command line's --stack or --stacks picks others);
# the sizes that check the machinery run today's alone.
PAPER_AND_TODAY = ("paper-py39", "current")

@dataclass(frozen=True)
class Size:
    """A run's size: what every cell of it runs (a cell's options may override some)."""
    benchmarks: tuple
    epochs: int
    steps: int  # per epoch
    warmup: int  # steps before the timed ones
    data: str  # synthetic or real
    profile_steps: int  # profiled steps after the timed ones (the operator profile)
    systems: tuple = tuple(SYSTEMS)
    stacks: tuple = ()  # the stacks it runs every cell under ((): --stack's one)
    steps_by_network: tuple = ()  # (network, steps per epoch) where a network's differ
    calibration_steps: int = 0  # measured calibration passes (0: launch.TRAINING's)
    precision: float = 0.0  # the verdict size's target half-width (0: fixed length)
    max_epochs: int = 0  # the verdict size's ceiling of epochs (0: fixed length)
    repeats: int = 1
    math: bool = False  # the same-math check's canonical weights and batch order

    def steps_of(self, network):
        return dict(self.steps_by_network).get(network, self.steps)


SIZES = {
    # Tables III and IV of the paper
    "paper": Size(tuple(BENCHMARKS), paper.EPOCHS, paper.STEPS_PER_EPOCH, warmup=10,
                  data="real", profile_steps=20, stacks=PAPER_AND_TODAY),
    "quick": Size(tuple(BENCHMARKS), 1, 30, warmup=5, data="synthetic", profile_steps=10),
    # a projection of paper: per cell, three independent repeats (run-to-run variation is
    # what one run's interval misses) of two short epochs, the first uncached and the second
    # cached as TensorFlow caches them; the analysis projects the paper's 10 x 396 steps from
    # their rates. 16 steps an epoch leave MSER-5 the 15 measured steps it needs; LeNet-5's
    # 15-25 ms steps get 64, as 16 of them time less than this machine's own swings. Sized
    # to stay within 5% of the paper's length (docs/methodology.md, "The verdict size")
    "verdict": Size(tuple(BENCHMARKS), 2, 16, warmup=1, data="real", profile_steps=5,
                    stacks=PAPER_AND_TODAY, steps_by_network=(("lenet5", 64),),
                    calibration_steps=5, precision=0.02, max_epochs=2, repeats=3),
    # the same-math check (selfcheck/math_check.py): 30 steps from one set of weights and one
    # batch order in every system-mode; losses and final weights compared, no timing
    "math": Size(("lenet5-cifar10",), 1, 30, warmup=2, data="synthetic", profile_steps=0,
                 math=True),
    # every system-mode, about 10 steps: a check that everything runs, not a measurement
    "smoke": Size(("lenet5-cifar10",), 1, 12, warmup=2, data="synthetic", profile_steps=5),
}
LOCAL_BATCH = paper.LOCAL_BATCH  # Table IV: global 126 over 3 workers


def shape(size):
    """A size's steps in words ("3 independent repeats of 2 x 16 steps each, 2 x 64 for
    LeNet-5"), for the help texts and the docs (a test holds the README and
    docs/reproducing.md to it)."""
    spec = SIZES[size]

    def length(count):
        return "%d" % count if spec.epochs == 1 else "%d x %d" % (spec.epochs, count)
    words = length(spec.steps) + " steps"
    if spec.repeats > 1:
        words = "%d independent repeats of %s each" % (spec.repeats, words)
    for network, count in spec.steps_by_network:
        words += ", %s for %s" % (length(count), {"lenet5": "LeNet-5"}.get(network, network))
    return words


@dataclass(frozen=True)
class Cell:
    benchmark: str
    network: str
    dataset: str
    system: str
    framework: str
    mode: str
    nodes: int
    local_batch: int
    epochs: int
    steps_per_epoch: int
    warmup_steps: int
    data: str
    repeat: int = 0
    link: str = ""  # link setting on the emulated cluster (`bench --network`), "" = as it is
    profile_steps: int = 0  # profiled steps after the timed ones (operator profile), 0 = none
    calibration_steps: int = 0  # measured calibration passes, 0 = launch.TRAINING's
    # the verdict size: stop once the mean step is known to +-precision, between `epochs`
    # and `max_epochs` epochs, each over the first steps_per_epoch x local_batch images
    precision: float = 0.0  # 0: exactly epochs x steps_per_epoch steps
    max_epochs: int = 0
    # the same-math check (selfcheck/math_check.py): canonical weights and batch order, losses and
    # final weights kept (an error it plants is a hook's, harness/run/hooks.py)
    math: bool = False
    # a factor's level (invoke explain, registry/factors.yml): variables exported in this
    # framework's launch script ("NAME=value;NAME=value", after the stack's own), and the
    # compute threads per worker (0: the node's vCPUs, the package's thread budget)
    environment: str = ""
    threads: int = 0
    stack: str = ""  # the version set (stacks/<name>.yml); "" in runs from before cells had one

    @property
    def settings(self):
        return asdict(self)

    @property
    def config_hash(self):
        settings = self.settings
        del settings["profile_steps"]  # run after the timed steps: it changes no measurement
        for optional in ("link", "precision", "max_epochs", "math", "environment",
                         "threads", "calibration_steps", "stack"):
            if not settings[optional]:
                del settings[optional]  # ids of cells without them stay what they were
        text = json.dumps(settings, sort_keys=True)
        return hashlib.sha1(text.encode()).hexdigest()[:8]

    @property
    def id(self):
        return "%s_%s_r%d_%s" % (self.benchmark, self.system, self.repeat, self.config_hash)

    @property
    def exported(self):
        """The factor's variables as a dict (empty: none)."""
        return dict(pair.split("=", 1) for pair in self.environment.split(";") if pair)

    @property
    def total_steps(self):
        """The most steps the cell may time (the verdict size's ceiling)."""
        return max(self.epochs, self.max_epochs if self.precision else 0) * self.steps_per_epoch

    @property
    def subset_images(self):
        """The verdict size's epochs run over the first images of each shard only."""
        return self.steps_per_epoch * self.local_batch if self.precision else 0

    @property
    def input_size(self):
        return paper.input_size(self.network)

    def default_timeout(self):
        # a profiled step may take twice a timed one
        steps = self.total_steps + 2 * self.profile_steps
        return STARTUP_BOUND + steps * STEP_BOUND[self.network]


@dataclass(frozen=True)
class Choice:
    """What a plan is asked beyond its size: the user's filters and overrides (bench's
    options, harness/plan/options.py) and what the package's own callers set. environment:
    framework -> "NAME=value;..." (a factor's level, invoke explain); repeats: the size's (the
    verdict size's 3, else 1) unless given; order_seed: with repeats, each repeat is a block of
    every cell, in a random order drawn from it (seed + repeat); stacks: the version sets every
    cell runs under, each a cell of its own in every block (None: cells that name none)."""
    benchmarks: str = None
    systems: str = None
    epochs: int = None
    steps: int = None
    data: str = None
    repeats: int = None
    networks: list = None
    node_counts: list = None
    profile_steps: int = None
    environment: dict = None
    threads: int = 0
    order_seed: int = None
    stacks: list = None


def plan(size, nodes, choice=None, **given):
    """Cells of a size on `nodes` nodes, filtered and overridden by a Choice, whole (bench's:
    BenchOptions.choice) or by its fields' names in `given` (another name is a TypeError), in
    run order."""
    choice = choice or Choice(**given)
    if size not in SIZES:
        raise UserError("unknown size %r" % size, "use one of: %s" % ", ".join(SIZES))
    spec = SIZES[size]
    chosen_benchmarks = _pick("benchmark", choice.benchmarks, spec.benchmarks, BENCHMARKS)
    chosen_systems = _pick("system", choice.systems, spec.systems, SYSTEMS)
    cells = []
    for benchmark in chosen_benchmarks:
        network, dataset = BENCHMARKS[benchmark]
        steps = choice.steps or spec.steps_of(network)
        for system in chosen_systems:
            framework = SYSTEMS[system]["framework"]
            if network not in NETWORKS_BUILT[framework]:
                raise UserError("%s has no %s network yet" % (system, network),
                                "choose --benchmarks from those built: %s"
                                % ", ".join(NETWORKS_BUILT[framework]))
            base = Cell(benchmark=benchmark, network=network, dataset=dataset, system=system,
                        framework=framework, mode=SYSTEMS[system]["mode"], nodes=nodes,
                        local_batch=LOCAL_BATCH, epochs=choice.epochs or spec.epochs,
                        steps_per_epoch=steps, warmup_steps=min(spec.warmup, steps - 1),
                        data=choice.data or spec.data,
                        profile_steps=spec.profile_steps if choice.profile_steps is None
                        else choice.profile_steps, precision=spec.precision,
                        calibration_steps=spec.calibration_steps, max_epochs=spec.max_epochs,
                        math=spec.math,
                        environment=(choice.environment or {}).get(framework, ""),
                        threads=choice.threads)
            cells += [replace(base, stack=stack) for stack in choice.stacks or [""]]
    repeats = choice.repeats or spec.repeats
    # networks outermost: the links are reshaped once per setting, not once per cell; within
    # a setting, randomized complete blocks: repeat r of every cell runs before
    # repeat r + 1 of any, each block in its own seeded random order. Within a block neither
    # the machine's slow drift nor what ran just before biases one system-mode; drift between
    # blocks is a block effect that cancels in a ratio of two cells (analysis/stats.py,
    # paired). The stack is a factor like the system-mode: both stacks' cells share each
    # block. Without a seed: the whole matrix in order, then again.
    return [cell for n in choice.networks or [""] for k in choice.node_counts or [nodes]
            for r in range(repeats)
            for cell in in_order([replace(c, repeat=r, link=n, nodes=k) for c in cells],
                                 None if repeats == 1 or choice.order_seed is None
                                 else choice.order_seed + r)]


def order_seed(run_id):
    """The seed of a new run's cell order: drawn from its id, so that whoever knows the id
    (a fault test waiting for the first cell) knows the order bench runs."""
    return zlib.crc32(run_id.encode())


def in_order(cells, seed):
    """The cells shuffled by a generator seeded with `seed` (None: as they are)."""
    if seed is None or len(cells) < 2:
        return cells
    shuffled = list(cells)
    random.Random(seed).shuffle(shuffled)
    return shuffled


def _pick(kind, wanted, default, known):
    if not wanted:
        return list(default)
    names = [w.strip() for w in wanted.split(",") if w.strip()] if isinstance(wanted, str) \
        else list(wanted)
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UserError("unknown %s %s" % (kind, ", ".join(map(repr, unknown))),
                        "%ss are: %s" % (kind, ", ".join(known)))
    return names
