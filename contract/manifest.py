"""The keys of a run's manifest.json (results/<run-id>/), which the controller writes
(harness/results/collect.py at the run's start and end, harness/commands.py the probe) and the
analysis reads, in one place, with its format version. RunFolder.write_manifest refuses a key
that is not here; tests/test_contract.py checks that every key the package reads is.
Python 3.6: a plain dict of key -> meaning."""

FORMAT = 1  # results_format: bump when the layout of results/<run-id>/ changes incompatibly

KEYS = {
    # at the run's start (collect.start_manifest)
    "results_format": "FORMAT above, as the run was written",
    "run_id": "the run's id (its folder's name)",
    "command": "the command line that started it",
    "options": "bench's options that say what the run is (BenchOptions.manifest)",
    "git": "the controller's commit and whether its tree was dirty",
    "inventory": "name, path, hosts (public fields), layout, hosts left out",
    "stack": "name, Python and the packages declared per framework",
    "profile": "the run's size (smoke, quick, verdict, paper, math)",
    "cells": "every cell's settings, id, config hash and link rate",
    "systems": "what the analysis needs of each system-mode, as the run knew it",
    "started": "when the run started (epoch s)",
    "same_math": "the newest same-math verdict for the stack, or null",
    "code_digest": "the controller's digest of bench/ and contract/ (contract/codedigest.py)",
    "vm": "where the nodes are VMs: provider, box, accelerator and why",
    # once the nodes are checked (commands.probe_contention)
    "contention": "the contention probe: whether the nodes share cores",
    # at the run's end (collect.finish_manifest)
    "host_facts": "node -> the facts provisioning gathered",
    "installed": "node -> the versions in the run's stack's envs",
    "cpu": "node -> the CPU as a process of the run read it",
    "kernels": "framework -> the kernel libraries and ISA its processes said they ran",
    "code_ran": "the code digests the training processes reported",
    "setup": "flags the report's setup section reads",
    "interference": "cell -> what else ran on its nodes, and whether that disturbed it",
    "ended": "when the run ended (epoch s)",
    # written by older versions only, still read
    "network": "older runs: the emulated cluster's link (rate_mbit)",
}


def check(manifest, source="manifest.json"):
    """The manifest unchanged, or ValueError naming every key that is not in KEYS."""
    unknown = sorted(set(manifest) - set(KEYS))
    if unknown:
        raise ValueError("%s: unknown key(s) %s (contract/manifest.py KEYS lists them)"
                         % (source, ", ".join(unknown)))
    return manifest
