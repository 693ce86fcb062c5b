"""The profiled steps of a cell: run after the timed steps and the calibration, so the profiler
never runs during a timed step. Each framework's trainer turns its profiler's output into
operator records; this module aggregates and writes them as profile.json.

An operator record is (path, seconds, calls): `path` is the operator's name with the names of
the ranges it ran under, outermost first (PyTorch's event tree, TensorFlow's name scopes), so
that analysis/operators.yml can give an uncategorised operator the category of the range it
ran in. Seconds are self time (time in the operator less its children), summed over the
profiled steps.
"""
import os
import time

from contract import nodefolder

from .results import write_json


class Profile(object):
    def __init__(self, framework, source):
        self.framework = framework
        self.source = source
        self.ops = {}

    def add(self, path, seconds, calls=1):
        key = tuple(str(p) for p in path if p)
        entry = self.ops.setdefault(key, [0.0, 0])
        entry[0] += seconds
        entry[1] += calls

    def write(self, config, steps, seconds, extra=None):
        """profile.json in the process's out_dir; returns a summary for result.json."""
        ops = [{"path": list(path), "seconds": round(total, 9), "calls": calls}
               for path, (total, calls) in sorted(self.ops.items(), key=lambda kv: -kv[1][0])]
        data = {"framework": self.framework, "source": self.source, "steps": steps,
                "profiled_step": seconds / steps if steps else None,
                "operator_seconds": sum(op["seconds"] for op in ops), "ops": ops}
        data.update(extra or {})
        write_json(os.path.join(config["out_dir"], nodefolder.OPERATORS), data)
        return {"steps": steps, "profiled_step": data["profiled_step"],
                "operators": len(ops), "source": self.source}


def wanted(config):
    return int(config.get("profile_steps", 0)) > 0


def run_steps(sampler, steps, step):
    """Run `steps` calls of step() with progress shown as the 'profile' phase; seconds taken."""
    sampler.progress(phase="profile")
    began = time.perf_counter()
    for _ in range(steps):
        step()
    return time.perf_counter() - began
