"""Version sets: the current stack runs here; the paper stack pins the paper's versions."""
from pathlib import Path

import pytest

from harness.nodes import stacks
from contract.errors import UserError


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


PY39 = ("python: '3.9'\npython_source: debian\n%s"
        "frameworks:\n  mxnet:\n    import: mxnet\n    packages: [mxnet==1.7.0.post2]\n")


def test_debian_python_stack_names_its_release_and_gets_its_own_envs(tmp_path):
    py39 = stacks.load("paper-py39")
    assert py39.python == "3.9" and py39.python_source == "debian"
    libraries = ["libffi7=3.3-6", "libmpdec3=2.5.1-1", "libssl1.1=1.1.1w-0+deb11u1"]
    assert py39.debian == {
        "suite": "bullseye", "version": "3.9.2-1", "libraries": libraries,
        "keyring": "debian-archive-bullseye-stable.gpg",
        "packages": ["python3.9=3.9.2-1", "python3.9-minimal=3.9.2-1",
                     "libpython3.9-minimal=3.9.2-1", "libpython3.9-stdlib=3.9.2-1",
                     "python3-distutils=3.9.2-1", "python3-lib2to3=3.9.2-1"] + libraries,
        "seed": ["pip==23.0.1", "setuptools==58.1.0"]}
    # the key it names ships with the playbook, for nodes whose keyring lacks it
    assert (Path("playbooks/roles/framework_envs/files") / py39.debian["keyring"]).is_file()
    assert pins(py39, "pytorch")["torch"] == "1.7.1"
    # the same pins on another interpreter (or another seed) build another env
    other = tmp_path / "other.yml"
    other.write_text(PY39 % "debian: {suite: bullseye, version: 3.9.2-1}\n")
    assert stacks.load(other).env("mxnet").dirname != py39.env("mxnet").dirname
    plain = tmp_path / "plain.yml"
    plain.write_text((PY39 % "").replace("python_source: debian\n", ""))
    assert stacks.load(plain).debian is None


def test_debian_python_stack_without_its_release_is_refused(tmp_path):
    bad = tmp_path / "bad.yml"
    bad.write_text(PY39 % "debian: {suite: bullseye}\n")
    with pytest.raises(UserError, match=r"needs `debian: \{suite, version\}`"):
        stacks.load(bad)


def test_a_release_stack_is_the_base_with_one_frameworks_env_replaced():
    base = stacks.load("paper-py39")
    same = stacks.load("paper-py39+tensorflow-2.5")  # the paper's release: the base's own env
    newer = stacks.load("paper-py39+tensorflow-2.9")
    assert same.envs["tensorflow"].dirname == base.envs["tensorflow"].dirname
    assert newer.envs["tensorflow"].dirname != base.envs["tensorflow"].dirname
    assert "tensorflow-cpu==2.9.3" in newer.envs["tensorflow"].packages
    assert newer.envs["tensorflow"].environment == {}  # the release's own defaults
    assert {f: e.dirname for f, e in newer.envs.items() if f != "tensorflow"} == \
        {f: e.dirname for f, e in base.envs.items() if f != "tensorflow"}
    assert (newer.name, newer.python, newer.debian) == ("paper-py39+tensorflow-2.9", "3.9",
                                                        base.debian)


def test_an_unknown_release_names_the_release_stacks():
    with pytest.raises(UserError, match="no release stack paper-py39\\+tensorflow-9.9") as e:
        stacks.load("paper-py39+tensorflow-9.9")
    assert "paper-py39+tensorflow-2.9" in e.value.fix
