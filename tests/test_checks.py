"""Static checks of what cannot run on this machine: the Vagrantfile (no VMs boot here), the
playbooks (ansible-lint, syntax), every YAML file, and the conda environment files of the
paper stack (Python 3.6.9 cannot be installed here). CI sets DLBENCH_CI=1: a missing tool
fails there instead of skipping."""
import os
import shutil
import subprocess
import sys

import pytest
import yaml

from harness.nodes import stacks
from harness.paths import REPO

BIN = os.path.dirname(sys.executable)


def tool(name):
    path = shutil.which(name) or (os.path.join(BIN, name)
                                  if os.path.exists(os.path.join(BIN, name)) else None)
    if path is None:
        if os.environ.get("DLBENCH_CI"):
            pytest.fail("%s is not installed (.ci/run installs it)" % name)
        pytest.skip("%s is not installed: apt-get install vagrant vagrant-libvirt" % name)
    return path


def run(command, cwd=REPO, **env):
    return subprocess.run(command, cwd=str(cwd), capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, **env))


def vagrant_validate(folder):
    # libvirt: the provider Debian's vagrant-libvirt brings, so its settings are checked too
    # (VirtualBox's are checked only where VirtualBox is installed).
    return run([tool("vagrant"), "validate"], cwd=folder, VAGRANT_DEFAULT_PROVIDER="libvirt",
               VAGRANT_CHECKPOINT_DISABLE="1")


def test_vagrantfile_validates():
    result = vagrant_validate(REPO)
    assert result.returncode == 0, result.stdout + result.stderr


def test_vagrant_validate_catches_a_wrong_setting(tmp_path):
    """The check above can fail: a misspelt libvirt setting is reported."""
    text = (REPO / "Vagrantfile").read_text().replace("lv.cpus = CPUS", "lv.cpuz = CPUS")
    (tmp_path / "Vagrantfile").write_text(text)
    result = vagrant_validate(tmp_path)
    assert result.returncode != 0 and "cpuz" in result.stdout + result.stderr


def test_provision_playbook_syntax():
    result = run([os.path.join(BIN, "ansible-playbook"), "--syntax-check", "-i",
                  "inventory/local.yml", "playbooks/provision.yml"],
                 ANSIBLE_CONFIG=str(REPO / "ansible.cfg"))
    assert result.returncode == 0, result.stdout + result.stderr


def test_ansible_lint_production_profile():
    result = run([os.path.join(BIN, "ansible-lint"), "--profile", "production", "--nocolor",
                  "playbooks/"], ANSIBLE_CONFIG=str(REPO / "ansible.cfg"))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


def test_yamllint_every_yaml_file():
    result = run([os.path.join(BIN, "yamllint"), "--strict", "."])
    assert result.returncode == 0, result.stdout[-3000:]


def test_conda_env_files_are_what_the_stacks_render():
    """stacks/conda/ is generated (`invoke stack-envs`): a pin changed in a stack file and not
    re-rendered is caught here."""
    for path in sorted(stacks.STACKS.glob("*.yml")):
        stack = stacks.load(path.stem)
        for framework in stack.envs:
            committed = stacks.conda_env_path(stack.name, framework)
            assert committed.is_file(), "run `invoke stack-envs`: %s is missing" % committed
            assert committed.read_text() == stacks.conda_env_text(stack, framework), committed


def test_paper_env_files_pin_every_version_of_the_paper_stack():
    """Read back as conda reads them: Python 3.6.9 exactly, and each framework's pip list is
    the stack's pins, every one with ==, nothing more."""
    spec = yaml.safe_load((REPO / "stacks" / "paper.yml").read_text())
    for framework, wanted in spec["frameworks"].items():
        env = yaml.safe_load(stacks.conda_env_path("paper", framework).read_text())
        deps = env["dependencies"]
        assert "python=3.6.9" in deps and "pip" in deps
        pip = next(d["pip"] for d in deps if isinstance(d, dict))
        options = [line for line in pip if line.startswith("-")]
        pins = [line for line in pip if not line.startswith("-")]
        assert pins == wanted["packages"] and all("==" in p for p in pins), framework
        assert options == ([wanted["pip_args"]] if wanted.get("pip_args") else []), framework


def test_the_import_contracts_hold():
    """.importlinter: the stages are layers, analysis/ imports no harness/, bench/ nothing of
    the controller (docs/architecture.md)."""
    result = run([os.path.join(BIN, "lint-imports"), "--no-cache"])
    assert result.returncode == 0 and "0 broken" in result.stdout, result.stdout[-3000:]


def test_lint_imports_catches_a_reversed_layer(tmp_path):
    """The check above can fail: harness.run imports harness.plan, so plan over run breaks."""
    config = tmp_path / "reversed.ini"
    config.write_text("[importlinter]\nroot_packages =\n    harness\n\n"
                      "[importlinter:contract:reversed]\nname = reversed\ntype = layers\n"
                      "layers =\n    harness.plan\n    harness.run\n")
    result = run([os.path.join(BIN, "lint-imports"), "--no-cache", "--config", str(config)])
    assert result.returncode != 0 and "BROKEN" in result.stdout.upper(), result.stdout[-3000:]


def test_under_ci_a_skip_fails_unless_it_is_one_of_the_few_allowed():
    """.ci/run sets DLBENCH_CI=1: a layer that skips there (a tool missing, not root) must
    fail, not pass unseen; the machine's shape and the 20-minute opt-in may skip."""
    from tests.conftest import skip_fails_in_ci
    assert skip_fails_in_ci("Skipped: the emulated cluster needs root", "1")
    assert skip_fails_in_ci("Skipped: vagrant is not installed", "1")
    assert not skip_fails_in_ci("Skipped: 3 nodes share only on <3 CPUs", "1")
    assert not skip_fails_in_ci("Skipped: the emulated cluster needs root", None)
    run_script = (REPO / ".ci" / "run").read_text()
    assert 'if [ "$(id -u)" != 0 ]' in run_script.split("trap cleanup EXIT")[0]
