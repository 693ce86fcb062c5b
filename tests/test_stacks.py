"""Version sets: the current stack runs here; the paper stack pins the paper's versions."""
import pytest

from harness import stacks
from harness.errors import UserError


def pins(stack, framework):
    return dict(p.split("==", 1) for p in stack.env(framework).packages)


def test_paper_stack_pins_the_papers_versions():
    paper = stacks.load("paper")
    assert paper.python == "3.6" and paper.python_source == "conda"
    assert pins(paper, "tensorflow")["tensorflow-cpu"] == "2.5.0"
    assert pins(paper, "pytorch")["torch"] == "1.7.0+cpu"
    assert pins(paper, "mxnet")["mxnet"] == "1.7.0.post2"
    assert {pins(paper, f)["numpy"] for f in stacks.FRAMEWORKS} == {"1.19.5"}


def test_current_stack_has_every_framework_in_its_own_env():
    current = stacks.load("current")
    assert sorted(current.envs) == sorted(stacks.FRAMEWORKS)
    assert pins(current, "mxnet")["numpy"] == "1.23.5"  # numpy 1.24+ breaks import mxnet
    assert pins(current, "tensorflow")["tf-keras"] == "2.21.0"
    assert len({e.dirname for e in current.envs.values()}) == 3
    # an env's folder changes with its pins, so a new pin never reuses a stale env
    assert current.env("mxnet").dirname != stacks.load("paper").env("mxnet").dirname


def test_unknown_framework_in_a_stack_is_named(tmp_path):
    bad = tmp_path / "bad.yml"
    bad.write_text("python: '3.11'\nframeworks:\n  caffe:\n    import: caffe\n"
                   "    packages: [caffe==1.0]\n")
    with pytest.raises(UserError, match="unknown framework 'caffe'"):
        stacks.load(bad)
