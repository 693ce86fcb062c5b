"""Whether a cell ran undisturbed, from what its processes measured of their node while it
ran (bench/common/interference.py, result.json `interference`).

A node is disturbed when other programs' CPU time plus steal took more than BOUND of its
CPUs' time over the cell. Why 5%: a program that takes a share f of a node's CPUs can stretch
a CPU-bound cell by up to f / (1 - f); at 5% that is 5.3%, a fifth of the verdicts' tolerance
(x/ 1.25) and no more than two runs of one cell on a quiet machine differ. FLOOR_SECONDS
of CPU time of others' CPU in each process's window are let off: what a quiet node shows
there whatever the window's length, some of it the cell's own helpers that the 2-s scans
cannot attribute (docs/methodology.md, "Interference"); several % of a seconds-long smoke
cell, a fraction of a % of a verdict cell's minutes. A disturbed cell
is run once more (the disturbed attempt kept in .attempts/ with its figures); one disturbed
again is kept, marked, and left out of the verdicts (docs/methodology.md, "Interference").
Where the nodes share cores or are emulated (judged()), it is measured and shown only.
"""
import json
from contract import nodefolder

BOUND = 0.05
# CPU seconds of others' CPU let off in each process's window: quiet windows of 1.6-4.2 s on
# nodes of 1 CPU read 0.00-0.12 s whatever their length; one source, by the
# kernel's process accounting, is the data loader's forked worker (30-40 ms, ended by a signal
# between two scans)
FLOOR_SECONDS = 0.15
FIGURES = ("others_cpu", "steal", "pressure_cpu", "pressure_io", "runqueue_wait")


def judged(probe, bounds=None):
    """Whether disturbance is acted on in this run: not where the probe found the nodes
    sharing cores (their claims are not comparable whatever else runs, and on one machine
    the other nodes' polls land on the same CPUs), nor on nodes 3x or more slower than an
    ordinary machine's (emulated VMs, where the harness's own polls over SSH take a visible
    share of a node). There it is measured and shown only."""
    return not (probe or {}).get("shared") and (bounds.slowness if bounds else 1.0) < 3


def per_node(cell_path):
    """node -> the largest of each figure over the node's processes (None where none said),
    and `judged`: the largest share held against the bound (judged_share)."""
    found = {}
    for result_file in nodefolder.fetched_results(cell_path):
        try:
            figures = json.loads(result_file.read_text()).get("interference") or {}
        except ValueError:
            continue
        node = found.setdefault(result_file.parent.parent.name,
                                dict({k: None for k in FIGURES}, judged=None))
        try:
            _take(node, figures)
        except (TypeError, ValueError):  # a malformed file: its figures are not known
            continue
    return found


def _take(node, figures):
    for key in FIGURES:
        if figures.get(key) is not None:
            node[key] = max(node[key] or 0.0, float(figures[key]))
    if figures.get("others_cpu") is not None or figures.get("steal") is not None:
        node["judged"] = max(node["judged"] or 0.0, judged_share(figures))


def judged_share(figures):
    """Others' CPU less FLOOR_SECONDS of it (never below 0), plus steal, as shares of the
    window's CPU time; others' whole share where the window is not known (older results).
    Steal is the hypervisor's, never the cell's own: none of it is let off."""
    window = (figures.get("seconds") or 0.0) * (figures.get("cpus") or 0)
    floor = FLOOR_SECONDS / window if window > 0 else 0.0
    return max(0.0, (figures.get("others_cpu") or 0.0) - floor) + (figures.get("steal") or 0.0)


def disturbed(nodes):
    """'' or why the cell counts as disturbed: the nodes over BOUND and by how much."""
    over = ["%s: other programs %.0f%% and steal %.0f%% of its CPUs' time, %.1f%% held" % (
        name, 100 * (v["others_cpu"] or 0), 100 * (v["steal"] or 0), 100 * _held(v))
        for name, v in sorted(nodes.items()) if _held(v) > BOUND]
    if not over:
        return ""
    return "disturbed (%s; the bound: %.0f%% after %.2f CPU-s a process let off)" % (
        "; ".join(over), 100 * BOUND, FLOOR_SECONDS)


def _held(node):
    """The share judged against the bound: per_node's `judged`, or for a status file written
    before it, judged_share of the node's figures (no window: the whole share)."""
    return node["judged"] if node.get("judged") is not None else judged_share(node)
