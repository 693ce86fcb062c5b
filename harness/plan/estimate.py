"""How long a plan will take, before it runs (`bench --dry-run`, `--max-hours`, the ETA).

A cell's basis is the newest earlier run of the same cell (benchmark, system-mode, nodes, link)
on the same inventory and stack, a real run or one of `invoke estimate`, which times a few steps
of every cell. From its start-up, steady wall step and the rest of its duration (calibration,
profiled steps, teardown), the cell is scaled to the planned steps:

    expected = start-up + planned steps x wall step + the rest

The verdict size's planned steps are its ceiling: its estimate is an upper bound.

A cell that has never run has a prior instead: the figures of a first run on this machine
(PRIOR_*), scaled by how fast the nodes ran the contention probe against this machine's
nodes. It is said to be a prior, and rough (PRIOR_FACTOR either way); the cells' own times
replace it as soon as the cells have run once.
"""
from dataclasses import dataclass

from contract import manifest as manifests, runfolder

ESTIMATE_STEPS = 8  # `invoke estimate`: steps per cell (warm-up 2 included)

# The prior's figures: the verdict run 20261124-014642 on this project's 2-core machine (2
# own-core local nodes, 1 thread each, current stack), whose nodes ran the probe at PRIOR_SPEED
PRIOR_SPEED = 470.0  # contention probe: kernel chunks per second per node, alone
PRIOR_STARTUP = 6.8  # s, start-up to the end of the first step: the cells' median
PRIOR_STEP = {"lenet5": 0.022, "alexnet": 1.47, "resnet18": 0.43, "resnet50": 0.83}  # s, median
PRIOR_REST_STEPS = 2  # the rest of a cell (calibration, profiled steps), in profiled steps
PRIOR_REST = 3.0  # s: teardown and result files
PRIOR_FACTOR = 2.0  # how far off a prior may be, either way
PRIOR = "prior"  # the run id of a prior's Basis


@dataclass
class Basis:
    run_id: str
    startup: float
    wall_step: float
    rest: float  # the cell's seconds beyond start-up and its timed steps

    def seconds(self, cell):
        return self.startup + cell.total_steps * self.wall_step + self.rest


def key(settings, stack=""):
    """A cell's key: its settings that set its duration; stack: the run's only stack, for a
    cell that names none."""
    return (settings["benchmark"], settings["system"], settings["nodes"],
            settings.get("link") or "", settings.get("stack") or stack)


def history(results, inventory_name, stack_names):
    """key -> Basis from the newest run (by start time) of each cell on this inventory under
    one of these stacks."""
    found = {}
    for manifest, run in sorted(_runs(results), key=lambda m_r: m_r[0].get("started") or 0):
        names = manifests.stack_names(manifest)
        if (manifest.get("inventory") or {}).get("name") != inventory_name or \
                not set(names) & set(stack_names):
            continue
        timings = _timings(run)
        for status in run.statuses():
            # a cell of a run from before cells named their stack ran under its only one
            settings = dict(status.get("settings") or {})
            settings["stack"] = settings.get("stack") or names[0]
            timing = timings.get(status.get("cell_id"))
            if status.get("status") != "succeeded" or not timing or \
                    not status.get("settings") or settings["stack"] not in stack_names:
                continue
            steps = timing["steps"] or settings["epochs"] * settings["steps_per_epoch"]
            rest = max(0.0, status.get("seconds", 0.0) - timing["startup"]
                       - steps * timing["wall_step"])
            found[key(settings)] = Basis(run.name, timing["startup"], timing["wall_step"], rest)
            if len(names) == 1:  # a run of one stack's cells name none: found by either key
                found[key(dict(settings, stack=""))] = found[key(settings)]
    return found


def prior(cell, probe):
    """The Basis of a cell that has never run, from the contention probe of its nodes (the
    slowest node's speed alone); None without a probe."""
    speeds = [v["alone"] for v in ((probe or {}).get("nodes") or {}).values() if v.get("alone")]
    if not speeds:
        return None
    scale = PRIOR_SPEED / min(speeds)
    step = PRIOR_STEP[cell.network] * scale
    return Basis(PRIOR, PRIOR_STARTUP * scale, step,
                 PRIOR_REST + PRIOR_REST_STEPS * cell.profile_steps * step)


SLOW_NODES = 3.0  # below this many times slower than PRIOR_SPEED, a machine's own drift


def slowness(probe):
    """How many times slower than PRIOR_SPEED the slowest probed node computes, where it is
    SLOW_NODES times or more (emulated VMs: 15-20x here), else 1: the harness's bounds and
    polling stay as they are on nodes of ordinary speed."""
    nodes = (probe or {}).get("nodes") or {}
    speeds = [nodes[name]["alone"] for name in hardware_read(probe) if nodes[name].get("alone")]
    ratio = PRIOR_SPEED / min(speeds) if speeds else 1.0
    return ratio if ratio >= SLOW_NODES else 1.0


def hardware_read(probe):
    """The probed nodes whose speed alone tells their hardware: those the probe's settling
    found quiet. A node that other programs kept busy before the probe computed at what their
    load left it, which says nothing of its CPUs; where every node was busy, all are read
    (nothing better is known, and the probe's line says that they were busy)."""
    nodes = sorted(((probe or {}).get("nodes") or {}))
    settled = (probe or {}).get("settle") or {}
    quiet = [name for name in nodes if (settled.get(name) or {}).get("quiet", True)]
    return quiet or nodes


def plan_seconds(cells, basis, probe=None, stack=""):
    """[(cell, seconds or None, run id of the basis or PRIOR or None)] and the total of the
    known; with the nodes' contention probe, a cell without a basis gets a prior. stack: the
    run's first, the stack of a cell that names none."""
    rows = []
    for cell in cells:
        found = basis.get(key(cell.settings, stack)) or prior(cell, probe)
        rows.append((cell, found.seconds(cell) if found else None,
                     found.run_id if found else None))
    return rows, sum(s for _, s, _ in rows if s is not None)


def describe(rows, total):
    """Lines for the dry run: each cell's expected duration and its basis, then the total."""
    lines = []
    for cell, seconds, run_id in rows:
        basis = "a prior" if run_id == PRIOR else "run %s" % run_id
        lines.append("  %-55s %s" % (cell.id, "%s (basis: %s)" % (duration(seconds), basis)
                                     if seconds is not None else "no basis yet"))
    return lines + [summary(rows, total)]


def summary(rows, total):
    """One line: the expected total, what it rests on, and the cells it cannot tell."""
    unknown = sum(1 for _, s, _ in rows if s is None)
    priors = [s for _, s, run_id in rows if run_id == PRIOR]
    if unknown == len(rows):  # no time at all: never "0 s"
        return "expected: no basis for any of the %d cell(s): `invoke estimate` times a few " \
            "steps of each" % len(rows)
    line = "expected: %s for %d of %d cell(s)" % (duration(total), len(rows) - unknown,
                                                  len(rows))
    if priors:
        line += " (%d from a prior: %s, this machine's first-run figures scaled by the " \
                "contention probe, may be off %gx either way; %d from earlier runs)" % (
                    len(priors), duration(sum(priors)), PRIOR_FACTOR,
                    len(rows) - unknown - len(priors))
    if unknown:
        line += "; %d without a basis: `invoke estimate` times a few steps of each" % unknown
    return line


def duration(seconds):
    if seconds is None:
        return "?"
    if seconds < 120:
        return "%.0f s" % seconds
    if seconds < 7200:
        return "%.1f min" % (seconds / 60)
    return "%.1f h" % (seconds / 3600)


def _runs(results):
    for run in runfolder.every_run(results):
        manifest = run.manifest()
        if manifest:
            yield manifest, run


def _timings(run):
    """cell id -> {startup, wall_step, steps}: the slowest timing process's."""
    out, per = {}, {}
    for r in run.records():
        if r.get("metric") in ("startup_seconds", "wall_step", "step_samples", "warmup_steps"):
            proc = (r["cell_id"], r.get("node"), r.get("role"), r.get("rank"))
            per.setdefault(proc, {})[r["metric"]] = r["value"]
    for (cell_id, _, _, _), values in per.items():
        if "wall_step" not in values or "startup_seconds" not in values:
            continue
        steps = values.get("step_samples", 0) + values.get("warmup_steps", 0)
        best = out.get(cell_id)
        if best is None or values["wall_step"] > best["wall_step"]:
            out[cell_id] = {"startup": values["startup_seconds"],
                            "wall_step": values["wall_step"], "steps": steps}
    return out
