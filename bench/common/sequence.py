"""What every synchronous trainer does once its timed steps are done, written once: the
same-math check's final weights, the calibration passes (in turn, or together where the
nodes own their cores), the breakdown's summary, and the profiled steps where asked. A
framework plugs in its parts (Parts); its trainer builds them and calls after_training.
tensorflow-async's chief builds its result from the closures instead
(bench/tensorflow/chief.py). Python 3.6."""
from . import loop, profile, runner, samemath
from .breakdown import summarise


class Parts(object):
    """A framework's parts for after_training.

    canonical() -> the trained weights in the canonical layout (the same-math check);
    barrier() returns once every worker has called it; calibration(batch) -> measure()
    (loop.prepared) on a local copy of the model; parameters: the trainable count;
    worker_updates: whether the worker applies the update itself (the breakdown's phases);
    profile() -> the profiled steps' result."""

    def __init__(self, canonical, barrier, calibration, parameters, worker_updates, profile):
        self.canonical, self.barrier, self.calibration = canonical, barrier, calibration
        self.parameters, self.worker_updates, self.profile = parameters, worker_updates, profile


def after_training(config, result, batch, parts):
    """result: loop.timed_steps'; batch: its last batch, which the calibration passes run."""
    if config["math"]:
        samemath.write_weights(config, parts.canonical(), samemath.FINAL)
        result["math"] = samemath.record(config)
    calibration = loop.in_turn(config, parts.barrier, lambda: parts.calibration(batch))
    result.update(calibration=calibration, parameters=parts.parameters,
                  summary=summarise(result["steps"], calibration,
                                    worker_updates=parts.worker_updates))
    if profile.wanted(config):
        runner.keep(config, result)
        result["profile"] = parts.profile()
    return result
