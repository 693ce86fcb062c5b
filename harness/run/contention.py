"""Whether the nodes share physical cores, measured: the contention probe.

Before a run, a fixed CPU kernel (bench/common/probe.py) runs with each node's thread budget,
under its CPU affinity, on each node alone and then on every node at once. A node that owns
its cores keeps its speed when the others run; one that shares them with another node loses
it. Inferring sharing from addresses and CPU counts fails where the nodes cannot see the
hardware (VMs on an overcommitted host, cloud instances, containers, cgroup quotas that add up
to more than the machine); this asks the hardware. Steal time, where the kernel reports it,
is kept beside: a hypervisor's other guests show there.
"""
import hashlib
import json
import shlex
import threading
import time

from ..errors import UserError
from ..paths import BENCH, cache_dir

PROBE_SECONDS = 1.0
# A probe of the same nodes younger than this is taken again instead of run again: a layout
# does not change in minutes, and runs back to back (verdict-check, fault-bench, the tests)
# would spend 10-20 s each on it. The manifest says when it was measured.
REUSE_SECONDS = 600
ROUNDS = 5           # alone, together, in turn: a drifting machine hits both alike; medians
# A node slower by more than this share with the others running shares cores with them.
# Medians of 3 rounds here: 2 nodes pinned to a CPU each lost -1% to 3%; 3 nodes on 2 CPUs
# lost 27-40%, a third as expected (docs/methodology.md). One round alone once read 17% on
# the pinned nodes, and a 3-round probe in a CI run more than 15%: hence 5 rounds.
SHARED_LOSS = 0.15


def command(node, python):
    """The probe on `node` with its thread budget, under its CPU affinity (as its roles run)."""
    pin = "taskset -c %s " % shlex.quote(node.host.cpus) if node.host.cpus else ""
    return "cd /tmp && %s%s - %d %s <<'DLBENCH_PROBE'\n%s\nDLBENCH_PROBE" % (
        pin, shlex.quote(python), node.host.vcpus, PROBE_SECONDS,
        (BENCH / "common" / "probe.py").read_text())


def run_one(node, python):
    out = node.run(command(node, python), check=False)
    try:
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise UserError("%s: the contention probe failed (exit %d): %s"
                        % (node.name, out.exited, (out.stderr or out.stdout).strip()[-500:]),
                        "check that %s runs on the node (`invoke provision` builds it)"
                        % python)


def run_together(nodes, pythons):
    found, errors = {}, []

    def one(node):
        try:
            found[node.name] = run_one(node, pythons[node.name])
        except UserError as exc:
            errors.append(exc)
    threads = [threading.Thread(target=one, args=(n,)) for n in nodes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return found


def measure(nodes, pythons, rounds=ROUNDS):
    """{"nodes": {name: {alone, together, loss, steal}}, "shared": bool, ...}; pythons: node
    name -> the Python to run the probe with. One node alone cannot be disturbed by others."""
    began = time.monotonic()
    alone, together = {n.name: [] for n in nodes}, {n.name: [] for n in nodes}
    steal = {n.name: [] for n in nodes}
    for _ in range(rounds):
        for node in nodes:
            probe = run_one(node, pythons[node.name])
            alone[node.name].append(probe["chunks_per_s"])
            steal[node.name].append(probe["steal"])
        if len(nodes) > 1:
            for name, probe in run_together(nodes, pythons).items():
                together[name].append(probe["chunks_per_s"])
                steal[name].append(probe["steal"])
    return summarise(alone, together, steal, time.monotonic() - began)


def measured_or_recent(nodes, pythons, now=None):
    """The probe of these nodes, run now or taken from one run less than REUSE_SECONDS ago
    (with `reused_after` seconds); kept in the cache either way."""
    now = time.time() if now is None else now
    path = _kept_path(nodes, pythons)
    kept = last_measured(nodes, pythons)
    if kept and 0 <= now - kept["measured_at"] < REUSE_SECONDS:
        return dict(kept, reused_after=round(now - kept["measured_at"]))
    found = dict(measure(nodes, pythons), measured_at=now)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(found))
    return found


def last_measured(nodes, pythons):
    """The newest probe of these nodes, however old (a dry run's prior), or None."""
    try:
        return json.loads(_kept_path(nodes, pythons).read_text())
    except (OSError, ValueError):
        return None


def _kept_path(nodes, pythons):
    key = hashlib.sha1(json.dumps([[n.name, n.host.address, n.host.connection, n.host.cpus,
                                    n.host.vcpus, n.host.workdir, pythons[n.name]]
                                   for n in nodes]).encode()).hexdigest()[:16]
    return cache_dir() / "contention" / ("%s.json" % key)


def summarise(alone, together, steal, seconds=0.0):
    """The figures per node (medians over the rounds) and the verdict."""
    per_node = {}
    for name in alone:
        a = _median(alone[name])
        t = _median(together[name]) if together[name] else None
        known = [s for s in steal[name] if s is not None]
        per_node[name] = {"alone": a, "together": t,
                          "loss": None if t is None or not a else 1.0 - t / a,
                          "steal": max(known) if known else None}
    losses = [v["loss"] for v in per_node.values() if v["loss"] is not None]
    return {"nodes": per_node, "threshold": SHARED_LOSS, "seconds": round(seconds, 1),
            "probe_seconds": PROBE_SECONDS, "unit": "kernel chunks per second",
            "shared": bool(losses) and max(losses) > SHARED_LOSS,
            "worst_loss": max(losses) if losses else None}


def _median(values):
    values = sorted(values)
    middle = len(values) // 2
    return values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2.0


def describe(result):
    """One line for the console."""
    if not result:
        return "contention probe: not run"
    parts = ["%s %.0f alone, %s together" % (name, v["alone"], "%.0f (%+.0f%%)" % (
        v["together"], -100 * v["loss"]) if v["together"] is not None else "-")
        for name, v in sorted(result["nodes"].items())]
    when = "%.0f s" % result["seconds"]
    if result.get("reused_after") is not None:
        when = "measured %d s ago on the same nodes, taken again" % result["reused_after"]
    return "contention probe (%s, %s): %s -> nodes %s cores" % (
        result["unit"], when, "; ".join(parts), "SHARE" if result["shared"] else "do not share")
