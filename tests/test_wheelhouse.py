"""The wheelhouse's choices, without pip: the tags it asks for, its refusals, its reuse."""
import json

import pytest

from contract.errors import UserError
from harness.nodes import stacks, wheelhouse


def test_abi_tags_follow_cpython():
    assert wheelhouse.abi("3.6") == "cp36m"
    assert wheelhouse.abi("3.9") == "cp39"
    assert wheelhouse.abi("3.11") == "cp311"


def test_without_the_nodes_python_here_it_asks_for_wheels_of_their_python(monkeypatch):
    monkeypatch.setattr(wheelhouse.shutil, "which", lambda name: None)
    command = wheelhouse.downloader("3.9")
    assert "--only-binary=:all:" in command
    assert command[command.index("--python-version") + 1] == "3.9"
    assert command[command.index("--abi") + 1] == "cp39"
    platforms = [command[i + 1] for i, arg in enumerate(command) if arg == "--platform"]
    assert "manylinux2014_x86_64" in platforms and "manylinux_2_28_x86_64" in platforms


def test_a_conda_stack_is_refused_with_the_way_out():
    with pytest.raises(UserError) as found:
        wheelhouse.fill(stacks.load("paper"), None, "/nonexistent")
    assert "conda" in str(found.value) and "pip packages only" in str(found.value)


def test_an_inventory_that_takes_python_from_conda_is_refused_too():
    with pytest.raises(UserError) as found:
        wheelhouse.fill(stacks.load("current"), None, "/nonexistent", ["node1", "node2"])
    assert "on node1, node2 (`python_source: conda`)" in str(found.value)


def test_a_folder_filled_with_the_same_pins_is_kept(tmp_path, monkeypatch):
    stack = stacks.load("current")
    env = stack.env("pytorch")
    (tmp_path / env.dirname).mkdir()
    (tmp_path / env.dirname / wheelhouse.FILLED).write_text(json.dumps(env.packages))
    monkeypatch.setattr(wheelhouse, "download", lambda *a: pytest.fail("downloaded again"))
    said = []
    filled = wheelhouse.fill(stack, ["pytorch"], tmp_path, progress=said.append)
    assert filled == {env.dirname: str(tmp_path / env.dirname)}
    assert "already holds" in said[0]


def test_changed_pins_download_again(tmp_path, monkeypatch):
    stack = stacks.load("paper-py39")
    env = stack.env("mxnet")
    (tmp_path / env.dirname).mkdir()
    (tmp_path / env.dirname / wheelhouse.FILLED).write_text(json.dumps(env.packages))
    asked = []
    monkeypatch.setattr(wheelhouse, "download", lambda s, e, wanted, t: asked.append(wanted))
    wheelhouse.fill(stack, ["mxnet"], tmp_path, progress=lambda line: None)
    assert asked == [["pip==23.0.1", "setuptools==58.1.0"] + env.packages]  # the seed first
