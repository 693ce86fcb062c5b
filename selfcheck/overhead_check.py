"""Measurements of the measuring, on node 1 of the inventory. `invoke overhead`: each
framework's training loop bare and instrumented, and the ratio of their step times (goal: at
most 1.01). `invoke crosscheck`: the calibration's forward/backward against profiler operator
times on the same node (docs/methodology.md)."""
import json
import shlex

import registry

from harness.nodes import inventory, access as nodes_mod, stacks
from harness.run import launch, preflight
from harness.plan import matrix
from harness.run.pipeline import shard_index
from contract import nodefolder
from contract.errors import UserError

# one synchronous system-mode per framework: its trainer's local_loop is what runs
FRAMEWORK_SYSTEM = {framework: next(name for name, e in registry.systems().items()
                                     if e["framework"] == framework and e["mode"] == "sync")
                    for framework in registry.frameworks()}
GOAL = 1.01


def run(inventory_name, stack_name, benchmark, steps, rounds, frameworks=None):
    inv = inventory.load(inventory_name)
    stack = stacks.load(stack_name)
    nodes = nodes_mod.connect_all(inv)
    unknown = [f for f in frameworks or () if f not in FRAMEWORK_SYSTEM]
    if unknown:
        raise UserError("unknown framework %s" % ", ".join(map(repr, unknown)),
                        "frameworks are: %s" % ", ".join(FRAMEWORK_SYSTEM))
    rows = []
    for framework in frameworks or list(FRAMEWORK_SYSTEM):
        (cell,) = matrix.plan("smoke", len(inv.hosts), benchmarks=benchmark,
                              systems=FRAMEWORK_SYSTEM[framework])
        print("%s: %d rounds of %d bare + %d instrumented steps of %s on %s ..."
              % (framework, rounds, steps, steps, cell.network, nodes[0].name), flush=True)
        rows.append(measure(cell, nodes, stack, steps, rounds))
    print(table(rows))
    return rows


def measure(cell, nodes, stack, steps, rounds):
    return run_module(cell, nodes, stack, "bench.overhead", steps, rounds)


def run_module(cell, nodes, stack, module, *args, extra_path=None):
    """`python -m module cell.json ARGS` for rank 0 of the cell on node 1, in the framework's
    environment with the cell's thread settings (extra_path: a folder of packages put after
    the code on PYTHONPATH); returns the JSON of its last output line."""
    shards = shard_index(cell, cell.nodes)
    preflight.check(nodes, stack, [cell])
    proc = launch.prepare(cell, "overhead", nodes, stack, shards)[0]  # node 1, rank 0
    node = proc.node
    node.mkdir(proc.out_dir)
    launch.write_file(node, proc.out_dir + "/" + nodefolder.CELL_CONFIG, json.dumps(proc.config))
    env = stack.env(cell.framework)
    python = env.python(node.path(node.host.env_root))
    threads = proc.config["threads"]
    # the launch scripts' settings (bench/templates/), then the stack's own, which win
    variables = dict({"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads,
                      "TF_USE_LEGACY_KERAS": 1, "TF_CPP_MIN_LOG_LEVEL": 2,
                      "TF_ENABLE_ONEDNN_OPTS": 1}, **(env.environment or {}))
    pin = "taskset -c %s " % proc.config["cpus"] if proc.config["cpus"] else ""
    command = ("cd %s && %s PYTHONPATH=%s %s%s -m %s cell.json %s"
               % (shlex.quote(proc.out_dir), " ".join(
                   "%s=%s" % (k, shlex.quote(str(v))) for k, v in sorted(variables.items())),
                  shlex.quote(":".join([node.path(node.host.workdir) + "/code"]
                                       + ([extra_path] if extra_path else []))), pin,
                  shlex.quote(python), module, " ".join(str(int(a)) for a in args)))
    out = node.run(command).stdout
    return json.loads(out.strip().splitlines()[-1])


def crosscheck(inventory_name, stack_name, benchmark, steps):
    """Calibration vs profiler operator times for forward and backward, for the framework
    that has a cross-check (registry `crosscheck`)."""
    inv = inventory.load(inventory_name)
    stack = stacks.load(stack_name)
    nodes = nodes_mod.connect_all(inv)
    framework, module = next((name, f["crosscheck"]) for name, f
                             in registry.frameworks().items() if f.get("crosscheck"))
    (cell,) = matrix.plan("smoke", len(inv.hosts), benchmarks=benchmark,
                          systems=FRAMEWORK_SYSTEM[framework])
    print("%s: %d calibration + %d profiled steps of %s on %s ..."
          % (framework, steps, steps, cell.network, nodes[0].name), flush=True)
    row = run_module(cell, nodes, stack, module, steps)
    print("\nphase      calibration s   profiler operators s   profiler / calibration")
    for phase in ("forward", "backward"):
        cal, prof = row["calibration"][phase], row["profiler"][phase]
        print("%-10s %13.5f   %20.5f   %22.3f" % (phase, cal, prof, prof / cal))
    return row


def table(rows):
    lines = ["", "framework   network   bare s/step   instrumented s/step   ratio   goal",
             "---------   -------   -----------   -------------------   -----   ----"]
    for r in rows:
        lines.append("%-11s %-9s %11.5f   %19.5f   %5.3f   %s"
                     % (r["framework"], r["network"], r["bare"], r["instrumented"], r["ratio"],
                        "ok" if r["ratio"] <= GOAL else "over %.2f" % GOAL))
    return "\n".join(lines)
