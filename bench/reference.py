"""The package's networks against the same networks as their frameworks' own libraries write
them (`invoke reference-check`, selfcheck/reference_check.py): one process, the node's threads, one
fixed batch of local_batch images, a full SGD-momentum step (forward, backward, update) of each
model in turn, in interleaved rounds so that a drifting machine slows both alike.

`python -m bench.reference cell.json ROUNDS STEPS` in the framework's environment;
prints one JSON line: per model its step time per round (s), and the reference's name, or why
there is none. Each framework's bench/<framework>/reference.py supplies the two steps.
"""
import json
import os
import sys
import time

from . import frameworks
from contract import cellconfig
from .common.timer import median


def timed(step, steps):
    started = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - started) / steps


def main(argv):
    config = cellconfig.read(argv[1])
    rounds, steps = int(argv[2]), int(argv[3])
    module = frameworks.reference(config["framework"])
    found = module.steps(config)  # {package, reference, name, missing}
    out = {"framework": config["framework"], "network": config["network"],
           "reference": found["name"], "missing": found.get("missing"), "rounds": {}}
    models = [k for k in ("package", "reference") if found.get(k)]
    for kind in models:
        for _ in range(2):  # warm-up: graphs built, caches filled
            found[kind]()
    times = {kind: [] for kind in models}
    for _ in range(rounds):
        for kind in models:
            times[kind].append(timed(found[kind], steps))
    out["rounds"] = times
    out["median"] = {kind: median(values) for kind, values in times.items()}
    if len(models) == 2:
        ratios = [a / b for a, b in zip(times["package"], times["reference"])]
        out["ratio"] = {"median": median(ratios), "low": min(ratios), "high": max(ratios)}
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv)
    # The line is out: leave without the interpreter's teardown, where torch 1.7.1 with
    # torchvision 0.8.2 loaded died of SIGSEGV after printing (exit 139, every time here)
    sys.stdout.flush()
    os._exit(0)
