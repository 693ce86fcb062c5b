"""A run's folder found and its manifest.json written: the run's id, its format checked,
what it is at its start (collect's start_manifest) and what it ran on at its end
(finish_manifest: host facts, versions, CPUs, kernels, setup flags, Slurm's accounting)."""
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

import registry
from contract import codedigest, manifest as manifests, nodefolder, runfolder
from contract.errors import UserError
from contract.runfolder import RunFolder, read_json

from ..nodes.access import REACH_TIMEOUT
from .. import clusters
from ..clusters import sacct
from ..paths import REPO, cache_dir

RESULTS_FORMAT = manifests.FORMAT


def new_run_id():
    return time.strftime("%Y%m%d-%H%M%S")


def run_dir(results, run_id=None):
    """results/<run-id>; without an id, the newest run by start time (contract/runfolder.py),
    and the task says which it took."""
    path = runfolder.find(results, run_id)
    if not run_id:
        print("run %s (the newest by start time; --run picks another)" % path.name, flush=True)
    return path


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
    lost = [node.name for node in nodes if not node.answers(REACH_TIMEOUT)]
    if lost:  # a node taken away mid-run: the run still ends whole, its records built
        print("%s did not answer at the run's end: what the manifest holds of %s is what the "
              "run's start read" % (", ".join(lost), "them" if len(lost) > 1 else "it"),
              flush=True)
    kept, installed = manifest.get("host_facts") or {}, manifest.get("installed") or {}
    manifest["host_facts"] = {node.name: kept.get(node.name) if node.name in lost else
                              _node_json(node, nodefolder.FACTS) for node in nodes}
    # the versions of the envs of each of the run's stacks (provisioning writes one file each)
    manifest["installed"] = {
        stack: {node.name: (installed.get(stack) or {}).get(node.name) if node.name in lost
                else _node_json(node, "envs-%s.json" % stack) for node in nodes}
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
