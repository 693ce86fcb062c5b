"""`invoke fault-bench --random N`: N faults, each a random role (worker, server, scheduler,
ps, chief; drawn among the system-mode's roles, then a process of it) of a random
system-mode SIGKILLed at a random moment of its cell, on the local or
the emulated cluster. Each fault is a run of two cells of the same system-mode: the faulted
one, then the next, which must succeed.

Printed per role: detection time (kill to the cell's end seen; median and max), cleanup
time, processes left on every node, whether the next cell succeeded, and whether any record
was lost (every process of the faulted cell, the killed one included, must have its files
fetched: result or memory log). A draw whose victim had already exited when the kill came is
not a fault: it is drawn again (at most 3 x N draws)."""
import random
import statistics
from pathlib import Path

from harness.results import collect
from harness import commands
from harness.nodes import inventory, access as nodes_mod
from harness.plan import layout, matrix
from contract import nodefolder, runfolder
from selfcheck.faults import KillWhenTraining, next_cell, run_order, strays

DETECTION_GOAL = 10.0
STEPS = 200  # timed steps of each cell: LeNet-5 trains for seconds, long enough to aim into


def run(inventory_name, stack_name, results, count, seed=None, systems=None):
    rng = random.Random(seed)
    inv = inventory.load(inventory_name)
    chosen = [c.system for c in matrix.plan("smoke", len(inv.hosts), systems=systems)]
    rows, draws = [], 0
    while len(rows) < count and draws < 3 * count:
        draws += 1
        row = one_fault(inv, inventory_name, stack_name, results, rng.choice(chosen), rng)
        print("fault %d/%d: %s" % (len(rows) + (1 if row["injected"] else 0), count,
                                   describe(row)), flush=True)
        if row["injected"]:
            rows.append(row)
    table = summarise(rows)
    print_table(table, len(rows), seed)
    out = Path(results) / ("fault-campaign-%s.json" % collect.new_run_id())
    runfolder.write_json(out, {"inventory": inventory_name, "seed": seed, "rows": rows,
                               "per_role": table})
    print("written to %s" % out)
    return rows, table


def one_fault(inv, inventory_name, stack_name, results, system, rng):
    nodes = nodes_mod.connect_all(inv)
    run_id = "campaign-%s-%s" % (system, collect.new_run_id())
    cells = run_order(inv, run_id, system, STEPS)  # the first is faulted, the next must run
    placed = layout.roles(cells[0], nodes)  # the role first, so that the one-per-cell
    role = rng.choice(sorted({r for _, r, _ in placed}))  # coordinators are drawn as often
    victim_node, role, rank = rng.choice([p for p in placed if p[1] == role])
    # the moment: 0-8 s after the cell trains (a process on node 1 reports step 1)
    killer = KillWhenTraining(nodes[0].name, victim_node.name, cells[0].id, step=1,
                              label="%s-%d" % (role, rank), delay=rng.uniform(0.0, 8.0))
    commands.bench_named(inventory_name, stack_name, "smoke", results, run=run_id,
                         systems=system, steps=STEPS, repeats=2, hooks=[killer])
    path = Path(results) / run_id
    faulted, after = (runfolder.RunFolder(path).status(c.id) for c in cells)
    detected = faulted.get("detected")
    return {"system": system, "role": role, "node": victim_node.name, "run": str(path),
            "delay": killer.delay, "phase": killer.victim_phase,
            "injected": killer.killed_at is not None,
            "status": faulted.get("status"), "reason": faulted.get("reason") or
            faulted.get("warning"),
            "detection": detected - killer.killed_at if killer.killed_at and detected else None,
            "cleanup": (faulted.get("ended") or 0) - (detected or 0),
            "strays": sum(len(p) for p in strays(nodes, run_id).values()),
            "next_cell": next_cell(faulted, after), "lost": lost(path / cells[0].id, faulted)}


def lost(cell_path, status):
    """Processes of the cell whose files did not come back (none fetched, or no memory log)."""
    missing = []
    for proc in status.get("processes") or []:
        folder = cell_path / proc["node"] / ("%s-%d" % (proc["role"], proc["rank"]))
        if not (folder / nodefolder.MEMORY).is_file():
            missing.append("%s/%s-%d" % (proc["node"], proc["role"], proc["rank"]))
    return missing


def describe(row):
    if not row["injected"]:
        return "%s %s on %s: not injected (it had exited), drawn again" % (
            row["system"], row["role"], row["node"])
    return "%s %s on %s at +%.1f s (%s): %s, detected in %s, next cell %s" % (
        row["system"], row["role"], row["node"], row["delay"], row["phase"], row["status"],
        "-" if row["detection"] is None else "%.1f s" % row["detection"], row["next_cell"])


def summarise(rows):
    table = []
    for role in sorted({r["role"] for r in rows}):
        mine = [r for r in rows if r["role"] == role]
        found = [r["detection"] for r in mine if r["detection"] is not None]
        cleanup = [r["cleanup"] for r in mine]
        table.append({
            "role": role, "faults": len(mine),
            "systems": ",".join(sorted({r["system"] for r in mine})),
            "detected_in_goal": sum(1 for d in found if d <= DETECTION_GOAL),
            "detection_median": statistics.median(found) if found else None,
            "detection_max": max(found) if found else None,
            "cleanup_median": statistics.median(cleanup), "cleanup_max": max(cleanup),
            "strays": sum(r["strays"] for r in mine),
            "next_ok": sum(1 for r in mine if r["next_cell"] == "succeeded"),
            "lost": sum(len(r["lost"]) for r in mine)})
    return table


def print_table(table, faults, seed):
    print("\n%d faults (seed %s)" % (faults, seed))
    print("%-10s %6s %13s %16s %16s %6s %9s %6s" % (
        "role", "faults", "detected<=10s", "detect med/max", "cleanup med/max", "strays",
        "next ok", "lost"))
    for t in table:
        print("%-10s %6d %13s %16s %16s %6d %9s %6d" % (
            t["role"], t["faults"], "%d/%d" % (t["detected_in_goal"], t["faults"]),
            _pair(t["detection_median"], t["detection_max"]),
            _pair(t["cleanup_median"], t["cleanup_max"]), t["strays"],
            "%d/%d" % (t["next_ok"], t["faults"]), t["lost"]))


def _pair(a, b):
    return "-" if a is None else "%.1f / %.1f s" % (a, b)
