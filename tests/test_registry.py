"""The system-modes' registry (registry/systems.yml): the one place outside bench/, stacks/
and the docs that names a framework; placement, ports and launch variables come from it."""
import ast
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

import registry
from harness.plan import layout, matrix

REPO = Path(__file__).resolve().parent.parent
FRAMEWORK = re.compile(r"tensorflow|pytorch|mxnet", re.IGNORECASE)
# the code that must not name a framework: the controller and the analysis (docstrings and
# comments may explain; names and strings may not)
CHECKED = sorted(p for folder in ("harness", "analysis", "selfcheck")
                 for p in (REPO / folder).rglob("*.py")) + [REPO / "tasks.py"]


def named_in_code(path):
    """(line, text) of every identifier or non-docstring string naming a framework."""
    tree = ast.parse(path.read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = None if id(node) in docstrings else node.value
        else:
            text = getattr(node, "id", None) or getattr(node, "attr", None) or getattr(
                node, "arg", None) or (node.name if isinstance(
                    node, (ast.FunctionDef, ast.ClassDef)) else None)
        if text and FRAMEWORK.search(text):
            found.append((node.lineno, text[:60]))
    return found


def test_no_module_outside_the_registry_names_a_framework():
    offenders = {str(p.relative_to(REPO)): hits for p in CHECKED for hits in [named_in_code(p)]
                 if hits}
    assert offenders == {}


def test_the_scan_would_see_a_framework_named_in_code(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text('"""TensorFlow in a docstring is fine."""\n'
                      'ORDER = ["pytorch-sync"]\n'
                      'def f(mxnet_port):\n    return mxnet_port\n')
    assert [line for line, _ in named_in_code(sample)] == [2, 3, 4]


class _Node:
    def __init__(self, name, address):
        self.name = name
        self.host = SimpleNamespace(name=name, address=address, base_port=29500)


NODES = [_Node("node%d" % i, "10.0.0.%d" % i) for i in (1, 2, 3)]


def cell(system):
    return matrix.plan("smoke", 3, systems=system)[0]


@pytest.mark.parametrize("system, expected", [
    ("pytorch-sync", ["node1/worker-0", "node2/worker-1", "node3/worker-2"]),
    ("mxnet-async", ["node1/scheduler-0", "node1/server-0", "node2/server-1", "node3/server-2",
                     "node1/worker-0", "node2/worker-1", "node3/worker-2"]),
    ("tensorflow-async", ["node1/chief-0", "node1/ps-0", "node2/ps-1", "node3/ps-2",
                          "node1/worker-0", "node2/worker-1", "node3/worker-2"]),
])
def test_roles_are_placed_as_the_registry_says(system, expected):
    placed = ["%s/%s-%d" % (n.name, role, rank) for n, role, rank in layout.roles(cell(system),
                                                                                    NODES)]
    assert placed == expected


def test_the_cluster_spec_lists_every_listening_role_and_this_task():
    spec = layout.launch_variables(cell("tensorflow-async"), NODES, "ps", 1)["tf_config"]
    assert spec == {"cluster": {"chief": ["10.0.0.1:29512"],
                                "ps": ["10.0.0.%d:29511" % i for i in (1, 2, 3)],
                                "worker": ["10.0.0.%d:29510" % i for i in (1, 2, 3)]},
                    "task": {"type": "ps", "index": 1}}


def test_a_rendezvous_is_node_ones_address_and_port():
    assert layout.launch_variables(cell("pytorch-sync"), NODES, "worker", 2) == {
        "master_addr": "10.0.0.1", "master_port": 29500}
    assert layout.launch_variables(cell("mxnet-sync"), NODES, "worker", 2) == {
        "scheduler_addr": "10.0.0.1", "scheduler_port": 29501}


def test_the_agree_channel_serves_verdict_votes_and_tensorflow_syncs_barriers():
    """tensorflow-sync's barriers use the channel at every size (a TensorFlow all-reduce as
    the last barrier let a worker leave while its peer still read from it); the other modes
    only vote, in the verdict size; the asynchronous modes never wait for each other."""
    def address(size, system):
        return layout.agree_address(matrix.plan(size, 3, systems=system)[0], NODES)
    assert address("smoke", "tensorflow-sync") == "10.0.0.1:29502"
    assert address("smoke", "pytorch-sync") is None
    assert address("verdict", "pytorch-sync") == "10.0.0.1:29502"
    assert address("verdict", "tensorflow-async") is None


@pytest.mark.parametrize("change, message", [
    (lambda e: e.pop("communication"), "missing \\['communication'\\]"),
    (lambda e: e.update(colour_of="red"), "unknown \\['colour_of'\\]"),
    (lambda e: e.update(listens={"worker": "no_such_port"}), "ports \\['no_such_port'\\]"),
    (lambda e: e.update(communication="gossip"), "communication must be one of"),
    (lambda e: e.update(barrier="ring"), "barrier can only be `agree`"),
])
def test_a_wrong_entry_is_named(tmp_path, change, message):
    raw = yaml.safe_load(registry.FILE.read_text())
    change(raw["systems"]["pytorch-sync"])
    path = tmp_path / "systems.yml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(ValueError, match="system-mode pytorch-sync: .*" + message):
        registry.load(path)


def test_a_run_carries_its_own_entries_to_the_analysis():
    """An older run's manifest says how its system-modes communicated; it wins over today's."""
    manifest = {"systems": {"pytorch-sync": dict(registry.system("pytorch-sync"),
                                                 communication="parameter-server")}}
    assert registry.system("pytorch-sync", manifest)["communication"] == "parameter-server"
    assert registry.system("pytorch-sync")["communication"] == "all-reduce"


def test_the_help_texts_list_what_the_repository_holds():
    """`invoke --help bench` names every stack in stacks/, every inventory in inventory/, every
    benchmark and every size's profiled steps: they are read from the files, not written
    by hand."""
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-m", "invoke", "--help", "bench"], cwd=str(REPO),
                         capture_output=True, text=True, check=True).stdout
    flat = re.sub(r"\s+", " ", out).replace("- ", "-")
    for stack in (REPO / "stacks").glob("*.yml"):
        assert stack.stem in flat, stack.stem
    for inventory in (REPO / "inventory").glob("*.yml"):
        assert inventory.stem in flat, inventory.stem
    for benchmark in matrix.BENCHMARKS:
        assert benchmark in flat, benchmark
    for name, size in matrix.SIZES.items():
        assert "%s %d" % (name, size.profile_steps) in flat, name


def test_the_firewall_table_in_the_docs_is_the_registrys():
    """docs/reproducing.md's firewall table is generated from registry/systems.yml: a port
    added or moved there and not in the docs fails here (it had left out base_port + 2 and the
    liveness probe's port 1)."""
    docs = (REPO / "docs" / "reproducing.md").read_text()
    table = "\n".join(registry.firewall_table())
    assert table in docs, "paste into docs/reproducing.md (Firewall):\n" + table
    assert "| base_port + 2 |" in table and "| 1 | nothing" in table
