"""The profiled DDP steps of a pytorch-sync cell (bench/common/profile.py): torch.profiler on
the CPU, every event's self time with the names of the ranges above it in the event tree."""
import torch

from bench.common.profile import Profile, run_steps
from bench.common.timer import StepTimer


def path_of(event):
    names = [event.name]
    parent = event.cpu_parent
    while parent is not None:
        names.append(parent.name)
        parent = parent.cpu_parent
    return reversed(names)


def cpu_profiler():
    """torch.profiler from PyTorch 1.8.1; the paper stack's 1.7 has its predecessor, whose
    events carry the same self times and parents."""
    if hasattr(torch, "profiler") and hasattr(torch.profiler, "ProfilerActivity"):
        return torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
    return torch.autograd.profiler.profile()


def profile_steps(config, sampler, train_step, batches):
    """config["profile_steps"] more training steps, the same as the timed ones, profiled."""
    timer = StepTimer()

    def one():
        timer.start_step()
        batch = next(batches)  # under the profiler too: the loader's ranges are `data`
        timer.lap("loading")
        train_step(batch, timer)
        timer.end_step()

    steps = int(config["profile_steps"])
    with cpu_profiler() as prof:
        seconds = run_steps(sampler, steps, one)
    profile = Profile("pytorch", "torch.profiler %s" % torch.__version__)
    events = prof.events() if hasattr(prof, "events") else prof.function_events
    for event in events:
        profile.add(path_of(event), event.self_cpu_time_total / 1e6)  # microseconds
    return profile.write(config, steps, seconds)
