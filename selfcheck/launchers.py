"""`invoke slurm-bench`: what launching through Slurm costs. The smoke matrix on the emulated
hosts over SSH (inventory netns) and through Slurm job steps (netns-slurm, one allocation),
interleaved (SSH, Slurm, then Slurm, SSH, ...) so that the machine's drift falls on both. Per
system-mode: the median wall seconds of its cell each way and their ratio, and the median
steady step of its workers each way (the measured quantity, which the route should not move);
then the runs' wall times. A benchmark that prints figures: nothing here asserts them."""
import os
import statistics
from pathlib import Path

from harness.results import run_manifest
from harness import commands
from harness.clusters import emulated, slurm, slurm_jobs
from contract.errors import UserError
from contract.runfolder import RunFolder

ROUTES = (("ssh", "netns"), ("slurm", "netns-slurm"))


def run(stack_name, results, repeats=2, systems=None):
    state = emulated.read_state() if emulated.state_file().is_file() else {}
    if not state.get("slurm"):
        raise UserError("slurm-bench needs the emulated cluster with Slurm",
                        "sudo -E invoke cluster.up --slurm; sudo -E invoke provision "
                        "--inventory netns")
    os.environ["SLURM_CONF"] = state["slurm"]["conf"]
    out = Path(results) / ("launchers-%s" % run_manifest.new_run_id())
    runs = {route: [] for route, _ in ROUTES}
    with slurm_jobs.allocated(slurm.PARTITION, len(state["hosts"]), 24 * 60):
        for repeat in range(repeats):
            order = ROUTES if repeat % 2 == 0 else ROUTES[::-1]
            for route, inventory_name in order:
                print("== %s, repeat %d" % (route, repeat + 1), flush=True)
                outcome = commands.bench_named(inventory_name, stack_name, "smoke", out,
                                         run="%s-%d" % (route, repeat), systems=systems)
                runs[route].append(outcome["path"])
    lines = table(runs)
    (out / "launchers.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines) + "\nwritten: %s" % (out / "launchers.md"))
    return lines


def table(runs):
    """runs: {route: [run folder, ...]} -> the printed table's lines."""
    cells = {route: cell_seconds(paths) for route, paths in runs.items()}
    steps = {route: steady_steps(paths) for route, paths in runs.items()}
    systems = sorted((set(cells["ssh"]) | set(cells["slurm"])) - {"all cells"})
    lines = ["| system-mode | cell s, SSH | cell s, Slurm | Slurm / SSH | steady step ms, SSH "
             "(min-max) | steady step ms, Slurm (min-max) |", "|---|---|---|---|---|---|"]
    for system in systems + ["all cells"]:
        ssh, through = _median(cells["ssh"], system), _median(cells["slurm"], system)
        ratio = "%.2f" % (through / ssh) if ssh and through else "-"
        step_ms = [_spread(steps[r].get(system), 1000.0) for r in ("ssh", "slurm")]
        lines.append("| %s | %s | %s | %s | %s | %s |" % (system, _fmt(ssh), _fmt(through),
                                                         ratio, *step_ms))
    lines.append("(medians over the runs, and over every worker for the steps; a cell's time "
                 "runs from its launch to its last process stopped)")
    walls = {route: [RunFolder(p).wall_seconds() for p in paths]
             for route, paths in runs.items()}
    lines.append("")
    lines.append("run wall time: SSH %s s, Slurm %s s (each run: its cells, pre-flight, "
                 "fetching and records)" % (_list(walls["ssh"]), _list(walls["slurm"])))
    return lines


def cell_seconds(paths):
    """{system-mode: [wall seconds of each of its succeeded cells]} over the runs, and
    "all cells": each run's succeeded cells added up."""
    found = {"all cells": []}
    for path in paths:
        done = [s for s in RunFolder(path).statuses()
                if s.status == "succeeded" and s.get("seconds")]
        for status in done:
            system = (status.get("settings") or {}).get("system", status.cell_id)
            found.setdefault(system, []).append(status.seconds)
        found["all cells"].append(sum(s.seconds for s in done))
    return found


def steady_steps(paths):
    """{system-mode: [each worker's steady wall step (s)]} over the runs' records."""
    found = {}
    for path in paths:
        for record in RunFolder(path).records():
            if record["metric"] == "wall_step" and record["role"] in ("worker", "chief"):
                found.setdefault(record["system"], []).append(record["value"])
    return found


def _median(cells, system):
    values = cells.get(system) or []
    return statistics.median(values) if values else None


def _spread(values, scale):
    if not values:
        return "-"
    return "%.1f (%.1f-%.1f)" % (statistics.median(values) * scale, min(values) * scale,
                                 max(values) * scale)


def _fmt(value):
    return "%.1f" % value if value is not None else "-"


def _list(values):
    return ", ".join("%.0f" % v for v in values)
