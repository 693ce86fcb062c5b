"""Pinned version sets (stacks/*.yml) and where each framework's env lives on a node."""
import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

import registry

from contract.errors import UserError
from ..paths import STACKS

CONDA_ENVS = STACKS / "conda"

FRAMEWORKS = tuple(registry.frameworks())
VARIABLE = re.compile(r"^[A-Z_][A-Z0-9_]*$")


@dataclass
class FrameworkEnv:
    framework: str
    module: str
    packages: list
    pip_args: str
    dirname: str  # under the node's env_root; changes whenever the pins change
    environment: dict = None  # variables the launch scripts export for this framework
    references: list = None  # packages only invoke reference-check imports (not in the env)

    def python(self, env_root):
        return "%s/%s/bin/python" % (env_root.rstrip("/"), self.dirname)


@dataclass
class Stack:
    name: str
    python: str
    envs: dict  # framework -> FrameworkEnv
    python_source: str = "the OS packages or pyenv"  # or `conda`, or `debian`
    python_version: str = ""  # exact, for conda ("3.6.9"); empty: any python<python>
    debian: dict = None  # python_source debian: {suite, version} of the Debian packages

    def env(self, framework):
        if framework not in self.envs:
            raise UserError("stack %s has no environment for %s" % (self.name, framework),
                            "add `%s:` under frameworks in stacks/%s.yml" % (framework, self.name))
        return self.envs[framework]


class RunStacks:
    """The stacks a run's cells run under, in order: a cell names its own (Cell.stack); a cell
    from a run before cells named one runs under the run's only stack."""

    def __init__(self, stacks):
        self.stacks = list(stacks)
        self.by_name = {s.name: s for s in self.stacks}

    @classmethod
    def load(cls, names):
        return cls(load(name) for name in names)

    @property
    def names(self):
        return [s.name for s in self.stacks]

    def of(self, cell):
        if not cell.stack:
            return self.stacks[0]
        if cell.stack not in self.by_name:
            raise UserError("cell %s runs under stack %s, which this run does not have (%s)"
                            % (cell.id, cell.stack, ", ".join(self.names)),
                            "resume the run with the version that started it")
        return self.by_name[cell.stack]

    def __iter__(self):
        return iter(self.stacks)

    def __len__(self):
        return len(self.stacks)


RELEASE = re.compile(r"^(?P<base>[A-Za-z0-9_.-]+)\+(?P<framework>[a-z]+)"
                     r"-(?P<release>[0-9][A-Za-z0-9.]*)$")


def load(name_or_path):
    found = RELEASE.match(str(name_or_path))
    if found:
        return release(**found.groupdict())
    return _from_file(*_read(name_or_path))


def _from_file(path, data, replaced=None):
    """The stack a file describes; replaced: {framework: spec} put in place of its own."""
    name = data.get("name") or path.stem
    exact = _exact(path, data)
    specs = dict(data.get("frameworks") or {}, **(replaced or {}))
    envs = {framework: _env(path, name, data.get("python"), framework, spec or {}, exact)
            for framework, spec in specs.items()}
    return Stack(name=name, python=str(data.get("python")), envs=envs,
                 python_source=str(data.get("python_source") or "the OS packages or pyenv"),
                 python_version=str(data.get("python_version") or ""),
                 debian=_debian(path, data))


def release(base, framework, release):
    """The stack of one release in registry/releases.yml: the base stack with that
    framework's env made of the release's packages. Its env keeps the base's name, so that a
    release whose pins are the base's is the base's env, and the other frameworks' envs are
    the base's own."""
    listed = registry.releases()
    entries = {str(e["release"]): e for e in (listed["frameworks"] or {}).get(framework) or []}
    if base != listed["base"] or release not in entries:
        raise UserError("no release stack %s+%s-%s" % (base, framework, release),
                        "release stacks are %s (registry/releases.yml)" % ", ".join(
                            registry.release_stack(f, str(e["release"]))
                            for f, es in (listed["frameworks"] or {}).items() for e in es))
    path, data = _read(base)
    spec = dict((data.get("frameworks") or {}).get(framework) or {"import": framework},
                packages=entries[release]["packages"],
                environment=entries[release].get("environment") or {})
    spec.pop("pip_args", None)
    stack = _from_file(path, data, {framework: spec})
    stack.name = "%s+%s-%s" % (base, framework, release)
    return stack


def box_envs(spec=None):
    """spec (default: DLBENCH_VM_BOX_ENVS), "<stack>:<framework>[,<framework>...]" (e.g.
    paper-py39:mxnet; no framework: all of the stack's): the envs built into the VM box
    (harness/clusters/vmbox.py) as plain values, so that provisioning finds them complete.
    Unset or "" -> []."""
    spec = os.environ.get("DLBENCH_VM_BOX_ENVS", "") if spec is None else spec
    if not spec:
        return []
    name, _, listed = spec.partition(":")
    stack = load(name)
    envs = [stack.env(f) for f in listed.split(",") if f] or list(stack.envs.values())
    return [{"dirname": e.dirname, "packages": list(e.packages), "pip_args": e.pip_args or "",
             "seed": list((stack.debian or {}).get("seed") or []), "python": stack.python,
             "stack": stack.name, "framework": e.framework} for e in envs]


def _read(name_or_path):
    path = Path(name_or_path)
    if path.suffix not in (".yml", ".yaml"):
        path = STACKS / ("%s.yml" % name_or_path)
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in STACKS.glob("*.yml")))
        raise UserError("stack %r not found (%s)" % (str(name_or_path), path),
                        "use one of: %s, or a release stack of registry/releases.yml "
                        "(<base>+<framework>-<release>)" % known)
    return path, yaml.safe_load(path.read_text()) or {}


def _exact(path, data):
    """The exact interpreter, part of every env's name: a Debian-packaged interpreter is
    another interpreter, and its envs get their own names."""
    debian = _debian(path, data)
    return str(data.get("python_version") or "") or (
        "debian %s %s unpacked %s %s" % (debian["suite"], debian["version"],
                                         " ".join(debian["libraries"]),
                                         " ".join(debian["seed"]))
        if debian else "")


def _debian(path, data):
    """`debian: {suite, version, libraries, keyring, seed}` of a stack whose Python comes from
    an older Debian release's packages, unpacked on each node (framework_envs'
    unpack_debian_python.sh); `packages`: every package to unpack, NAME=VERSION."""
    if data.get("python_source") != "debian":
        return None
    found = data.get("debian") or {}
    if not isinstance(found, dict) or not found.get("suite") or not found.get("version"):
        raise UserError("stack %s: python_source debian needs `debian: {suite, version}`" % path,
                        "e.g. `debian: {suite: bullseye, version: 3.9.2-1}`: the Debian release "
                        "whose python%s package to unpack, and its version (`libraries:` may "
                        "list NAME=VERSION of the libraries it needs beside it, `keyring:` the "
                        "release's key in playbooks/roles/framework_envs/files/, `seed:` pip "
                        "and setuptools pins for its envs)" % data.get("python"))
    python, version = "python%s" % data.get("python"), str(found["version"])
    libraries = [str(p) for p in found.get("libraries") or []]
    interpreter = [python, python + "-minimal", "lib%s-minimal" % python, "lib%s-stdlib" % python,
                   "python3-distutils", "python3-lib2to3"]
    return {"suite": str(found["suite"]), "version": version, "libraries": libraries,
            "keyring": str(found.get("keyring") or "debian-archive-%s-stable.gpg"
                           % found["suite"]),
            "packages": ["%s=%s" % (name, version) for name in interpreter] + libraries,
            "seed": [str(p) for p in found.get("seed") or []]}


def conda_env(stack, framework):
    """A conda environment file for one framework of a stack: the stack's exact Python from
    conda-forge, the framework's pins through pip, exactly as in the stack file (conda hands
    the pip list to pip as a requirements file, so an option line such as `-f URL` works)."""
    env = stack.env(framework)
    python = stack.python_version or stack.python
    pip = ([env.pip_args] if env.pip_args else []) + list(env.packages)
    return {"name": "dlbench-%s-%s" % (stack.name, framework),
            "channels": ["conda-forge", "nodefaults"],
            "dependencies": ["python=%s" % python, "pip", {"pip": pip}]}


def conda_env_text(stack, framework):
    header = ("# Generated from stacks/%s.yml by `invoke stack-envs`; do not edit by hand.\n"
              "# conda env create -f <this file>   (docs/reproducing.md)\n" % stack.name)
    return header + yaml.safe_dump(conda_env(stack, framework), sort_keys=False)


def _env(path, stack_name, python, framework, spec, python_version=""):
    if framework not in FRAMEWORKS:
        raise UserError("stack %s names an unknown framework %r" % (path, framework),
                        "frameworks are: %s" % ", ".join(FRAMEWORKS))
    packages = [str(p) for p in spec.get("packages") or []]
    if not packages or not spec.get("import"):
        raise UserError("stack %s: framework %s needs `import:` and `packages:`" % (path, framework))
    pinned = [python, packages, spec.get("pip_args", "")]
    pinned += [python_version] if python_version else []  # keeps the current envs' names
    digest = hashlib.sha1(json.dumps(pinned).encode())
    return FrameworkEnv(framework=framework, module=spec["import"], packages=packages,
                        pip_args=str(spec.get("pip_args") or ""),
                        dirname="%s-%s-%s" % (stack_name, framework, digest.hexdigest()[:8]),
                        environment=_environment(path, framework, spec),
                        references=[str(p) for p in spec.get("references") or []])


def _environment(path, framework, spec):
    """`environment:` of a framework: variables its launch scripts export (they win over the
    template's defaults), e.g. TF_ENABLE_ONEDNN_OPTS for a TensorFlow whose oneDNN differs."""
    found = spec.get("environment") or {}
    if not isinstance(found, dict) or not all(VARIABLE.match(str(k)) for k in found):
        raise UserError("stack %s: framework %s: `environment:` must map variable names "
                        "(A-Z, 0-9, _) to values" % (path, framework),
                        "e.g. `environment: {TF_ENABLE_ONEDNN_OPTS: \"0\"}`")
    return {str(k): str(v) for k, v in found.items()}


def conda_env_path(stack_name, framework):
    return CONDA_ENVS / ("%s-%s.yml" % (stack_name, framework))


def write_conda_envs(stack_name=None):
    """The environment files of one stack, or of every stack; returns the paths written."""
    names = [stack_name] if stack_name else sorted(p.stem for p in STACKS.glob("*.yml"))
    CONDA_ENVS.mkdir(exist_ok=True)
    written = []
    for name in names:
        stack = load(name)
        for framework in sorted(stack.envs):
            path = conda_env_path(stack.name, framework)
            path.write_text(conda_env_text(stack, framework))
            written.append(path)
    return written
