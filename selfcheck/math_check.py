"""`invoke same-math`: do the three frameworks do the same arithmetic? Every system-mode trains
LeNet-5/CIFAR-10 for 30 steps on the local cluster from one set of initial weights, each worker
reading its shard in one recorded order (bench/common/samemath.py), so that step k of every
synchronous system-mode computes on the same weights and images. Then:

- loaded weights: each framework's weights before the first step, read back into the
  canonical layout, equal the controller's bit for bit (a wrong layout conversion shows here,
  naming its layer);
- losses: every synchronous system-mode's loss at every step, per worker, within
  LOSS_TOLERANCE of every other's;
- final weights: per layer, the largest difference over the largest weight within
  WEIGHT_TOLERANCE;
- asynchronous system-modes: their loss falls, and how far it lies from the synchronous
  curve is said (staleness is expected, not a defect).

A disagreement names the system-mode that parts from the others (where the others agree among
themselves), the first step and the first layer, and fails the check.
"""
import json
import time
from pathlib import Path

import numpy as np

from bench.common import samemath as node_side
from harness.plan.options import ProvisionOptions
from harness import commands
from harness.nodes import datasets, provision
from harness.plan import matrix
from harness.run import hooks, launch
from harness.results import run_manifest
from contract.runfolder import RunFolder
from contract import cellconfig, nodefolder

# Relative tolerances, derived in docs/methodology.md ("Same arithmetic"): float32 kernels
# that sum in different orders differ by about 1e-7 per operation; over 30 steps those
# differences grew to at most LOSS_GROWTH here, and a tolerance 10x over that is still far
# below the smallest planted error's first difference
LOSS_TOLERANCE = 1e-4
WEIGHT_TOLERANCE = 1e-3
# With a noise floor (ResNets: batch norm and a fast-falling loss amplify rounding ~10x a
# step), a difference between frameworks passes within FLOOR_FACTOR x what one rounding step
# grew to in one framework at the same step: the frameworks round at every operation of
# every step, the floor's run only once, at the start (docs/methodology.md)
FLOOR_FACTOR = 10.0
# An asynchronous loss "falls" when its last steps' mean or its second half's mean is below
# 0.9 x its first steps' mean: stale updates put spikes in an async curve (TF's ResNet-18 went
# 0.15 -> 3.74 -> 1.72 in its last 10 steps: its last steps alone said "does not fall" in one
# run of two), while LeNet-5's falls slowly in 30 steps (its second half's mean lies at
# 0.87-0.89 x the first steps', its last steps' at 0.78)
FALLS = 0.9
WINDOW = 5  # steps averaged at each end
PLANTED = node_side.PLANTED


def run(inventory_name, stack_name, results, benchmark="lenet5-cifar10", systems=None,
        planted="", floor=None, against=None):
    """Provision, run the `math` size, collect, compare; returns the verdict (see
    compare) with the run's path. Prints the table and writes math.md, math.json and the
    loss curves beside the run. benchmark: lenet5-cifar10 (the check in CI) or a ResNet (a
    benchmark of minutes). floor (default: on for a ResNet): run the synchronous
    system-modes a second time from weights perturbed by one rounding step, and let each
    step's tolerance grow with the differences that perturbation grew to (noise_floor).
    against: an earlier clean run's folder (its `run`) on the same nodes: only `systems` run
    now, and the others' losses and weights are read from it (a planted error's test need not
    run the clean system-modes again)."""
    if against is None:
        provision.run(ProvisionOptions(inventory=inventory_name, stack=stack_name, size="math"))
    out = Path(results) / ("math-%s" % run_manifest.new_run_id())
    systems_run = math_run(inventory_name, stack_name, out, "run", benchmark, systems, planted)
    if against is not None:
        systems_run = dict(load(against), **systems_run)
    noise = None
    if floor if floor is not None else not benchmark.startswith("lenet5"):
        sync = ",".join(sorted(n for n, e in systems_run.items() if e["mode"] == "sync"))
        noise = noise_floor(systems_run, math_run(inventory_name, stack_name, out, "floor",
                                                  benchmark, sync, node_side.PERTURBED))
    found = compare(systems_run, noise)
    found.update(run=str(out / "run"), benchmark=benchmark)
    lines = table(found)
    (out / "math.md").write_text("\n".join(lines) + "\n")
    (out / "math.json").write_text(json.dumps(found, indent=1, default=float))
    curves(found, out / "math_losses.png")
    keep(stack_name, found, planted)
    print("\n".join(lines))
    print("written: %s, %s" % (out / "math.md", out / "math_losses.png"))
    return found


class SameMath(hooks.Hook):
    """The run's hook (harness/run/hooks.py), at each cell's prepare stage: every cell.json of
    a math cell carries the checksum of the initial weights the controller wrote, which every
    trainer rebuilds and checks (bench/common/samemath.py), and the error planted in it, if
    any (PLANTED, or the noise floor's PERTURBED weights)."""

    def __init__(self, planted=""):
        self.planted = planted

    def after(self, stage, run, value, cell=None):
        if stage == "prepare" and cell.math:
            for proc in value:
                proc.config.update(self.cell_config(cell, proc.config["classes"]))
                cellconfig.check(proc.config, "the cell.json of %s" % proc.label)
        return value

    def cell_config(self, cell, classes):
        """What a math cell's cell.json gets: its planted error and initial weights' sum."""
        seed = launch.TRAINING["seed"]
        return {"planted": self.planted, "init_checksum": node_side.checksum(
            node_side.initial_weights(cell.network, classes, seed))}


def math_run(inventory_name, stack_name, out, run_id, benchmark, systems, planted):
    outcome = commands.bench_named(inventory_name, stack_name, "math", out, run=run_id,
                                   benchmarks=benchmark, systems=systems,
                                   hooks=[SameMath(planted)])
    commands.collect_run(inventory_name, out, run_id)
    return load(outcome["path"])


def keep(stack_name, found, planted):
    """The newest verdict of a full check (no planted error, every system-mode) for this
    stack, which every later run's manifest and report carry."""
    if planted or len(found["loaded"]) < len(matrix.SYSTEMS):
        return
    path = run_manifest.same_math_path(stack_name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({
        "ok": found["ok"], "when": time.strftime("%Y-%m-%d %H:%M:%S"), "run": found["run"],
        "commit": (run_manifest.git_state().get("commit") or "")[:12],
        "benchmark": found.get("benchmark"),
        "noise_floor": FLOOR_FACTOR if found.get("noise") else None,
        "largest_loss_difference": max([max(p["loss_differences"] or [0.0])
                                        for p in found["sync"]] or [None]),
        "parted": found["parted"], "failed": found["failed"]}))


# --- reading ----------------------------------------------------------------------------

def load(run_path):
    """system -> {mode, status, losses: {rank: [loss per step]}, loaded: {rank: {layer:
    array}}, final: {...}} from the run's fetched files. An asynchronous coordinator's losses
    are its closures' in the order they started, under rank 0."""
    run_path = Path(run_path)
    out = {}
    for status in RunFolder(run_path).statuses():
        settings = status.get("settings") or {}
        entry = out.setdefault(settings["system"], {
            "mode": settings["mode"], "status": status.get("status"),
            "network": settings["network"],
            "classes": datasets.spec(settings["dataset"]).classes,
            "reason": status.get("reason") or "", "losses": {}, "loaded": {}, "final": {}})
        for folder in sorted((run_path / status["cell_id"]).glob("*/*-*")):
            role, rank = folder.name.rsplit("-", 1)
            read_process(entry, folder, role, int(rank))
    return out


def read_process(entry, folder, role, rank):
    result_file = folder / nodefolder.RESULT
    if role not in ("worker", "chief") or not result_file.is_file():
        return
    result = json.loads(result_file.read_text())
    steps = [s for s in result.get("steps") or [] if "loss" in s]
    if role == "chief":
        steps.sort(key=lambda s: s.get("start", 0.0))
    if steps:
        entry["losses"][rank] = [float(s["loss"]) for s in steps]
    for name, key in (("weights-loaded.npz", "loaded"), ("weights-final.npz", "final")):
        if (folder / name).is_file():
            with np.load(str(folder / name)) as arrays:
                entry[key][rank] = {layer: arrays[layer] for layer in arrays.files}


# --- comparing --------------------------------------------------------------------------

def compare(systems, noise=None):
    """{ok, sync: [pair rows], parted: [disagreements], loaded: [rows], asynchronous:
    [rows], failed: ["system: reason"], curves: {sync system: mean loss per step}}.
    noise: noise_floor's, which raises each step's and layer's tolerance to FLOOR_FACTOR
    times what one rounding step grew to there."""
    failed = ["%s: %s" % (name, e["reason"] or e["status"]) for name, e in systems.items()
              if e["status"] != "succeeded"]
    ran = {name: e for name, e in systems.items() if e["status"] == "succeeded"}
    sync = sorted(name for name, e in ran.items() if e["mode"] == "sync")
    pairs = [pair(a, ran[a], b, ran[b], noise) for i, a in enumerate(sync) for b in sync[i + 1:]]
    reference = reference_weights(ran)  # built once: ResNet-50's are 23M floats
    loaded = [loaded_row(name, ran[name], reference) for name in sorted(ran)]
    # a wrong load is the root of every later difference: named first
    parted = [{"system": r["system"], "step": 0, "layer": r["first_layer"],
               "what": "its weights before the first step are not the controller's"}
              for r in loaded if not r["ok"]] + disagreements(sync, pairs)
    asynchronous = [async_row(name, ran[name], ran, sync) for name in sorted(ran)
                    if ran[name]["mode"] == "async"]
    failed += (noise or {}).get("failed", [])
    ok = not failed and not parted and all(r["falls"] for r in asynchronous) and bool(pairs)
    return {"ok": ok, "failed": failed, "sync": pairs, "parted": parted, "loaded": loaded,
            "curves": {name: mean_curve(ran[name]["losses"]) for name in sync
                       if ran[name]["losses"]},
            "asynchronous": asynchronous, "noise": noise,
            "tolerance": {"loss": LOSS_TOLERANCE, "weights": WEIGHT_TOLERANCE,
                          "floor_factor": FLOOR_FACTOR if noise else None}}


def noise_floor(systems, perturbed):
    """Each synchronous system-mode against itself from weights one rounding step apart
    (node_side.PERTURBED): {per_step: largest relative loss difference over frameworks and
    workers at each step, layers: {layer: largest final-weight difference}, systems: {name:
    its own per-step differences}, failed}. It says how far float32's rounding alone carries
    two runs of one framework apart, step by step: differences between frameworks that stay
    within a few times that are rounding, not arithmetic."""
    own = {}
    failed = ["%s (noise floor): %s" % (name, e["reason"] or e["status"])
              for name, e in perturbed.items() if e["status"] != "succeeded"]
    for name, entry in sorted(perturbed.items()):
        if entry["status"] == "succeeded" and systems.get(name, {}).get("status") == \
                "succeeded":
            own[name] = pair(name, systems[name], name + " perturbed", entry)
    steps = min([len(p["loss_differences"]) for p in own.values()] or [0])
    per_step = [max(p["loss_differences"][k] for p in own.values()) for k in range(steps)]
    layers = {}
    for p in own.values():
        for layer, d in p["layers"]:
            layers[layer] = max(layers.get(layer, 0.0), d)
    return {"per_step": per_step, "layers": layers, "failed": failed,
            "systems": {name: p["loss_differences"] for name, p in own.items()}}


def loss_tolerance(noise, step):
    """The tolerance at `step` (from 0): LOSS_TOLERANCE, or FLOOR_FACTOR x the noise floor
    there where that is larger."""
    if not noise or step >= len(noise["per_step"]):
        return LOSS_TOLERANCE
    return max(LOSS_TOLERANCE, FLOOR_FACTOR * noise["per_step"][step])


def weight_tolerance(noise, layer):
    floor = (noise or {}).get("layers", {}).get(layer, 0.0)
    return max(WEIGHT_TOLERANCE, FLOOR_FACTOR * floor)


def pair(a, entry_a, b, entry_b, noise=None):
    """Two synchronous system-modes: the loss differences per step (largest over the
    workers), the first step over the tolerance, the final weights' per-layer differences."""
    ranks = sorted(set(entry_a["losses"]) & set(entry_b["losses"]))
    steps = min(len(entry_a["losses"][r]) for r in ranks) if ranks else 0
    per_step = [max(relative(entry_a["losses"][r][k], entry_b["losses"][r][k]) for r in ranks)
                for k in range(steps)]
    layers = layer_differences(entry_a["final"].get(0), entry_b["final"].get(0))
    first_step = next((k + 1 for k, d in enumerate(per_step) if d > loss_tolerance(noise, k)),
                      None)
    first_layer = next((name for name, d in layers if d > weight_tolerance(noise, name)), None)
    return {"systems": [a, b], "loss_differences": per_step, "layers": layers,
            "first_step": first_step, "first_layer": first_layer,
            "ok": bool(steps) and first_step is None and first_layer is None and bool(layers)}


def relative(value, against):
    return abs(value - against) / max(abs(against), 1e-12)


def layer_differences(a, b):
    """[(layer, largest |a - b| over the largest |b|)] in the network's order."""
    if not a or not b:
        return []
    return [(name, float(np.max(np.abs(a[name] - b[name])) / max(np.max(np.abs(b[name])),
                                                                    1e-12)))
            for name in a if name in b]


def disagreements(sync, pairs):
    """The system-modes that part: one that disagrees with every other while those agree
    among themselves is named alone; otherwise every failing pair is."""
    failing = [p for p in pairs if not p["ok"]]
    if not failing:
        return []
    for name in sync:
        mine = [p for p in pairs if name in p["systems"]]
        others = [p for p in pairs if name not in p["systems"]]
        if mine and all(not p["ok"] for p in mine) and all(p["ok"] for p in others):
            first = min(mine, key=lambda p: p["first_step"] or 10 ** 9)
            return [{"system": name, "step": first["first_step"],
                     "layer": first["first_layer"],
                     "what": "parts from %s" % " and ".join(
                         s for p in mine for s in p["systems"] if s != name)}]
    return [{"system": " / ".join(p["systems"]), "step": p["first_step"],
             "layer": p["first_layer"], "what": "part"} for p in failing]


def reference_weights(ran):
    """The controller's initial weights by layer, as every framework must read them back."""
    if not ran:
        return {}
    first = ran[min(ran)]
    network, classes = first.get("network", "lenet5"), first.get("classes", 10)
    names = [n for n, _ in node_side.canonical_shapes(network, classes)]
    return dict(zip(names, node_side.initial_weights(network, classes, 0)))


def loaded_row(name, entry, reference):
    layers = layer_differences(entry["loaded"].get(min(entry["loaded"]) if entry["loaded"]
                                                   else 0), reference)
    first = next((layer for layer, d in layers if d > 0), None)
    return {"system": name, "layers": layers, "first_layer": first,
            "ok": bool(layers) and first is None}


def async_row(name, entry, ran, sync):
    """Does the loss fall, and how far its last steps lie from the synchronous curve's."""
    losses = [loss for rank in sorted(entry["losses"]) for loss in entry["losses"][rank]] \
        if len(entry["losses"]) == 1 else mean_curve(entry["losses"])
    first, last = np.mean(losses[:WINDOW]), np.mean(losses[-WINDOW:])
    later = np.mean(losses[len(losses) // 2:])
    reference = [mean_curve(ran[s]["losses"]) for s in sync]
    sync_last = float(np.mean([np.mean(c[-WINDOW:]) for c in reference])) if reference \
        else float("nan")
    return {"system": name, "first": float(first), "last": float(last),
            "second_half": float(later),
            "falls": bool(min(last, later) < FALLS * first),
            "sync_last": sync_last,
            "from_sync": float(last / sync_last - 1) if sync_last == sync_last else None,
            "curve": [float(v) for v in losses]}


def mean_curve(losses):
    steps = min(len(v) for v in losses.values())
    return [float(np.mean([losses[r][k] for r in losses])) for k in range(steps)]


# --- printing ---------------------------------------------------------------------------

def table(found):
    lines = ["# Same arithmetic: %s" % ("passed" if found["ok"] else "FAILED"), "",
             "Tolerances: loss %g, weights %g (relative; docs/methodology.md)%s."
             % (LOSS_TOLERANCE, WEIGHT_TOLERANCE, ", or %gx the noise floor where that is "
                "larger" % FLOOR_FACTOR if found.get("noise") else ""), ""]
    lines += ["| pair | loss diff step 1 | step 10 | step 30 | largest | final weights, "
              "largest layer diff | verdict |", "|---|---|---|---|---|---|---|"]
    for p in found["sync"]:
        d = p["loss_differences"]
        at = ["%.1e" % d[k - 1] if len(d) >= k else "-" for k in (1, 10, 30)]
        worst = max(p["layers"], key=lambda x: x[1]) if p["layers"] else ("-", float("nan"))
        lines.append("| %s | %s | %s | %s | %.1e | %s %.1e | %s |" % (
            " / ".join(p["systems"]), at[0], at[1], at[2], max(d) if d else float("nan"),
            worst[0], worst[1], "agree" if p["ok"] else "PART"))
    lines += ["", "| system | loaded weights | loss first %d steps | second half | last %d | "
              "synchronous last %d | falls (last or second half < %.1fx first) |"
              % (WINDOW, WINDOW, WINDOW, FALLS), "|---|---|---|---|---|---|---|"]
    asynchronous = {r["system"]: r for r in found["asynchronous"]}
    for row in found["loaded"]:
        a = asynchronous.get(row["system"])
        lines.append("| %s | %s | %s | %s | %s | %s | %s |" % (
            row["system"], "bit for bit" if row["ok"] else "differ from %s" % row["first_layer"],
            "%.4f" % a["first"] if a else "", "%.4f" % a["second_half"] if a else "",
            "%.4f" % a["last"] if a else "",
            "%.4f (%+.1f%%)" % (a["sync_last"], 100 * a["from_sync"]) if a and a["from_sync"]
            is not None else "", ("yes" if a["falls"] else "NO") if a else ""))
    lines += floor_lines(found.get("noise"))
    for p in found["parted"]:
        lines.append("\n**%s** %s: first at step %s, first layer %s"
                     % (p["system"], p["what"], p["step"], p["layer"]))
    for failure in found["failed"]:
        lines.append("\n**failed**: %s" % failure)
    return lines


def floor_lines(noise):
    """The noise floor's rows: each framework against itself from perturbed weights."""
    if not noise:
        return []
    lines = ["", "Noise floor: each framework against itself from weights one rounding "
             "step (%.1e) apart." % node_side.PERTURBATION, "",
             "| system | loss diff step 1 | step 10 | step 30 | largest |", "|---|---|---|---|---|"]
    for name, d in sorted(noise["systems"].items()):
        at = ["%.1e" % d[k - 1] if len(d) >= k else "-" for k in (1, 10, 30)]
        lines.append("| %s | %s | %s | %s | %.1e |" % (name, at[0], at[1], at[2],
                                                      max(d) if d else float("nan")))
    return lines


def curves(found, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    figure, axis = plt.subplots(figsize=(7, 4))
    for name, curve in sorted(found["curves"].items()):
        axis.plot(range(1, len(curve) + 1), curve, label=name)
    steps = max([len(c) for c in found["curves"].values()] or [0])
    for row in found["asynchronous"]:  # a coordinator's closures, spread over the steps
        curve = row["curve"]
        axis.plot(np.linspace(1, steps or len(curve), len(curve)), curve, label=row["system"],
                  linestyle="--")
    axis.set_xlabel("step")
    axis.set_ylabel("loss (worker mean)")
    axis.legend()
    figure.tight_layout()
    figure.savefig(str(path))
    plt.close(figure)
