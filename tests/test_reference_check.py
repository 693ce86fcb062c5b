"""invoke reference-check's reference packages: installed beside a stack's env, never into it
(the logic around the install; the install itself is pip on the node)."""
from types import SimpleNamespace

from harness.nodes import stacks
from selfcheck import reference_check


class Node:
    def __init__(self):
        self.commands = []
        self.host = SimpleNamespace(workdir="/w", env_root="/envs")

    def path(self, path):
        return path

    def run(self, command, timeout=None):
        self.commands.append(command)


def test_references_go_to_a_folder_of_their_own_and_leave_the_env_as_provisioned():
    stack = stacks.load("paper-py39")
    env = stack.env("pytorch")
    assert env.references == ["torchvision==0.8.2", "pillow==8.4.0"]
    node = Node()
    folder = reference_check.references(node, stack, "pytorch")
    assert folder.startswith("/w/references/%s-" % env.dirname)
    (command,) = node.commands
    assert "%s -m pip install -q --no-deps --target %s torchvision==0.8.2 pillow==8.4.0" % (
        env.python("/envs"), folder) in command
    assert command.startswith("test -f %s/.done ||" % folder)  # installed once per node


def test_references_do_not_change_the_envs_name_and_none_means_nothing_to_install(tmp_path):
    path = tmp_path / "s.yml"
    text = ("name: s\npython: '3.11'\nframeworks:\n  pytorch:\n    import: torch\n"
            "    packages: [torch==2.13.0]\n")
    path.write_text(text)
    plain = stacks.load(str(path))
    path.write_text(text + "    references: [torchvision==0.29.2]\n")
    assert stacks.load(str(path)).env("pytorch").dirname == plain.env("pytorch").dirname
    node = Node()
    assert reference_check.references(node, plain, "pytorch") is None and node.commands == []


def test_a_process_that_fails_is_a_row_that_says_why_and_the_others_are_kept(monkeypatch):
    from contract.errors import UserError
    def crashes(*args, **kwargs):
        raise UserError("node1: command failed (exit -11): python -m bench.reference\n"
                        "Segmentation fault")
    monkeypatch.setattr(reference_check, "run_module", crashes)
    monkeypatch.setattr(reference_check, "references", lambda *a: None)
    cell = SimpleNamespace(network="resnet18")
    row = dict(reference_check.measure(cell, [Node()], None, "pytorch", 6, 5),
               stack="paper-py39")
    assert row["missing"] == "failed: Segmentation fault"
    ok = {"stack": "paper-py39", "framework": "mxnet", "network": "resnet18",
          "reference": "gluon", "median": {"package": 0.3, "reference": 0.3},
          "ratio": {"median": 1.0, "low": 0.99, "high": 1.01}}
    lines = reference_check.table([ok, row])
    assert "| paper-py39 | pytorch | resnet18 | - | - | - | - | none: failed: Segmentation " \
        "fault |" in lines and any("| 1.000 (0.990-1.010) | yes |" in l for l in lines)
