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
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        seconds = run_steps(sampler, steps, one)
    profile = Profile("pytorch", "torch.profiler %s" % torch.__version__)
    for event in prof.events():
        profile.add(path_of(event), event.self_cpu_time_total / 1e6)  # microseconds
    return profile.write(config, steps, seconds)
