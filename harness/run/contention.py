"""Whether the nodes share physical cores, measured: the contention probe.

Before a run, a fixed CPU kernel (bench/common/probe.py) runs with each node's thread budget,
under its CPU affinity, on each node alone and then on every node at once. A node that owns
its cores keeps its speed when the others run; one that shares them with another node loses
it. Inferring sharing from addresses and CPU counts fails where the nodes cannot see the
hardware (VMs on an overcommitted host, cloud instances, containers, cgroup quotas that add up
to more than the machine); this asks the hardware. Steal time, where the kernel reports it,
is kept beside: a hypervisor's other guests show there.

The machine's own noise is measured too: every node runs alone before and after each round
with the others, so each round also compares the node with itself (a control). The rule,
per node (docs/methodology.md, "Sharing measured"):

  shared  when its median loss over the rounds exceeds SHARED_LOSS plus its own noise (the
          median change between two consecutive readings alone), and every round but at
          most one lost more than SHARED_LOSS.

  not ruled out  when its median loss exceeds SHARED_LOSS but the node is not found
          shared: it lost what sharing costs, but not SHARED_LOSS beyond its own noise, or
          not in every round but one, which leaves the cause open. The claims are still
          judged, with this named beside them.

A node that shares cores loses speed every time the others run and keeps it when alone; a
disturbance (writeback after provisioning, another program) comes and goes, moves the
alone readings too, and is named as interference, not as sharing. "No sharing found" is said
only where no node's median loss exceeds SHARED_LOSS: on a host whose readings alone move by
a third, a 33% loss is neither proof of sharing nor of its absence.
"""
import hashlib
import json
import os
import shlex
import threading
import time

from contract.errors import UserError
from ..plan import estimate
from ..paths import BENCH, cache_dir

PROBE_SECONDS = 1.0
# A probe of the same nodes younger than this that found no sharing is reused instead
# of run again: a layout does not change in minutes, and runs back to back (verdict-check,
# fault-bench, the tests) would spend 20 s each on it. A probe that found sharing is never
# reused: what it saw may have passed. Nor is one that found other programs busy, and a quiet
# one only while the nodes settle quiet again: a load that came or went changes what the
# probe reads. The manifest says when it was measured.
REUSE_SECONDS = 600
# ...unless the test suite asks (tests/conftest.py): its runs on the emulated cluster and in
# Slurm allocations, whose hosts share two cores, would each probe again for 15-20 s, and
# their subject is never the probe (whose own tests measure it: test_contention.py,
# test_emulated_cluster.py). Disturbance is still not judged where the reused probe found
# sharing; the probe's line says that it was reused and why. Nor is the load checked again
# before such a reuse (the suite's runs would each settle the nodes again).
REUSE_SHARED_VARIABLE = "DLBENCH_PROBE_REUSE_SHARED"
ROUNDS = 5           # alone, together, alone, ...: a drifting machine hits both alike
# fewer rounds on request (the test suite, whose subject is rarely the probe: the probe's own
# tests ask for ROUNDS); the probe's line says so wherever it is not ROUNDS
ROUNDS_VARIABLE = "DLBENCH_PROBE_ROUNDS"
# A node slower by more than this share (beyond its own noise) with the others running
# shares cores with them. 3 nodes on 2 CPUs lost 27-40%, a third as expected; nodes pinned
# to a CPU each -1% to 3% on a quiet machine (docs/methodology.md).
SHARED_LOSS = 0.15
SETTLE_SECONDS = 20  # the longest the probe waits for a node to be quiet before it measures
RULE = ("shared when a node's median loss over the rounds exceeds %.0f%% plus its own noise "
        "(the median change between two consecutive readings alone), in every round but at "
        "most one; not ruled out when its median loss exceeds %.0f%% without meeting that"
        % (100 * SHARED_LOSS, 100 * SHARED_LOSS))


def script(node, python, args):
    """bench/common/probe.py on `node` with `args`, under the node's CPU affinity."""
    pin = "taskset -c %s " % shlex.quote(node.host.cpus) if node.host.cpus else ""
    return "cd /tmp && %s%s - %s <<'DLBENCH_PROBE'\n%s\nDLBENCH_PROBE" % (
        pin, shlex.quote(python), args, (BENCH / "common" / "probe.py").read_text())


def command(node, python):
    """The probe on `node` with its thread budget, under its CPU affinity (as its roles run)."""
    return script(node, python, "%d %s" % (node.host.vcpus, PROBE_SECONDS))


def run_one(node, python, args=None):
    out = node.run(script(node, python, args) if args else command(node, python), check=False)
    try:
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise UserError("%s: the contention probe failed (exit %d): %s"
                        % (node.name, out.exited, (out.stderr or out.stdout).strip()[-500:]),
                        "check that %s runs on the node (`invoke provision` builds it)"
                        % python)


def run_together(nodes, pythons, args=None):
    found, errors = {}, []

    def one(node):
        try:
            found[node.name] = run_one(node, pythons[node.name], args)
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


def settle(nodes, pythons, seconds=SETTLE_SECONDS):
    """Every node at once: dirty pages written out, then a wait (bounded) until its CPUs
    and I/O are quiet (bench/common/probe.py). node name -> what it found."""
    return run_together(nodes, pythons, "settle %g" % seconds)


def rounds_wanted():
    """ROUNDS, or DLBENCH_PROBE_ROUNDS where set (a whole number from 1)."""
    text = os.environ.get(ROUNDS_VARIABLE, "")
    if not text:
        return ROUNDS
    if not text.isdigit() or int(text) < 1:
        raise UserError("%s=%s is not a whole number of rounds" % (ROUNDS_VARIABLE, text),
                        "set it to 1 or more, or unset it for the default %d" % ROUNDS)
    return int(text)


def measure(nodes, pythons, rounds=None, settled=None):
    """{"nodes": {name: {alone, together, loss, noise, shared, ...}}, "shared": bool,
    "settle": ...}; pythons: node name -> the Python to run the probe with; settled: what a
    settling just before found (settled again where not given). One node alone cannot be
    disturbed by others."""
    rounds = rounds or rounds_wanted()
    began = time.monotonic()
    if settled:  # its wait is the probe's too
        began -= max(s.get("waited") or 0.0 for s in settled.values())
    settled = settled or settle(nodes, pythons)
    alone, together = {n.name: [] for n in nodes}, {n.name: [] for n in nodes}
    steal = {n.name: [] for n in nodes}

    def alone_block():
        for node in nodes:
            probe = run_one(node, pythons[node.name])
            alone[node.name].append(probe["chunks_per_s"])
            steal[node.name].append(probe["steal"])
    alone_block()
    short = emulated(alone, settled) or overlapping(nodes) or (
        "%d round(s), not %d (%s)" % (rounds, ROUNDS, ROUNDS_VARIABLE) if rounds != ROUNDS
        else "")
    for _ in range(0 if len(nodes) < 2 else 1 if short and rounds == ROUNDS else rounds):
        for name, probe in run_together(nodes, pythons).items():
            together[name].append(probe["chunks_per_s"])
            steal[name].append(probe["steal"])
        alone_block()
    return dict(summarise(alone, together, steal, time.monotonic() - began), settle=settled,
                settled=settle_text(settled), short=short, rounds_wanted=rounds)


def overlapping(nodes):
    """"" or why one round is enough: the inventory itself puts two of the nodes on one CPU of
    this machine (connection local; a node without `cpus` runs on all of them), so sharing is
    a fact of the layout, not an inference the controls must guard. "Shared" is then still
    measured, never assumed, and never reused."""
    if len(nodes) < 2 or any(n.host.connection != "local" for n in nodes):
        return ""
    machine = os.sched_getaffinity(0)
    sets = [_cpu_set(n.host.cpus) or set(machine) for n in nodes]
    if not any(a & b for i, a in enumerate(sets) for b in sets[i + 1:]):
        return ""
    return "the inventory puts these %d nodes on common CPUs of this machine's %d: one " \
        "round, not %d" % (len(nodes), len(machine), ROUNDS)


def _cpu_set(text):
    """{0, 1, 4} from "0-1,4"; an empty set from ""."""
    found = set()
    for part in filter(None, (text or "").split(",")):
        first, _, last = part.partition("-")
        found.update(range(int(first), int(last or first) + 1))
    return found


def emulated(alone, settled=None):
    """"" or why one round is enough: the nodes, alone, compute SLOW_NODES times or more
    slower than an ordinary machine (VMs under QEMU's emulation: 15-50x). Their claims are not
    judged and disturbance there is shown only (harness/run/disturbance.py), and each probe is
    a Python started on an emulated CPU: the controls of ROUNDS rounds, 23 starts on 3 VMs,
    outlasted CI's 20 minutes for the whole VM test."""
    ratio = estimate.slowness({"nodes": {name: {"alone": v[0] if v else None}
                                         for name, v in alone.items()}, "settle": settled})
    if ratio == 1.0:  # below SLOW_NODES, slowness says 1
        return ""
    return "the nodes compute %.0fx slower than an ordinary machine (emulated): one round, " \
        "not %d" % (ratio, ROUNDS)


def measured_or_recent(nodes, pythons, now=None):
    """The probe of these nodes, run now or taken from one run less than REUSE_SECONDS ago
    that found no sharing (with `reused_after` seconds), and only while the load is what it
    saw: every node quiet then, and quiet now (settled again to know); a probe that saw
    other programs busy is never reused. Kept in the cache either way."""
    now = time.time() if now is None else now
    path = _kept_path(nodes, pythons)
    kept = last_measured(nodes, pythons)
    settled, shortcut = None, reuse_shared()
    if reusable(kept, now):
        # the suite's shortcut does not settle again: on emulated VMs and through Slurm each
        # settling starts a Python on every node
        settled = None if shortcut else settle(nodes, pythons)
        if shortcut or all_quiet(settled):
            return dict(kept, reused_after=round(now - kept["measured_at"]),
                        reused_why="" if calm(kept) else REUSE_SHARED_VARIABLE)
    found = dict(measure(nodes, pythons, settled=settled), measured_at=now)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(found))
    return found


def reusable(kept, now):
    """Whether a kept probe may stand for a new one, before the load is checked: the same
    rule and rounds, younger than REUSE_SECONDS, no sharing found and every node quiet when
    it was measured (either, with REUSE_SHARED_VARIABLE)."""
    if not kept or kept.get("rule") != RULE:
        return False
    fresh = 0 <= now - kept["measured_at"] < REUSE_SECONDS
    return (calm(kept) or reuse_shared()) and fresh and \
        kept.get("rounds_wanted", ROUNDS) >= rounds_wanted()


def calm(probe):
    """Whether a probe found no sharing, could rule it out, and saw every node quiet."""
    return not probe.get("shared") and not probe.get("undecided") and \
        all_quiet(probe.get("settle"))


def all_quiet(settled):
    """Whether a settling found every node quiet (False where it is not known)."""
    return bool(settled) and all(s.get("quiet") for s in settled.values())


def reuse_shared():
    """Whether a probe that found sharing (or could not rule it out) is reused too."""
    return os.environ.get(REUSE_SHARED_VARIABLE) == "1"


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
    """The figures per node and the verdict. alone: node -> its readings alone, one more
    than the rounds (before the first round and after each); together: node -> one reading
    a round."""
    per_node = {name: node_summary(alone[name], together[name],
                                   [s for s in steal[name] if s is not None])
                for name in alone}
    losses = [v["loss"] for v in per_node.values() if v["loss"] is not None]
    return {"nodes": per_node, "threshold": SHARED_LOSS, "seconds": round(seconds, 1),
            "probe_seconds": PROBE_SECONDS, "unit": "kernel chunks per second",
            "rounds": max([len(t) for t in together.values()] or [0]), "rule": RULE,
            "shared": any(v["shared"] for v in per_node.values()),
            "undecided": sorted(name for name, v in per_node.items() if v["undecided"]),
            "worst_loss": max(losses) if losses else None}


def node_summary(alone, together, steal):
    """One node's figures: medians; each round's loss against the mean of the readings alone
    around it; its noise, the median change between two consecutive readings alone (the
    largest beside it, shown only: the maximum of five grows with a noisy host's bursts and
    with the number of rounds, and once hid a 1-CPU quota's sharing, docs/methodology.md)."""
    changes = _changes(alone)
    out = {"alone": _median(alone), "together": _median(together) if together else None,
           "loss": None, "loss_low": None, "loss_high": None,
           "noise": _median(changes) if changes else 0.0,
           "noise_max": max(changes) if changes else 0.0,
           "rounds_over": 0, "shared": False, "undecided": False,
           "steal": max(steal) if steal else None}
    if not together or not out["alone"]:
        return out
    losses = [1.0 - t / _around(alone, i) for i, t in enumerate(together)]
    out.update(loss=_median(losses), loss_low=min(losses), loss_high=max(losses),
               rounds_over=sum(1 for x in losses if x > SHARED_LOSS))
    out["shared"] = out["loss"] > SHARED_LOSS + out["noise"] and \
        out["rounds_over"] >= len(losses) - 1
    out["undecided"] = not out["shared"] and out["loss"] > SHARED_LOSS
    return out


def _around(alone, i):
    """The reading alone that round i is compared with: the mean of the one before and the
    one after it where both are there."""
    near = alone[i:i + 2] if len(alone) > i + 1 else alone[-1:]
    return sum(near) / float(len(near))


def _changes(alone):
    """The relative changes between consecutive readings alone (none with one reading)."""
    return [abs(1.0 - b / a) for a, b in zip(alone, alone[1:]) if a]


def _median(values):
    values = sorted(values)
    middle = len(values) // 2
    return values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2.0


def node_text(name, v):
    """"node1 4% slower with the others running (rounds -6% to +1%; alone against itself
    +-2%, at most +-5%)"."""
    if v["together"] is None or v.get("loss_low") is None:
        return "%s %.0f alone" % (name, v["alone"])
    return "%s %s with the others running (rounds %+.0f%% to %+.0f%%; alone against itself " \
           "+-%.0f%%%s)" % (name, change(v["loss"]), -100 * v["loss_high"], -100 * v["loss_low"],
                            100 * v["noise"], _at_most(v))


def _at_most(v):
    """", at most +-30%" where the largest change alone is known and differs from the median."""
    if v.get("noise_max") is None or round(100 * v["noise_max"]) == round(100 * v["noise"]):
        return ""
    return ", at most +-%.0f%%" % (100 * v["noise_max"])


def change(loss):
    return "%.0f%% slower" % (100 * loss) if loss >= 0.005 else \
        "%.0f%% faster" % (-100 * loss) if loss <= -0.005 else "unchanged"


def settle_text(settled):
    """What the probe waited for before it measured, one phrase."""
    if not settled:
        return "no settling"
    waited = max(s["waited"] for s in settled.values())
    dirty = max(s["dirty_mb"] for s in settled.values())
    text = "waited %.0f s for the nodes to be quiet (%.0f MB of dirty pages written out first)" \
        % (waited, dirty)
    if all_quiet(settled):
        return text
    loud = ["%s: other programs %.0f%% of its CPUs, I/O stall %.0f%%" % (
        name, 100 * s["busy"], 100 * (s["io_stall"] or 0))
        for name, s in sorted(settled.items()) if not s["quiet"]]
    return text + "; still busy after %d s, measured anyway (%s): that is load, not the " \
        "hardware's speed, and every cell is judged for it" % (SETTLE_SECONDS, "; ".join(loud))


def describe(result):
    """One line for the console."""
    if not result:
        return "contention probe: not run"
    when = "%.0f s" % result["seconds"]
    if result.get("reused_after") is not None:
        when = "measured %d s ago on the same nodes, quiet then and now, reused%s" % (
            result["reused_after"], " though it found sharing or load (%s)" % result["reused_why"]
            if result.get("reused_why") else "")
    settled = "; " + result["settled"] if result.get("settled") else ""
    settled += "; " + result["short"] if result.get("short") else ""
    return "contention probe (%s%s): %s -> %s" % (
        when, settled, "; ".join(node_text(n, v) for n, v in sorted(result["nodes"].items())),
        verdict_text(result))


def verdict_text(result):
    """The probe's outcome, one of three: shared, not ruled out, none found."""
    if result["shared"]:
        return "nodes SHARE cores (%s)" % RULE
    if result.get("undecided"):
        return "sharing NOT RULED OUT on %s (%s)" % (", ".join(result["undecided"]), RULE)
    return "no sharing found"
