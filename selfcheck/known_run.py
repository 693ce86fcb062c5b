"""Hand-made results folders with known numbers: for the tests and for the
analysis benchmark (`invoke analysis-bench`). Not measurements: nothing here runs a framework."""
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

import registry
from contract import manifest as manifests, nodefolder, paper, records as schema
from contract.runfolder import RunFolder

PAPER = paper.TABLE_IV
PARAMETERS = {"lenet5": 62006, "alexnet": 57044810, "resnet18": 11181642, "resnet50": 23528522}


@dataclass
class Known:
    """What a hand-made cell is given beyond its benchmark, system-mode and time (cell)."""
    repeat: int = 0
    status: str = "succeeded"
    steps: int = PAPER["steps_per_epoch"]
    epochs: int = PAPER["epochs"]
    phases: dict = None
    nodes: int = 3
    startup: float = 0.0
    samples: list = None
    sample_epochs: list = None
    wall_step: float = None
    disturbed: str = ""
    interference: dict = None
    peak_rss: float = 500.0
    operators: dict = None
    stack: str = "fixture"


def cell(benchmark, system, seconds, **given):
    """One cell (given: the fields of Known, by name): its measured execution time (process start to the loop's end), start-up,
    per-step phases (default: a quarter each of (seconds - startup) / steps), and the measured
    steps' times (default: 20 steps all at the mean step) with their epochs (default none);
    wall_step: the loop's wall per step where it is not the phases' sum (a coordinator's);
    disturbed: why the cell counts as disturbed; interference: each worker's figures
    (others_cpu, steal, ...) as bench/common/interference.py measures them; peak_rss: worker
    0's peak RSS (MB), each next worker's 100 MB more; operators: {op path (tuple): s/step}
    of worker 0's operator profile."""
    known = Known(**given)
    step = (seconds - known.startup) / (known.steps * known.epochs)
    phases = known.phases or {p: step / 4 for p in ("loading", "forward", "backward",
                                                    "communication")}
    step = sum(phases.values())
    return dict(asdict(known), benchmark=benchmark, system=system, seconds=seconds,
                phases=phases, samples=[step] * 20 if known.samples is None
                else list(known.samples), interference=known.interference or {},
                operators=known.operators or {})


def write_run(path, cells, run_id="fixture", memory_rows=0, planned=None, manifest=None):
    """results/<run_id>/ with manifest.json, records.jsonl and, with memory_rows, one 1 Hz
    memory.csv per process. `planned`: extra (benchmark, system) never run (status pending);
    `manifest`: keys replacing the fixture manifest's (inventory, host_facts, ...)."""
    run = Path(path) / run_id
    run.mkdir(parents=True, exist_ok=True)
    records, manifest_cells = [], []
    for spec in cells + [cell(b, s, float("nan"), status="pending") for b, s in planned or []]:
        base = _base(spec, run_id)
        manifest_cells.append(dict(base, id=base["cell_id"]))
        records.append(schema.record(
            dict(base, node=None, role=None, rank=None), "status",
            1.0 if spec["status"] == "succeeded" else 0.0, status=spec["status"],
            reason="" if spec["status"] == "succeeded" else "fixture: %s" % spec["status"],
            disturbed=spec.get("disturbed", "")))
        if spec["status"] == "succeeded":
            records += _worker_records(spec, base)
            if memory_rows:
                _write_memory(run / base["cell_id"], spec, memory_rows)
    RunFolder(run).write_records(records)
    stacks = {"stacks": [{"name": s} for s in dict.fromkeys(c["stack"] for c in cells)]} \
        if not {"stacks", "stack"} & set(manifest or {}) else {}
    RunFolder(run).write_manifest(dict({
        "run_id": run_id, "results_format": manifests.FORMAT, "size": "fixture",
        "command": "fixture", "cells": manifest_cells, "git": {"commit": "fixture"},
        "inventory": {"name": "fixture", "hosts": [
            {"name": "node%d" % i, "address": "10.0.0.%d" % i, "vcpus": 4} for i in (1, 2, 3)]},
    }, **dict(stacks, **(manifest or {}))))
    return run


def _base(spec, run_id):
    network = spec["benchmark"].split("-")[0]
    cell_id = "%s_%s_r%d_fixture" % (spec["benchmark"], spec["system"], spec["repeat"])
    if spec["nodes"] != 3:
        cell_id += "_n%d" % spec["nodes"]
    if spec["stack"] != "fixture":
        cell_id += "_" + spec["stack"]
    return {"run_id": run_id, "cell_id": cell_id, "benchmark": spec["benchmark"],
            "network": network, "dataset": spec["benchmark"].split("-")[1],
            "system": spec["system"], "framework": spec["system"].split("-")[0],
            "mode": spec["system"].split("-")[1], "repeat": spec["repeat"],
            "nodes": spec["nodes"], "local_batch": PAPER["local_batch"], "epochs": spec["epochs"],
            "steps_per_epoch": spec["steps"], "data": "synthetic", "stack": spec["stack"]}


def _worker_records(spec, base):
    out = []
    params = PARAMETERS[base["network"]]
    step = sum(spec["phases"].values())
    for rank in range(spec["nodes"]):
        rec = dict(base, node="node%d" % (rank + 1), role="worker", rank=rank,
                   status="succeeded")
        values = dict(spec["phases"], step=step, train_seconds=spec["seconds"] - spec["startup"],
                      peak_rss_mb=spec.get("peak_rss", 500.0) + 100 * rank,
                      peak_own_rss_mb=spec.get("peak_rss", 500.0) + 100 * rank,
                      parameters=params,
                      net_bytes_sent_per_step=params * 8.0,
                      wall_step=spec.get("wall_step") or step,
                      startup_seconds=spec["startup"], execution_seconds=spec["seconds"])
        out += [schema.record(rec, k, v) for k, v in values.items()]
        out += [schema.record(rec, k, v)
                for k, v in sorted(spec.get("interference", {}).items())]
        samples = spec["samples"]
        out.append(schema.record(rec, "step_samples", len(samples), samples=samples,
                                 sample_epochs=spec.get("sample_epochs")))
        out += [schema.record(rec, "operator", v, op_path=list(path))
                for path, v in sorted(spec["operators"].items()) if rank == 0]
    return out


def _write_memory(cell_dir, spec, rows):
    roles = registry.systems().get(spec["system"], {}).get("roles", ["worker"])
    elapsed = np.arange(rows, dtype=float)
    rss = 400 + 50 * np.sin(elapsed / 600.0)
    text = "time,elapsed_s,rss_mb,children_rss_mb,cpu_percent\n" + "".join(
        "%.1f,%.1f,%.1f,0.0,95.0\n" % (1.8e9 + e, e, r) for e, r in zip(elapsed, rss))
    for rank in range(spec["nodes"]):
        for role in roles:
            folder = cell_dir / ("node%d" % (rank + 1)) / ("%s-%d" % (role, rank))
            folder.mkdir(parents=True, exist_ok=True)
            (folder / nodefolder.MEMORY).write_text(text)
