"""Bare vs instrumented: the same local training loop run without and with this package's
instrumentation (phase timers, progress file, psutil sampler thread), alternately, on one node.

`python -m bench.overhead cell.json STEPS ROUNDS` with the framework's environment;
prints one JSON line: the median wall time per step of each kind and their ratio.
The loop is local (no distribution): what differs between the two kinds is only what the
package adds to every timed run.
"""
import json
import sys
import tempfile
import time

from contract import cellconfig
from . import frameworks
from .common import loop
from .common.sampler import Sampler
from .common.timer import median


class NoTimer(object):
    def lap(self, phase):
        pass


def bare(batches, step, steps, warmup):
    timer = NoTimer()
    for _ in range(warmup):
        step(next(batches), timer)
    started = time.perf_counter()
    for _ in range(steps):
        step(next(batches), timer)
    return (time.perf_counter() - started) / steps


def instrumented(config, batches, step, steps, warmup, out_dir):
    config = dict(config, epochs=1, steps_per_epoch=steps + warmup, warmup_steps=warmup,
                  rank=0, node=config.get("node", "?"))
    sampler = Sampler(out_dir, config["sample_interval"], config.get("interface"),
                      steps + warmup).start()
    try:
        result, _ = loop.timed_steps(config, sampler, lambda epoch: batches, step)
    finally:
        sampler.stop("succeeded")
    return result["wall_step"]


def main(argv):
    config = cellconfig.read(argv[1])
    steps, rounds = int(argv[2]), int(argv[3])
    trainer = frameworks.trainer(config["framework"])
    batches, step = trainer.local_loop(config)
    warmup = config["warmup_steps"]
    times = {"bare": [], "instrumented": []}
    with tempfile.TemporaryDirectory() as out_dir:
        for _ in range(rounds):
            times["bare"].append(bare(batches, step, steps, warmup))
            times["instrumented"].append(
                instrumented(config, batches, step, steps, warmup, out_dir))
    summary = {kind: median(values) for kind, values in times.items()}
    summary.update(ratio=summary["instrumented"] / summary["bare"], steps=steps, rounds=rounds,
                   runs=times, framework=config["framework"], network=config["network"])
    print(json.dumps(summary))


if __name__ == "__main__":
    main(sys.argv)
