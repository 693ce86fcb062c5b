"""Pinned version sets (stacks/*.yml) and where each framework's env lives on a node."""
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import yaml

from .errors import UserError
from .paths import STACKS

FRAMEWORKS = ("pytorch", "tensorflow", "mxnet")


@dataclass
class FrameworkEnv:
    framework: str
    module: str
    packages: list
    pip_args: str
    dirname: str  # under the node's env_root; changes whenever the pins change

    def python(self, env_root):
        return "%s/%s/bin/python" % (env_root.rstrip("/"), self.dirname)


@dataclass
class Stack:
    name: str
    python: str
    envs: dict  # framework -> FrameworkEnv
    python_source: str = "the OS packages or pyenv"

    def env(self, framework):
        if framework not in self.envs:
            raise UserError("stack %s has no environment for %s" % (self.name, framework),
                            "add `%s:` under frameworks in stacks/%s.yml" % (framework, self.name))
        return self.envs[framework]


def load(name_or_path):
    path = Path(name_or_path)
    if path.suffix not in (".yml", ".yaml"):
        path = STACKS / ("%s.yml" % name_or_path)
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in STACKS.glob("*.yml")))
        raise UserError("stack %r not found (%s)" % (str(name_or_path), path),
                        "use one of: %s" % known)
    data = yaml.safe_load(path.read_text()) or {}
    name = data.get("name") or path.stem
    envs = {}
    for framework, spec in (data.get("frameworks") or {}).items():
        envs[framework] = _env(path, name, data.get("python"), framework, spec or {})
    return Stack(name=name, python=str(data.get("python")), envs=envs,
                 python_source=str(data.get("python_source") or "the OS packages or pyenv"))


def _env(path, stack_name, python, framework, spec):
    if framework not in FRAMEWORKS:
        raise UserError("stack %s names an unknown framework %r" % (path, framework),
                        "frameworks are: %s" % ", ".join(FRAMEWORKS))
    packages = [str(p) for p in spec.get("packages") or []]
    if not packages or not spec.get("import"):
        raise UserError("stack %s: framework %s needs `import:` and `packages:`" % (path, framework))
    digest = hashlib.sha1(json.dumps([python, packages, spec.get("pip_args", "")]).encode())
    return FrameworkEnv(framework=framework, module=spec["import"], packages=packages,
                        pip_args=str(spec.get("pip_args") or ""),
                        dirname="%s-%s-%s" % (stack_name, framework, digest.hexdigest()[:8]))
