"""Fetch what the nodes wrote, and describe the run: manifest.json and records.jsonl."""
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

import registry
from contract import codedigest, manifest as manifests

from contract import runfolder
from .. import clusters
from ..clusters import sacct
from contract.errors import UserError
from ..paths import REPO, cache_dir
from contract.runfolder import RunFolder, read_json
from contract import nodefolder
from contract import records as schema

RESULTS_FORMAT = manifests.FORMAT


# --- runs -----------------------------------------------------------------------------------

def new_run_id():
    return time.strftime("%Y%m%d-%H%M%S")


def run_dir(results, run_id=None):
    """results/<run-id>; without an id, the newest run by start time (contract/runfolder.py),
    and the task says which it took."""
    path = runfolder.find(results, run_id)
    if not run_id:
        print("run %s (the newest by start time; --run picks another)" % path.name, flush=True)
    return path


# --- manifest -------------------------------------------------------------------------------

def git_state():
    def git(*args):
        out = subprocess.run(["git", *args], cwd=str(REPO), capture_output=True, text=True)
        return out.stdout.strip() if out.returncode == 0 else None
    return {"commit": git("rev-parse", "HEAD"),
            "dirty": bool(git("status", "--porcelain", "--untracked-files=no"))}


def start_manifest(path, inv, stacks, size, cells, options, link_mbit=None):
    """stacks: the run's, in order (harness/nodes/stacks.py RunStacks)."""
    RunFolder(path).write_manifest({
        "results_format": RESULTS_FORMAT,
        "run_id": path.name,
        "command": " ".join(shlex.quote(a) for a in sys.argv),
        "options": options,
        "git": git_state(),
        "inventory": {"name": inv.name, "path": str(inv.path),
                      "hosts": [h.public() for h in inv.hosts], "layout": inv.layout(),
                      "left_out": inv.dropped},
        "stacks": [{"name": stack.name, "python": stack.python,
                    "declared": {f: e.packages for f, e in stack.envs.items()}}
                   for stack in stacks],
        "size": size,
        "cells": [dict(c.settings, id=c.id, config_hash=c.config_hash,
                       link_mbit=(link_mbit or {}).get(c.id)) for c in cells],
        # what the analysis needs to know of each system-mode, as this run knew it
        "systems": registry.for_manifest(c.system for c in cells),
        "started": time.time(),
        "same_math": {stack.name: same_math_record(stack.name) for stack in stacks},
        "code_digest": codedigest.digest(),  # bench/ here; pre-flight made the nodes' match
        "vm": vm_record(inv.name),
    })


def vm_record(inventory_name):
    """Where the nodes are Vagrant VMs: provider, box, accelerator and why it was chosen."""
    return clusters.way(inventory_name).describe()


def same_math_path(stack_name):
    """Where `invoke same-math` keeps its newest verdict for a stack (the report says it)."""
    return cache_dir() / "same-math" / ("%s.json" % stack_name)


def same_math_record(stack_name):
    """The newest same-math verdict for this stack ({ok, when, run, ...}) or None."""
    try:
        return json.loads(same_math_path(stack_name).read_text())
    except (OSError, ValueError):
        return None


def keep_slurm_accounting(path):
    """<cell>/sacct.txt for every cell of the run whose roles were job steps; says so."""
    line = sacct.keep(path, [c["id"] for c in RunFolder(path).manifest().get("cells", [])])
    if line:
        print(line, flush=True)


def finish_manifest(path, nodes):
    run = RunFolder(path)
    manifest = run.manifest()
    manifest["host_facts"] = {node.name: _node_json(node, nodefolder.FACTS) for node in nodes}
    # the versions of the envs of each of the run's stacks (provisioning writes one file each)
    manifest["installed"] = {stack: {node.name: _node_json(node, "envs-%s.json" % stack)
                                     for node in nodes}
                             for stack in manifests.stack_names(manifest)}
    results = results_of(path)  # every process's result.json, read once for the three
    manifest["cpu"] = cpus_seen(results)
    manifest["kernels"] = kernels_seen(results, manifests.stack_names(manifest))
    manifest["code_ran"] = sorted({r["code_digest"] for _, r in results if r.get("code_digest")})
    manifest["setup"] = setup_flags(manifest)
    manifest["interference"] = {s["cell_id"]: {"nodes": s.get("interference") or {},
                                               "disturbed": s.get("disturbed") or ""}
                                for s in run.statuses() if s.get("interference")}
    manifest["ended"] = time.time()
    run.write_manifest(manifest)
    return manifest


def results_of(path):
    """[(node, result.json's content)] of every process of the run, oldest first."""
    return list(_results(path))


def _results(path):
    for result_file in sorted(Path(path).glob("*/*/*/" + nodefolder.RESULT),
                              key=lambda p: p.stat().st_mtime):
        try:
            yield result_file.parent.parent.name, json.loads(result_file.read_text())
        except (OSError, ValueError):
            continue


def cpus_seen(results):
    """node -> its CPU as a process of the run read it (bench/common/cpuinfo.py), the newest
    result's (results_of): the CPU the run ran on, not the one provisioning saw."""
    return {node: result["cpu"] for node, result in results if result.get("cpu")}


def kernels_seen(results, stack_names):
    """stack -> framework -> {library: [...], isa: [...], read, errors: [...]}: the kernel
    libraries and instruction sets its training processes said they used (bench/common/
    runner.py read_kernels), every distinct answer of the run, so that a mix shows. A process
    of a cell that names no stack ran under the run's only one."""
    found = {}
    for _, result in results:
        config = result.get("config") or {}
        framework, kernels = config.get("framework"), result.get("kernels")
        if not framework or not kernels:
            continue
        stack = found.setdefault(config.get("stack") or stack_names[0], {})
        seen = stack.setdefault(framework, {"library": [], "isa": [], "read": "",
                                            "errors": []})
        if kernels.get("error"):
            _add(seen["errors"], kernels["error"])
            continue
        _add(seen["library"], kernels.get("library"))
        _add(seen["isa"], kernels.get("isa"))
        seen["read"] = kernels.get("read") or seen["read"]
    return found


def _add(values, value):
    if value and value not in values:
        values.append(value)


def _node_json(node, name):
    """A JSON file in the node's workdir, or None where provisioning has not written it."""
    return json.loads(node.read_text(node.path(node.host.workdir) + "/" + name) or "null")


def setup_flags(manifest):
    """stack -> the setup's deviations from the paper's (shared cores, link, versions, data,
    steps), machine-readable, for other tools; the report shows the same
    (analysis/testbed.py)."""
    from analysis import testbed
    return {name: testbed.flags(testbed.describe(manifests.view(manifest, name)))
            for name in manifests.stack_names(manifest)}


def check_format(path):
    found = read_json(Path(path) / runfolder.MANIFEST, {}).get("results_format")
    if found not in manifests.READABLE:
        raise UserError("%s was written by results format %s; this version reads %s"
                        % (path, found, " and ".join(map(str, manifests.READABLE))),
                        "analyse it with the version that wrote it (manifest.json names the "
                        "git commit), or start a new run")


# --- fetching -------------------------------------------------------------------------------

def fetch_cell(path, status, nodes):
    """Copy every file each process wrote into results/<run>/<cell>/<node>/<role>-<rank>/."""
    by_name = {node.name: node for node in nodes}
    fetched = 0
    for proc in status.get("processes", []):
        if proc["node"] in status.get("unreachable", []):
            continue  # its files stay on it: `invoke collect` fetches them once it answers
        node = by_name[proc["node"]]
        local = path / status["cell_id"] / proc["node"] / ("%s-%d" % (proc["role"], proc["rank"]))
        local.mkdir(parents=True, exist_ok=True)
        listing = node.run("find %s -maxdepth 1 -type f ! -name '*.tmp' -print0"
                           % shlex.quote(proc["out_dir"]), check=False).stdout.split("\0")
        for remote in filter(None, listing):  # a path may hold spaces: NUL-separated
            node.get(remote, str(local / Path(remote).name))
            fetched += 1
    return fetched


# --- records --------------------------------------------------------------------------------

def build_records(path):
    """One flat record per measured value, failed cells included (metric `status`)."""
    run = RunFolder(path)
    manifest = run.manifest()
    records = []
    for position, cell in enumerate(manifest.get("cells", [])):
        status = run.status(cell["id"])
        base = _base(manifest, cell)
        # order: the cell's place in the planned run, from which the analysis sees whether
        # the repeats ran as blocks (analysis/stats.py, paired)
        records.append(schema.record(
            dict(base, **schema.process_keys(None, None, None)), "status",
            1.0 if status["status"] == "succeeded" else 0.0, status=status["status"],
            reason=status.get("reason", ""), warning=status.get("warning", ""),
            disturbed=status.get("disturbed", ""), order=position))
        slurm_rows = sacct.kept(path / cell["id"])
        for result_file in nodefolder.fetched_results(path / cell["id"]):
            records.extend(_process_records(base, result_file, slurm_rows))
        records.extend(_profile_records(base, path / cell["id"]))
    run.write_records(records)
    return records


def _base(manifest, cell):
    base = {k: cell.get(k) for k in schema.CELL_KEYS}
    base.update(schema.run_keys(manifest.get("run_id"), cell["id"], cell.get("stack") or (
        manifests.stack_names(manifest) or [None])[0]))
    return base


def _per_worker_records(rec, per_worker):
    out = []
    for rank, summary in sorted(per_worker.items()):
        worker = dict(rec, timed_by="chief", **schema.process_keys(summary.get("node"),
                                                                   "worker", int(rank)))
        out += [schema.record(worker, phase, summary[phase])
                for phase in schema.SUMMARY if summary.get(phase) is not None]
        out += [schema.record(worker, m, summary[m])
                for m in ("measured_steps", "warmup_steps") if m in summary]
    return out


def _profile_records(base, cell_path):
    """One record per operator path of each process's profiled steps (bench/common/
    profile.py), in seconds per profiled step. A server does not know how many steps it
    served: it takes the steps of the process that drove the profile (TF chief, worker 0)."""
    profiles = [(f, read_json(f))
                for f in sorted(cell_path.glob("*/*/%s" % nodefolder.OPERATORS))]
    profiles = [(f, p) for f, p in profiles if p]
    driven = [p["steps"] for f, p in profiles if p.get("steps")]
    out = []
    for profile_file, profile in profiles:
        steps = profile.get("steps") or (max(driven) if driven else 0)
        node, role_rank = profile_file.parent.parent.name, profile_file.parent.name
        role, _, rank = role_rank.rpartition("-")
        rec = dict(base, source=profile.get("source"),
                   **schema.process_keys(node, role, int(rank)))
        if profile.get("profiled_step"):  # workers; for tensorflow-async, the chief
            out.append(schema.record(rec, "profiled_step", profile["profiled_step"]))
        if not steps:
            continue
        out += [schema.record(rec, "operator", op["seconds"] / steps, op_path=op["path"],
                              calls=op["calls"])
                for op in profile.get("ops", [])]
    return out


def _process_records(base, result_file, slurm_rows):
    result = read_json(result_file)
    if not result:
        return []
    config = result.get("config", {})
    rec = dict(base, versions=result.get("versions"), status=result.get("status"),
               sharing=config.get("sharing"), threads=config.get("threads"),
               **schema.process_keys(*(config.get(k) for k in schema.PROCESS_KEYS)))
    step = result_file.with_name(sacct.STEP_FILE)  # the job step that ran it (Slurm runs)
    if step.is_file():
        rec["slurm_step"] = step.read_text().strip()
    summary = result.get("summary") or {}
    if result.get("per_worker"):
        # the TensorFlow-async chief timed every worker's steps: records per worker
        out = _per_worker_records(rec, result["per_worker"])
    else:
        out = [schema.record(rec, phase, summary[phase])
               for phase in schema.SUMMARY if summary.get(phase) is not None]
    for metric in ("train_seconds", "peak_rss_mb", "peak_own_rss_mb", "wall_step", "parameters",
                   "startup_seconds", "execution_seconds"):
        if result.get(metric) is not None:
            out.append(schema.record(rec, metric, result[metric]))
    if rec.get("slurm_step") in slurm_rows:  # Slurm's own figures for the step (sacct)
        state, figures = sacct.records(slurm_rows[rec["slurm_step"]])
        out += [schema.record(rec, m, v, source="sacct", slurm_state=state)
                for m, v, _ in figures]
    for metric, value in sorted((result.get("interference") or {}).items()):
        if metric in schema.INTERFERENCE and value is not None:  # what else ran on the node
            out.append(schema.record(rec, metric, value))
    if result.get("step_samples"):  # the measured steps, for the analysis's bootstrap
        out.append(schema.record(rec, "step_samples", len(result["step_samples"]),
                                 samples=result["step_samples"],
                                 sample_epochs=result.get("step_epochs")))
    if result.get("stopped_by") not in (None, "fixed"):  # the verdict size's stop
        out.append(schema.record(rec, "stop_halfwidth", result.get("halfwidth"),
                                 stopped_by=result["stopped_by"]))
    for metric in ("measured_steps", "warmup_steps"):
        if metric in summary:
            out.append(schema.record(rec, metric, summary[metric]))
    # the steps the node's byte counts cover: the loop's, or the TF-async chief's closures
    # over the workers
    net_steps = result.get("net_steps") or len(result.get("steps") or [])
    if result.get("net_bytes_sent") is not None and net_steps:
        out.append(schema.record(rec, "net_bytes_sent_per_step",
                                 result["net_bytes_sent"] / net_steps))
    return out
