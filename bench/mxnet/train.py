"""mxnet-sync / mxnet-async: Gluon with a distributed KVStore (`dist_sync` / `dist_async`).

A worker: `python -m bench.mxnet.train cell.json` with DMLC_ROLE=worker and the DMLC_*
variables set by the launch script. Servers and the scheduler run bench/mxnet/server.py.
The optimizer runs on the servers (update_on_kvstore), as in MXNet's parameter-server design.
"""
import os
import sys
import tempfile

import mxnet as mx
import numpy
from mxnet import autograd, gluon

from bench.common import loop, runner, samemath, sequence
from bench.mxnet import data, models, profiling


def build(config, batch_shape):
    mx.random.seed(config["seed"])
    net = models.build(config["network"], config["classes"])
    net.initialize(mx.init.Xavier(), ctx=mx.cpu())
    net.hybridize(static_alloc=True, static_shape=True)
    net(mx.nd.zeros(batch_shape))  # infer shapes now, not inside the first timed step
    return net


def trained(net):
    """The parameters with gradients. BatchNorm's running statistics (grad_req "null") stay off
    the KVStore: they start equal on every worker and each worker keeps its own. With them on it,
    MXNet 1.9.1's servers abort at the first step with "init <key> first", the key being the
    last running_var (seen here for ResNet-18 and ResNet-50, both datasets)."""
    return [p for p in net.collect_params().values() if p.grad_req != "null"]


def batches(loader):
    """Loader worker processes hand batches over in shared memory (cpu_shared); the copy to
    the compute context is part of loading."""
    ctx = mx.cpu()
    for x, y in loader:
        yield x.as_in_context(ctx), y.as_in_context(ctx)


def epoch_batches(config, loader):
    """epoch -> batches: the DataLoader's, or in the same-math check the recorded order."""
    if not config["math"]:
        return lambda epoch: batches(loader)
    return lambda epoch: ((mx.nd.array(x), mx.nd.array(y))
                          for x, y in samemath.ordered_batches(config, epoch))


def sgd(config):
    """The optimizer's settings; on a distributed KVStore they travel to the servers, which
    run it."""
    lr = config["lr"] * (3 if samemath.planted(config, "mxnet-server-lr-x3") else 1)
    return {"learning_rate": lr, "momentum": config["momentum"]}


def make_step(config, net, trainer):
    """One step. MXNet's engine is asynchronous: the step ends at waitall(), so the time
    includes the push/pull to the servers that trainer.step() queued."""
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    # dist_sync servers sum the workers' gradients: scale by the global batch, as DDP averages
    scale = config["local_batch"] * (config["world_size"] if config["mode"] == "sync" else 1)

    def step(batch, timer):
        x, y = batch
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(scale)
        mx.nd.waitall()
        # the same-math check compares losses; elsewhere reading it would add a copy
        return loss.mean().asscalar() if config["math"] else None
    return step


def prepare_calibration(config, sampler, net, batch):
    """A local copy of the network with a local trainer: no KVStore, no servers."""
    local = build(config, batch[0].shape)
    with tempfile.NamedTemporaryFile(suffix=".params") as handle:
        net.save_parameters(handle.name)
        local.load_parameters(handle.name, ctx=mx.cpu())
    trainer = gluon.Trainer(local.collect_params(), "sgd", sgd(config), kvstore=None)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    x, y = batch

    def forward():
        with autograd.record():
            loss_fn(local(x), y)
        mx.nd.waitall()

    def forward_backward():
        with autograd.record():
            loss = loss_fn(local(x), y)
        loss.backward()
        mx.nd.waitall()

    def update():
        trainer.step(config["local_batch"])
        mx.nd.waitall()

    return loop.prepared(config, sampler, forward, forward_backward, update)


def train(config, sampler):
    with runner.waiting(config, sampler):
        kvstore = mx.kv.create("dist_%s" % config["mode"])
    loader = data.loader(config)
    size = config["input_size"]
    net = build(config, (config["local_batch"], 3, size, size))
    if config["math"]:  # before the trainer: its KVStore starts from these values
        models.set_canonical(net, samemath.checked_initial_weights(config))
    runner.model_ready(config, models.parameter_count(net), "kvstore %s rank %d of %d workers"
                       % (kvstore.type, kvstore.rank, kvstore.num_workers),
                       lambda: models.canonical(net))
    trainer = gluon.Trainer(trained(net), "sgd", sgd(config), kvstore=kvstore)
    step = make_step(config, net, trainer)
    result, batch = loop.timed_steps(config, sampler, epoch_batches(config, loader), step)
    parts = sequence.Parts(
        canonical=lambda: models.canonical(net), barrier=kvstore._barrier,
        calibration=lambda batch: prepare_calibration(config, sampler, net, batch),
        parameters=models.parameter_count(net), worker_updates=False,
        profile=lambda: profiling.profile_steps(
            config, sampler, net, step, loop.endless(lambda: batches(loader)),
            drives_servers=kvstore.rank == 0))
    result["kvstore_rank"] = kvstore.rank
    return sequence.after_training(config, result, batch, parts)


def local_loop(config):
    """The same step with a local trainer, no KVStore (bench/overhead.py)."""
    loader = data.loader(config)
    size = config["input_size"]
    net = build(config, (config["local_batch"], 3, size, size))
    trainer = gluon.Trainer(net.collect_params(), "sgd", sgd(config), kvstore=None)
    return loop.endless(lambda: batches(loader)), make_step(dict(config, mode="async"), net,
                                                            trainer)


def kernels():
    """oneDNN (MKLDNN in MXNet 1.x) where the build has it and MXNET_MKLDNN_ENABLED does not
    turn it off. Which instruction set oneDNN picks MXNet does not say in-process (only its
    verbose log would): `isa` stays None rather than guessed from the CPU."""
    built = mx.runtime.Features().is_enabled("MKLDNN")
    on = built and os.environ.get("MXNET_MKLDNN_ENABLED", "1") != "0"
    return {"library": "oneDNN" if on else "MXNet native", "isa": None,
            "read": "mxnet.runtime.Features().is_enabled('MKLDNN'), MXNET_MKLDNN_ENABLED"}


def main(argv):
    config = runner.load_config(argv)
    runner.run(config, train, {"mxnet": mx.__version__, "numpy": numpy.__version__}, kernels)


if __name__ == "__main__":
    main(sys.argv)
