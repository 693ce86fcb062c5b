"""The keys of a run's manifest.json (results/<run-id>/), which the controller writes
(harness/results/run_manifest.py at the run's start and end, harness/run/lifecycle.py the probe) and the
analysis reads, in one place, with its format version. RunFolder.write_manifest refuses a key
that is not here; tests/test_contract.py checks that every key the package reads is.
Python 3.6: a plain dict of key -> meaning."""

FORMAT = 3  # results_format: bump when the layout of results/<run-id>/ changes incompatibly
# format 1 had one stack a run, formats 1-2 the size as `profile`: read through upgraded()
READABLE = (1, 2, 3)

KEYS = {
    # at the run's start (run_manifest.start_manifest)
    "results_format": "FORMAT above, as the run was written",
    "run_id": "the run's id (its folder's name)",
    "command": "the command line that started it",
    "options": "bench's options that say what the run is (BenchOptions.manifest)",
    "git": "the controller's commit and whether its tree was dirty",
    "inventory": "name, path, hosts (public fields), layout, hosts left out",
    "stacks": "the run's stacks in order, each its name, Python and the packages declared "
              "per framework (a cell names its own where there are several)",
    "size": "the run's size (smoke, quick, verdict, paper, math)",
    "cells": "every cell's settings, id, config hash and link rate",
    "systems": "what the analysis needs of each system-mode, as the run knew it",
    "started": "when the run started (epoch s)",
    "same_math": "stack -> the newest same-math verdict for it, or null",
    "code_digest": "the controller's digest of bench/ and contract/ (contract/codedigest.py)",
    "vm": "where the nodes are VMs: provider, box, accelerator and why",
    # once the nodes are checked (lifecycle.Run.probe_contention)
    "contention": "the contention probe: whether the nodes share cores",
    # at the run's end (run_manifest.finish_manifest)
    "host_facts": "node -> the facts provisioning gathered",
    "installed": "stack -> node -> the versions in that stack's envs",
    "cpu": "node -> the CPU as a process of the run read it",
    "kernels": "stack -> framework -> the kernel libraries and ISA its processes said they ran",
    "code_ran": "the code digests the training processes reported",
    "setup": "stack -> the setup's deviations from the paper's, as flags",
    "interference": "cell -> what else ran on its nodes, and whether that disturbed it",
    "ended": "when the run ended (epoch s)",
    # written by older versions only, still read
    "network": "older runs: the emulated cluster's link (rate_mbit)",
    "stack": "format 1: the run's one stack (upgraded() reads it as stacks)",
    "profile": "formats 1-2: the run's size (upgraded() reads it as size)",
}


def check(manifest, source="manifest.json"):
    """The manifest unchanged, or ValueError naming every key that is not in KEYS."""
    unknown = sorted(set(manifest) - set(KEYS))
    if unknown:
        raise ValueError("%s: unknown key(s) %s (contract/manifest.py KEYS lists them)"
                         % (source, ", ".join(unknown)))
    return manifest


def upgraded(manifest):
    """A manifest of any readable format in this format's shape: formats 1-2's `profile` is
    its `size`; format 1's one `stack` becomes `stacks`, and its `installed`, `same_math`,
    `kernels` and `setup` are that stack's."""
    if "stack" not in manifest and "profile" not in manifest:
        return manifest
    out = dict(manifest)
    if "profile" in out:
        out["size"] = out.pop("profile")
    out["results_format"] = FORMAT
    if "stack" not in out:
        return out
    stack = out.pop("stack") or {}
    name = stack.get("name")
    out["stacks"] = [stack]
    for key in BY_STACK:
        if key in out:
            out[key] = {name: out[key]}
    out["results_format"] = FORMAT
    return out


BY_STACK = ("installed", "same_math", "kernels", "setup")  # stack -> its value


def stack_names(manifest):
    """The run's stacks by name, in order."""
    return [s.get("name") for s in upgraded(manifest).get("stacks") or []]


def view(manifest, name):
    """The run as one stack saw it, in the single-stack keys the per-run analysis reads
    (`stack`; `installed`, `same_math`, `kernels` and `setup` that stack's): that stack's
    cells only (a run of one stack: every cell)."""
    whole = upgraded(manifest)
    out = {k: v for k, v in whole.items() if k != "stacks"}
    out["stack"] = next((s for s in whole.get("stacks") or [] if s.get("name") == name), {})
    for key in BY_STACK:
        if key in whole:
            out[key] = (whole.get(key) or {}).get(name)
    several = len(whole.get("stacks") or []) > 1
    out["cells"] = [c for c in whole.get("cells") or []
                    if not several or c.get("stack") == name]
    return out
