"""`invoke reference-check`: each network of the package against the same network as its
framework's own library writes it (torchvision, the Gluon model zoo, keras.applications), on
node 1: one process, the node's threads, a full SGD-momentum step on one fixed batch, in
interleaved rounds (bench/reference.py). A benchmark that prints figures. Goal: every
network within GOAL of its reference, or the difference explained (docs/methodology.md,
"Networks against their frameworks' own")."""
import hashlib
import shlex

import registry

from contract.errors import UserError
from harness.nodes import inventory, access as nodes_mod, stacks
from harness.plan import matrix
from selfcheck.overhead_check import FRAMEWORK_SYSTEM, run_module

GOAL = 0.10
NETWORK_BENCHMARK = {"resnet18": "resnet18-cifar10", "resnet50": "resnet50-cifar10",
                     "alexnet": "alexnet-cifar10"}


def run(inventory_name, stack_name, rounds=6, steps=5, frameworks=None, networks=None):
    inv = inventory.load(inventory_name)
    stack = stacks.load(stack_name)
    nodes = nodes_mod.connect_all(inv)
    rows = []
    for framework in frameworks or list(registry.frameworks()):
        for network in networks or list(NETWORK_BENCHMARK):
            (cell,) = matrix.plan("smoke", len(inv.hosts),
                                  benchmarks=NETWORK_BENCHMARK[network],
                                  systems=FRAMEWORK_SYSTEM[framework])
            print("%s %s: %d rounds of %d steps of each model on %s ..."
                  % (stack.name, framework + " " + network, rounds, steps, nodes[0].name),
                  flush=True)
            rows.append(dict(measure(cell, nodes, stack, framework, rounds, steps),
                             stack=stack.name))
    print("\n".join(table(rows)))
    return rows


def measure(cell, nodes, stack, framework, rounds, steps):
    """One row; a process that fails is a row that says why, and the other rows still run
    and print (nothing measured is lost to one crash)."""
    try:
        return run_module(cell, nodes, stack, "bench.reference", rounds, steps,
                          extra_path=references(nodes[0], stack, framework))
    except UserError as error:
        print("  failed: %s" % error.cause.splitlines()[0][:300], flush=True)
        return {"framework": framework, "network": cell.network,
                "missing": "failed: %s" % error.cause.strip().splitlines()[-1][:200]}


def references(node, stack, framework):
    """The packages a stack names for this check only (`references:`, e.g. torchvision beside
    torch 1.7.1), installed once on the node into a folder of their own with --no-deps and put
    on this check's PYTHONPATH: the timed env stays exactly as provisioned. None: none named."""
    env = stack.env(framework)
    if not env.references:
        return None
    digest = hashlib.sha1(" ".join(env.references).encode()).hexdigest()[:8]
    folder = "%s/references/%s-%s" % (node.path(node.host.workdir), env.dirname, digest)
    python = env.python(node.path(node.host.env_root))
    q = shlex.quote
    node.run("test -f %s/.done || { %s -m pip install -q --no-deps --target %s %s && "
             "touch %s/.done; }" % (q(folder), q(python), q(folder),
                                    " ".join(q(p) for p in env.references), q(folder)),
             timeout=1800)
    return folder


def table(rows):
    lines = ["| stack | framework | network | package ms | reference ms | package / reference "
             "(range) | within %d%% | reference |" % (100 * GOAL), "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ratio = r.get("ratio")
        median = r.get("median") or {}
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["stack"], r["framework"], r["network"],
            "%.1f" % (1e3 * median["package"]) if "package" in median else "-",
            "%.1f" % (1e3 * median["reference"]) if "reference" in median else "-",
            "%.3f (%.3f-%.3f)" % (ratio["median"], ratio["low"], ratio["high"]) if ratio
            else "-", ("yes" if abs(ratio["median"] - 1) <= GOAL else "NO") if ratio else "-",
            r["reference"] if ratio else "none: %s" % r.get("missing")))
    return lines
