"""`invoke fault-bench --campaign`: a fixed campaign, every role of every system-mode killed
once in training and stopped once before its first step (FIXED_FAULTS), each a cell of one
run; printed per fault: the role and node, when it was detected, and whether the cell's
reason named it. A stopped role must be caught within STOP_GOAL s and named first.

`invoke fault-bench --random N`: N faults, each a random role (worker, server, scheduler,
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

from harness.results import run_manifest
from harness import commands
from harness.nodes import inventory, access as nodes_mod
import dataclasses

from harness.plan import layout, matrix
from harness.run import hooks
from contract import nodefolder, runfolder
from selfcheck.faults import KillWhenTraining, keep, next_cell, run_order, strays

DETECTION_GOAL = 10.0
STOP_GOAL = 30.0
# (fault, how): a role killed (SIGKILL, as the OOM killer does) once node 1 trains, and a
# role's whole process group stopped (SIGSTOP) at the cell's first poll, before it has
# written any progress: the case only the start-up bound once caught, after minutes
FIXED_FAULTS = (("kill", dict(signal="KILL", step=1)),
                ("stop", dict(signal="STOP", step=0, group=True)))
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
    keep(results, "fault-campaign", {"inventory": inventory_name, "seed": seed, "rows": rows,
                                     "per_role": table})
    return rows, table


def one_fault(inv, inventory_name, stack_name, results, system, rng):
    nodes = nodes_mod.connect_all(inv)
    run_id = "campaign-%s-%s" % (system, run_manifest.new_run_id())
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


def fixed_plan(hosts, systems=None, steps=STEPS):
    """[(cell, victim node name, role, rank, fault, how)]: each role of each system-mode (its
    process on the last node it runs on), each fault of FIXED_FAULTS, a smoke cell each; the
    repeat index keeps their ids apart."""
    names = ["node%d" % (i + 1) for i in range(hosts)]
    plan = []
    for cell in matrix.plan("smoke", hosts, systems=systems, steps=steps):
        placed = layout.roles(cell, names)
        for role in dict.fromkeys(r for _, r, _ in placed):
            node, _, rank = [p for p in placed if p[1] == role][-1]
            for fault, how in FIXED_FAULTS:
                plan.append((dataclasses.replace(cell, repeat=len(plan)), node, role, rank,
                             fault, how))
    return plan


def fixed(inventory_name, stack_name, results, systems=None):
    """The fixed campaign as one run of bench, its faults injected through the run's hooks;
    returns the rows printed."""
    inv = inventory.load(inventory_name)
    plan = fixed_plan(len(inv.hosts), systems)
    run_id = "campaign-fixed-%s" % run_manifest.new_run_id()
    killers = [KillWhenTraining(inv.hosts[0].name, node, cell.id, label="%s-%d" % (role, rank),
                                **how) for cell, node, role, rank, _, how in plan]
    commands.bench_named(inventory_name, stack_name, "smoke", results, run=run_id,
                         steps=STEPS, hooks=[hooks.GivenCells([p[0] for p in plan])] + killers)
    folder = runfolder.RunFolder(Path(results) / run_id)
    rows = [fixed_row(folder.status(cell.id), killer, node, role, rank, fault)
            for (cell, node, role, rank, fault, _), killer in zip(plan, killers)]
    left = sum(len(p) for p in strays(nodes_mod.connect_all(inv), run_id).values())
    print_fixed(rows, left)
    keep(results, "fault-campaign-fixed", {"inventory": inventory_name, "run": run_id,
                                           "rows": rows, "strays": left})
    return rows, left


def fixed_row(status, killer, node, role, rank, fault):
    label = "%s/%s-%d" % (node, role, rank)
    said = status.get("reason") or status.get("warning") or ""
    detected = status.get("detected")
    return {"system": status.get("settings", {}).get("system"), "role": role, "node": node,
            "fault": fault, "injected": killer.killed_at is not None,
            "phase": killer.victim_phase, "status": status.get("status"), "reason": said,
            "detection": detected - killer.killed_at if killer.killed_at and detected else None,
            "named": label in said, "named_first": said.startswith(label) or
            said.startswith("stalled: " + label)}


def print_fixed(rows, left):
    print("\n%-17s %-10s %-6s %-5s %-9s %9s %-6s %s" % (
        "system", "role", "node", "fault", "status", "detected", "named", "reason"))
    for r in rows:
        print("%-17s %-10s %-6s %-5s %-9s %9s %-6s %s" % (
            r["system"], r["role"], r["node"], r["fault"], r["status"],
            "-" if r["detection"] is None else "%.1f s" % r["detection"],
            "first" if r["named_first"] else ("yes" if r["named"] else "no"),
            r["reason"][:70]))
    print("processes left on the nodes: %d" % left)
