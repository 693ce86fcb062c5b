"""pytorch-sync: DistributedDataParallel over Gloo, one worker per node.

Run as `python -m bench.pytorch.train cell.json` with MASTER_ADDR, MASTER_PORT, RANK,
WORLD_SIZE and GLOO_SOCKET_IFNAME set by the launch script.
"""
import copy
import datetime
import sys
import time

import numpy
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel

from bench.common import runner
from bench.common.breakdown import summarise
from bench.common.timer import StepTimer
from bench.pytorch import data, models


def set_threads(config):
    torch.set_num_threads(config["threads"])
    torch.set_num_interop_threads(config["interop_threads"])


def optimiser(config, model):
    return torch.optim.SGD(model.parameters(), lr=config["lr"], momentum=config["momentum"])


def timed_loop(config, ddp, loader, sampler):
    """The unmodified DDP loop, with a lap between phases; all-reduce runs inside backward()."""
    criterion = nn.CrossEntropyLoss()
    opt = optimiser(config, ddp)
    timer = StepTimer()
    total = config["epochs"] * config["steps_per_epoch"]
    batch = None
    for epoch in range(config["epochs"]):
        batches = iter(loader)
        for _ in range(config["steps_per_epoch"]):
            index = len(timer.steps)
            sampler.progress(phase="train", step=index)
            timer.start_step()
            batch = next(batches)
            timer.lap("loading")
            loss = criterion(ddp(batch[0]), batch[1])
            timer.lap("forward_wall")
            opt.zero_grad()
            loss.backward()
            timer.lap("backward_wall")
            opt.step()
            timer.lap("update_wall")
            step = timer.end_step(epoch=epoch, warmup=index < config["warmup_steps"])
            step["loss"] = loss.item()
            if index % max(1, total // 10) == 0 or index == total - 1:
                runner.log(config, "step %d/%d %.3fs" % (index + 1, total, step["total"]))
    sampler.progress(step=total)
    return timer.steps, batch


def calibrate(config, module, batch, sampler):
    """Forward and backward compute with communication off: a plain local copy of the model,
    same batch, same threads, no DDP hooks (no all-reduce, no buffer broadcast)."""
    sampler.progress(phase="calibrate")
    local = copy.deepcopy(module)
    opt = optimiser(config, local)
    criterion = nn.CrossEntropyLoss()
    times = {"forward": [], "backward": []}
    for i in range(config["calibration_warmup"] + config["calibration_steps"]):
        t0 = time.perf_counter()
        loss = criterion(local(batch[0]), batch[1])
        t1 = time.perf_counter()
        opt.zero_grad()
        loss.backward()
        opt.step()
        t2 = time.perf_counter()
        if i >= config["calibration_warmup"]:
            times["forward"].append(t1 - t0)
            times["backward"].append(t2 - t1)
    return times


def train(config, sampler):
    set_threads(config)
    timeout = datetime.timedelta(seconds=config["collective_timeout"])
    dist.init_process_group("gloo", init_method="env://", timeout=timeout)
    torch.manual_seed(config["seed"])  # same initial weights everywhere (DDP broadcasts anyway)
    model = models.build(config["network"], config["classes"])
    ddp = DistributedDataParallel(model)
    loader = data.loader(config)
    runner.log(config, "%s: %d parameters, world size %d"
               % (config["network"], models.parameter_count(model), dist.get_world_size()))
    net_before, started = sampler.net_counters(), time.time()
    steps, batch = timed_loop(config, ddp, loader, sampler)
    train_seconds = time.time() - started
    net_after = sampler.net_counters()
    dist.barrier()  # calibrate only when every worker has finished the timed run
    calibration = calibrate(config, model, batch, sampler)
    dist.barrier()
    dist.destroy_process_group()
    return {"steps": steps, "calibration": calibration, "train_seconds": train_seconds,
            "summary": summarise(steps, calibration),
            "parameters": models.parameter_count(model),
            "net_bytes_sent": net_after[0] - net_before[0],
            "net_bytes_recv": net_after[1] - net_before[1]}


def main(argv):
    config = runner.load_config(argv)
    versions = {"torch": torch.__version__, "numpy": numpy.__version__}
    runner.run(config, train, versions)


if __name__ == "__main__":
    main(sys.argv)
