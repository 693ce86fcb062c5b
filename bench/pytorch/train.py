"""pytorch-sync: DistributedDataParallel over Gloo, one worker per node.

Run as `python -m bench.pytorch.train cell.json` with MASTER_ADDR, MASTER_PORT, RANK,
WORLD_SIZE and GLOO_SOCKET_IFNAME set by the launch script.
"""
import copy
import datetime
import os
import sys

import numpy
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel

from bench.common import loop, runner, samemath, sequence
from bench.pytorch import data, models, profiling


def optimiser(config, model):
    momentum = 0.0 if samemath.planted(config, "pytorch-momentum-off") else config["momentum"]
    return torch.optim.SGD(model.parameters(), lr=config["lr"], momentum=momentum)


def make_step(config, ddp):
    """One unmodified DDP step; PyTorch's CPU calls are synchronous, so laps cost nothing.
    The gradient all-reduce runs inside backward() (bucket hooks)."""
    criterion = nn.CrossEntropyLoss()
    opt = optimiser(config, ddp)

    def step(batch, timer):
        loss = criterion(ddp(batch[0]), batch[1])
        timer.lap("forward_wall")
        opt.zero_grad()
        loss.backward()
        timer.lap("backward_wall")
        opt.step()
        timer.lap("update_wall")
        return loss.item()
    return step


def prepare_calibration(config, sampler, module, batch):
    """A plain local copy of the model: no DDP hooks, so no all-reduce or buffer broadcast."""
    local = copy.deepcopy(module)
    opt = optimiser(config, local)
    criterion = nn.CrossEntropyLoss()
    x, y = batch

    def forward():
        criterion(local(x), y)  # recording the graph, as in training

    def forward_backward():
        opt.zero_grad()
        criterion(local(x), y).backward()

    return loop.prepared(config, sampler, forward, forward_backward, opt.step)


def ddp_options(model):
    """DDP's defaults unless a factor's level says otherwise (invoke explain,
    registry/factors.yml): DLBENCH_DDP_BROADCAST_BUFFERS 0 turns the buffer broadcast before
    every forward off; DLBENCH_DDP_BUCKET_MB 0 puts every gradient in one bucket."""
    options = {}
    if os.environ.get("DLBENCH_DDP_BROADCAST_BUFFERS", "1") == "0":
        options["broadcast_buffers"] = False
    bucket = os.environ.get("DLBENCH_DDP_BUCKET_MB", "")
    if bucket:
        size = float(bucket) or sum(p.numel() * p.element_size()
                                    for p in model.parameters()) / 2.0 ** 20 + 1
        options["bucket_cap_mb"] = size
    return options


def train(config, sampler):
    torch.set_num_threads(config["threads"])
    torch.set_num_interop_threads(config["interop_threads"])
    timeout = datetime.timedelta(seconds=config["collective_timeout"])
    with runner.waiting(config, sampler):
        dist.init_process_group("gloo", init_method="env://", timeout=timeout)
    torch.manual_seed(config["seed"])  # same initial weights everywhere (DDP broadcasts anyway)
    model = models.build(config["network"], config["classes"])
    if config["math"]:
        models.set_canonical(model, samemath.checked_initial_weights(config))
    runner.model_ready(config, models.parameter_count(model),
                       "world size %d" % dist.get_world_size(), lambda: models.canonical(model))
    ddp = DistributedDataParallel(model, **ddp_options(model))
    loader = data.loader(config)
    step = make_step(config, ddp)
    result, batch = loop.timed_steps(config, sampler, epoch_batches(config, loader), step)
    parts = sequence.Parts(
        canonical=lambda: models.canonical(model), barrier=dist.barrier,
        calibration=lambda batch: prepare_calibration(config, sampler, model, batch),
        parameters=models.parameter_count(model), worker_updates=True,
        profile=lambda: profiling.profile_steps(config, sampler, step,
                                                loop.endless(lambda: loader)))
    sequence.after_training(config, result, batch, parts)
    if old_teardown():
        dist.barrier()  # every worker is done; the process leaves with os._exit (main)
    else:
        dist.destroy_process_group()
    return result


def epoch_batches(config, loader):
    """epoch -> batches: the DataLoader's, or in the same-math check the recorded order."""
    if not config["math"]:
        return lambda epoch: iter(loader)
    return lambda epoch: ((torch.from_numpy(x), torch.from_numpy(y))
                          for x, y in samemath.ordered_batches(config, epoch))


def local_loop(config):
    """The same step on a plain local model (bench/overhead.py)."""
    torch.set_num_threads(config["threads"])
    torch.set_num_interop_threads(config["interop_threads"])
    torch.manual_seed(config["seed"])
    model = models.build(config["network"], config["classes"])
    loader = data.loader(config)
    return loop.endless(lambda: loader), make_step(config, model)


def old_teardown():
    """PyTorch before 1.8 (the paper stacks' 1.7): once training is over, tearing down the
    Gloo process group and the DDP reducer hung worker 0 and crashed the others (SIGSEGV)
    before or after result.json was written. Such a worker skips that teardown: a barrier,
    then it leaves without running the C++ destructors."""
    major, minor = (int(p) for p in torch.__version__.split(".")[:2])
    return (major, minor) < (1, 8)


def kernels():
    """oneDNN where PyTorch has it and it is on (its convolutions then run there), and the
    instruction set ATen's own CPU kernels dispatch to (PyTorch >= 2.0 says; 1.x does not)."""
    mkldnn = torch.backends.mkldnn
    on = mkldnn.is_available() and torch._C._get_mkldnn_enabled()
    out = {"library": "oneDNN" if on else "ATen", "isa": None,
           "read": "torch.backends.mkldnn.is_available() and torch._C._get_mkldnn_enabled()"}
    capability = getattr(getattr(torch.backends, "cpu", None), "get_cpu_capability", None)
    if capability:
        out["isa"] = capability()
        out["read"] += "; torch.backends.cpu.get_cpu_capability()"
    return out


def main(argv):
    config = runner.load_config(argv)
    runner.run(config, train, {"torch": torch.__version__, "numpy": numpy.__version__}, kernels)
    if old_teardown():
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)  # result.json is written; see old_teardown()


if __name__ == "__main__":
    main(sys.argv)
