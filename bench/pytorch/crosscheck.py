"""Cross-check of the breakdown on one cell: forward and backward from the calibration (what
every result uses) against the same steps' operator times from torch.profiler (the paper took
its breakdown from profilers, IV-C, naming TensorBoard for TensorFlow and none for PyTorch). `python -m bench.pytorch.crosscheck cell.json STEPS`; prints one JSON line.

Operator time of a phase = the self CPU time of every operator under that phase's
record_function range, summed, per step; the optimizer step counts as backward, as in the
breakdown (docs/methodology.md)."""
import json
import sys

import torch
import torch.nn as nn
from torch.autograd import profiler as autograd_profiler

from bench.common import timer
from contract import cellconfig
from bench.common.sampler import Sampler
from bench.pytorch import data, models
from bench.pytorch.train import prepare_calibration, optimiser

PHASES = ("phase_forward", "phase_backward", "phase_update")


def phase_of(event):
    """The phase range an operator ran under, walking up the profiler's event tree."""
    parent = event.cpu_parent
    while parent is not None and parent.name not in PHASES:
        parent = parent.cpu_parent
    return parent.name if parent is not None else None


def profiled_steps(model, batch, steps, config):
    opt = optimiser(config, model)
    criterion = nn.CrossEntropyLoss()
    x, y = batch
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            with autograd_profiler.record_function("phase_forward"):
                loss = criterion(model(x), y)
            with autograd_profiler.record_function("phase_backward"):
                opt.zero_grad()
                loss.backward()
            with autograd_profiler.record_function("phase_update"):
                opt.step()
    totals = dict.fromkeys(PHASES, 0.0)
    for event in prof.events():
        phase = phase_of(event) if event.name not in PHASES else None
        if phase is not None:
            totals[phase] += event.self_cpu_time_total / 1e6  # microseconds
    return {name[len("phase_"):]: total / steps for name, total in totals.items()}


def main(argv):
    config = cellconfig.read(argv[1])
    steps = int(argv[2])
    torch.set_num_threads(config["threads"])
    torch.set_num_interop_threads(config["interop_threads"])
    torch.manual_seed(config["seed"])
    model = models.build(config["network"], config["classes"])
    batch = next(iter(data.loader(config)))
    sampler = Sampler(config["out_dir"], config["sample_interval"], None, 0).start()
    calibration = prepare_calibration(dict(config, calibration_steps=steps), sampler, model,
                                      batch)()
    sampler.stop("succeeded")
    profiled = profiled_steps(model, batch, steps, config)
    print(json.dumps({
        "framework": "pytorch", "network": config["network"], "steps": steps,
        "calibration": {"forward": timer.median(calibration["forward"]),
                        "backward": timer.median(calibration["backward"]) +
                        timer.median(calibration["update"])},
        "profiler": {"forward": profiled["forward"],
                     "backward": profiled["backward"] + profiled["update"]}}))


if __name__ == "__main__":
    main(sys.argv)
