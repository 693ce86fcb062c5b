"""`invoke provision --wheelhouse DIR`: nodes without a package index install from wheels the
controller downloaded once. One folder per environment (its name carries the pins' hash), so a
folder filled for one stack is reused as it is, and a framework left out is not pushed."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from contract.errors import UserError

# The manylinux tags a Linux x86_64 node with glibc 2.17 or newer may install (pip takes the
# platforms listed, not the older ones they imply). A node with an older glibc refuses the
# newer wheels at install time, and pip names them.
PLATFORMS = (["manylinux_2_%d_x86_64" % minor for minor in range(39, 16, -1)]
             + ["manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64",
                "linux_x86_64"])
# uv, which builds the envs on the nodes (playbooks/roles/framework_envs); the Makefile installs
# the same release for the controller.
INSTALLER = "uv==0.13.9"
# What the node needs to build an sdist offline (build isolation fetches these from the same
# folder), the installer itself, and the pip each env is seeded with.
BUILD_TOOLS = ["setuptools", "wheel", INSTALLER, "pip"]
FILLED = ".dlbench-filled"  # written last: its package list says the folder is complete


def fill(stack, frameworks, folder, conda_hosts=(), progress=print):
    """Download every wheel each environment of the stack needs into folder/<env name>/;
    returns {env name: its folder}. A folder already filled with the same pins is kept.
    conda_hosts: hosts whose inventory says `python_source: conda` (refused, as conda is)."""
    refuse_conda(stack, conda_hosts)
    folder = Path(os.path.expanduser(str(folder))).resolve()
    filled = {}
    for env in stack.envs.values():
        if frameworks and env.framework not in frameworks:
            continue
        wanted = seeds(stack) + list(env.packages)
        target = folder / env.dirname
        if _already(target, wanted):
            progress("wheelhouse: %s already holds %s's wheels" % (target, env.framework))
        else:
            progress("wheelhouse: downloading %s's wheels into %s" % (env.framework, target))
            download(stack, env, wanted, target)
        filled[env.dirname] = str(target)
    return filled


def seeds(stack):
    """Packages installed before the env's own: a Debian-packaged Python's seed."""
    return list((stack.debian or {}).get("seed") or [])


def refuse_conda(stack, conda_hosts=()):
    """conda needs its channels (and Miniforge's installer): a wheelhouse cannot stand in."""
    if stack.python_source != "conda" and not conda_hosts:
        return
    who = ("stack %s takes Python %s from conda" % (stack.name, stack.python_version)
           if stack.python_source == "conda" else
           "the inventory takes Python from conda on %s (`python_source: conda`)"
           % ", ".join(conda_hosts))
    raise UserError("%s, which needs conda's channels: a wheelhouse holds pip packages only"
                    % who,
                    "on nodes without an index, use a stack whose Python the nodes have "
                    "(current; paper-py39 with `python_source: path`) and no `python_source: "
                    "conda` in the inventory, or install the conda environments from "
                    "stacks/conda/ with conda-pack yourself")


def _already(target, wanted):
    marker = target / FILLED
    return marker.is_file() and json.loads(marker.read_text()) == wanted


def download(stack, env, wanted, target):
    """pip download of the env's pins and their dependencies, for the nodes' Python: with the
    controller's python<version> where it has one (exactly what the node's pip resolves,
    sdists included), else for the stack's Python and Linux x86_64 from wheels only."""
    target.mkdir(parents=True, exist_ok=True)
    command = downloader(stack.python) + ["--dest", str(target), "--find-links", str(target)]
    command += env.pip_args.split() + wanted
    tools = downloader(stack.python) + ["--dest", str(target)] + BUILD_TOOLS
    for step in (command, tools):
        done = subprocess.run(step, capture_output=True, text=True)
        if done.returncode != 0:
            raise UserError("pip download for %s (Python %s) failed: %s" % (
                env.framework, stack.python, _last_lines(done)),
                "a package with no wheel for Python %s on Linux x86_64: build it on a machine "
                "like the nodes (`pip wheel PACKAGE==VERSION`) and put the wheel into %s, or "
                "provision from a controller that has python%s" % (
                    stack.python, target, stack.python))
    (target / FILLED).write_text(json.dumps(wanted))


def downloader(python):
    """`pip download` for nodes running python<python>."""
    exact = shutil.which("python%s" % python) if same_platform() else None
    if exact and _has_pip(exact):
        return [exact, "-m", "pip", "download", "--quiet"]
    return [sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:",
            "--implementation", "cp", "--python-version", python, "--abi", abi(python)] + \
        [arg for platform in PLATFORMS for arg in ("--platform", platform)]


def same_platform():
    """Whether the controller's own interpreter downloads what the nodes (Linux x86_64) run."""
    return sys.platform.startswith("linux") and os.uname().machine == "x86_64"


def abi(python):
    """CPython's ABI tag of a version: cp36m before 3.8 (pymalloc), cp311 after."""
    major, minor = (int(part) for part in python.split(".")[:2])
    return "cp%d%d%s" % (major, minor, "m" if (major, minor) < (3, 8) else "")


def _has_pip(python):
    return subprocess.run([python, "-m", "pip", "--version"], capture_output=True).returncode == 0


def _last_lines(done, count=4):
    lines = (done.stderr or done.stdout).strip().splitlines()
    return " / ".join(lines[-count:]) or "exit %d" % done.returncode
