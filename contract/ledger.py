"""The ledger: every analysed run in one SQLite file (results/ledger.sqlite by default), so that
what runs on several machines, node layouts and releases say can be set side by side and
pooled (analysis/ledger.py writes and reads it; `invoke ledger`). Its schema is here, with its
version: a ledger of another version is refused, never half-read.

A run is one row of `runs` under its key (KEY_FIELDS of its manifest, hashed): the same run
added again, from its folder or from an artifact of it, is found and not counted twice."""
import hashlib
import json

SCHEMA_VERSION = 1
FILE = "ledger.sqlite"
KEY_FIELDS = ("run_id", "started", "code_digest", "git")  # of the manifest

TABLES = {
    "meta": "key TEXT PRIMARY KEY, value TEXT",
    # one row per run: where it came from, its size and stacks, and the machine it ran on
    "runs": "run_key TEXT PRIMARY KEY, run_id TEXT, started REAL, size TEXT, repeats INTEGER, "
            "stacks TEXT, cpu_model TEXT, cpu_isa TEXT, machine_class TEXT, kernels TEXT, "
            "layout TEXT, shared_cores INTEGER, probe TEXT, source TEXT, added REAL",
    # one row per (run, stack, cell setting): its projected paper-scale time, the confidence
    # interval of its expected time and the prediction of one more run (NULL where none)
    "cells": "run_key TEXT, stack TEXT, benchmark TEXT, system TEXT, nodes INTEGER, "
             "link TEXT, repeats INTEGER, status TEXT, disturbed INTEGER, seconds REAL, "
             "ci_low REAL, ci_high REAL, pred_low REAL, pred_high REAL, "
             "PRIMARY KEY (run_key, stack, benchmark, system, nodes, link)",
    # one row per (run, stack, claim): the measured value, its interval and the verdict
    "claims": "run_key TEXT, stack TEXT, claim TEXT, kind TEXT, paper REAL, tolerance REAL, "
              "value REAL, low REAL, high REAL, verdict TEXT, interval_verdict TEXT, "
              "PRIMARY KEY (run_key, stack, claim)",
}


def run_key(manifest):
    """The run's key: the same run, wherever it is read from, has the same one."""
    fields = {name: manifest.get(name) for name in KEY_FIELDS}
    return hashlib.sha256(json.dumps(fields, sort_keys=True, default=str).encode()
                          ).hexdigest()[:16]
