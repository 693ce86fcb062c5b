"""tensorflow-sync: MultiWorkerMirroredStrategy (RING all-reduce over gRPC), one worker per
node, each reading its own shard. tensorflow-async: ParameterServerStrategy, the chief on node 1
schedules steps that the workers run against the parameter servers; each worker reads the
whole training set. TF_CONFIG is set by the launch script; so is TF_USE_LEGACY_KERAS=1.

Run as `python -m bench.tensorflow.train cell.json` (sync workers and the async chief); the
async ps and workers run bench/tensorflow/server.py.
"""
import os
import sys
import time

import tensorflow as tf

from bench.common import agree, cifar, loop, profile, runner, samemath
from bench.common.breakdown import summarise
from bench.tensorflow import data, models, profiling


def set_threads(config):
    """Before any op runs: the thread budget shared by all frameworks (methodology.md)."""
    tf.config.threading.set_intra_op_parallelism_threads(config["threads"])
    tf.config.threading.set_inter_op_parallelism_threads(config["interop_threads"])


def seed_everything(seed):
    """The same initial weights on every worker; tf.keras.utils.set_random_seed is TF 2.7+."""
    setter = getattr(tf.keras.utils, "set_random_seed", None)
    if setter is not None:
        setter(seed)
    else:
        tf.random.set_seed(seed)


def sgd(config):
    return tf.keras.optimizers.SGD(learning_rate=config["lr"], momentum=config["momentum"])


def losses(config):
    """Per-example cross-entropy averaged over the global batch: the all-reduce / ps sum of
    the workers' gradients is then the global mean, as DDP's averaging."""
    per_example = tf.keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, reduction=tf.keras.losses.Reduction.NONE)
    workers = config["world_size"] if config["mode"] == "sync" else 1
    global_batch = config["local_batch"] * workers

    def loss_fn(y, logits):
        return tf.nn.compute_average_loss(per_example(y, logits), global_batch_size=global_batch)
    return loss_fn


def built(config):
    """The network with its seeded initial weights, or in the same-math check the canonical
    ones (bench/common/samemath.py), converted to Keras's layout; in the strategy's scope."""
    seed_everything(config["seed"])
    model = models.build(config["network"], config["classes"], config["input_size"])
    if config["math"]:
        models.set_canonical(model, samemath.checked_initial_weights(config),
                             config.get("planted"))
    return model


def ordered_dataset(config):
    """The same-math check's batches (samemath.ordered_batches), NHWC, every epoch in turn."""
    epochs = max(config["epochs"], config["max_epochs"])
    xs, ys = [], []
    for epoch in range(epochs):
        for x, y in samemath.ordered_batches(config, epoch):
            xs.append(x.transpose(0, 2, 3, 1))
            ys.append(y)
    return tf.data.Dataset.from_tensor_slices((xs, ys)).repeat()


def replica_step(config, model, optimizer):
    loss_fn = losses(config)

    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss
    return step


def prepare_calibration(config, sampler, weights, batch):
    """-> measure() (loop.prepared). A local copy of the model (weights: the trained
    model's) and a local optimizer: no collectives, no parameter servers. The local step
    (forward, backward, update) is one function, as in training: splitting a TF step into
    separate functions inflates it (docs/methodology.md, "Framework facts").
    backward = step - forward."""
    local = models.build(config["network"], config["classes"], config["input_size"])
    local.set_weights(weights)
    loss_fn = losses(config)
    x, y = batch
    forward_fn = tf.function(lambda: loss_fn(y, local(x, training=True)))
    local_step = replica_step(config, local, sgd(config))
    step_fn = tf.function(lambda: local_step(x, y))
    return loop.prepared(config, sampler, lambda: forward_fn().numpy(),
                         lambda: step_fn().numpy())


# --- tensorflow-sync --------------------------------------------------------------------------

# The input pipeline is never destroyed: destroying its MultiDeviceIterator waits for a tf.data
# thread (py-spy: ~MultiDeviceIterator -> ~LogicalThreadWrapper), which held a worker 60 s or
# more at 0% CPU in 2 of 3 ResNet-50 cells, its peer waiting in the final barrier. So the
# pipeline is kept here and the process leaves with os._exit once every worker has written its
# result (leave_together, over bench/common/agree.py's channel).
KEPT = []

# After the last result is written, the leader (task 0, which holds the coordination service)
# waits this long before exiting: a worker whose heartbeat finds the leader gone aborts.
LEADER_GRACE_SECONDS = 2.0


def train_sync(config, sampler, finish=None):
    """finish: called with a barrier of every worker, for leave_together()."""
    options = tf.distribute.experimental.CommunicationOptions(
        implementation=tf.distribute.experimental.CommunicationImplementation.RING)
    strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    with strategy.scope():
        model = built(config)
        step = replica_step(config, model, sgd(config))
    if config["math"]:
        samemath.write_weights(config, trained_weights(strategy, model), samemath.LOADED)
    images = data.image_count(config["shard"], config["label_bytes"])
    cifar.check_enough(config, min(images, config.get("subset_images") or images))
    dist = strategy.distribute_datasets_from_function(
        lambda ctx: ordered_dataset(config) if config["math"] else
        data.dataset(config, config["shard"], images, config["seed"] + config["rank"]))
    batches = iter(dist)
    run = tf.function(lambda x, y: strategy.run(step, args=(x, y)))

    def train_step(batch, timer):
        # the local loss only: fetching it synchronises without another collective; it is
        # the local batch's share of the global mean, times the workers: the local mean
        loss = strategy.experimental_local_results(run(*batch))[0].numpy()
        return loss * config["world_size"]

    runner.log(config, "%s: %d parameters, %d workers (MultiWorkerMirrored, RING)"
               % (config["network"], models.parameter_count(model),
                  strategy.num_replicas_in_sync))
    result, batch = loop.timed_steps(config, sampler, lambda epoch: batches, train_step)
    local_batch = [strategy.experimental_local_results(t)[0] for t in batch]
    everyone = barrier(config)
    weights = local_weights(strategy, model)
    if config["math"]:
        samemath.write_weights(config, trained_weights(strategy, model), samemath.FINAL)
        result["math"] = samemath.record(config)
    calibration = loop.in_turn(config, everyone,
                               lambda: prepare_calibration(config, sampler, weights, local_batch))
    result.update(calibration=calibration, parameters=models.parameter_count(model),
                  update_in_backward=True,
                  summary=summarise(result["steps"], calibration, worker_updates=False))
    if profile.wanted(config):
        runner.keep(config, result)
        result["profile"] = profiling.profile_steps(config, sampler, train_step, batches,
                                                    everyone)
    KEPT.extend([dist, batches])
    if finish:
        finish(everyone)
    return result


def leave_together(config, everyone):
    """Once every worker has written result.json (one may still be parsing its profile when
    another is done), the others exit first and the leader last: a worker that outlived the
    leader once aborted (SIGABRT, exit 134) with its result unwritten."""
    everyone()
    if config["rank"] == 0:
        time.sleep(LEADER_GRACE_SECONDS)


def local_weights(strategy, model):
    """This worker's own copy of every weight, in get_weights() order, read without any
    collective. Keras's get_weights() reads a BatchNorm statistic through an all-reduce: on
    one worker alone (the in-turn calibration) it paired with the others' barrier."""
    return [strategy.experimental_local_results(v)[0].numpy() for v in model.weights]


def trained_weights(strategy, model):
    """This worker's copy of the trained weights, canonical (the same-math check)."""
    return models.canonical(model, lambda v: strategy.experimental_local_results(v)[0].numpy())


def barrier(config):
    """Returns only when every worker has called it: the package's own TCP channel
    (bench/common/agree.py), which the harness gives every tensorflow-sync cell."""
    channel = agree.channel(config)
    if channel is None:
        raise ValueError("tensorflow-sync needs the cell's agree_address for its barriers: "
                         "run it through the harness (harness/plan/layout.py)")
    return channel.barrier


# --- tensorflow-async (the chief) ---------------------------------------------------------------

def coordinator_module():
    """tf.distribute.coordinator (TF 2.6+) or its experimental name (TF 2.5, the paper's)."""
    return getattr(tf.distribute, "coordinator", None) or tf.distribute.experimental.coordinator


def worker_index():
    """Which worker runs this closure (TF 2.12+); -1 where TensorFlow cannot tell (TF 2.5)."""
    get = getattr(coordinator_module(), "experimental_get_current_worker_index", None)
    return get() if get is not None else tf.constant(-1)



def full_dataset_fn(config):
    """Each worker reads the whole training set from its own disk."""
    paths = tf.constant(config["full_data_by_worker"])
    images = data.image_count(config["full_data"], config["label_bytes"])

    def dataset_fn():
        # no per-worker seed here (tf.data takes only a Python seed): each worker shuffles
        # the whole set in its own, unseeded order
        return data.dataset(config, paths[tf.maximum(worker_index(), 0)], images, None)
    return dataset_fn


def closure(step):
    """One asynchronous step on whichever worker runs it, timed on that worker's clock:
    start, batch ready, gradients applied on the parameter servers."""
    def run(iterator):
        start = tf.timestamp()
        x, y = next(iterator)
        with tf.control_dependencies([x, y]):
            ready = tf.timestamp()
        loss = step(x, y)
        with tf.control_dependencies([loss]):
            end = tf.timestamp()
        return {"start": start, "ready": ready, "end": end, "loss": loss,
                "worker": worker_index()}
    return run


def schedule_all(config, sampler, coordinator, fn, iterator, rule):
    """Keep 2 closures per worker queued (never a barrier); progress = closures fetched. A
    step is one closure per worker; the chief alone decides when to stop (loop.StopRule: the
    fixed count, or the verdict profile's precision on the closures fetched so far)."""
    world = config["world_size"]
    window = 2 * world
    pending, done = [], []
    scheduled = 0
    while True:
        pending.append(coordinator.schedule(fn, args=(iterator,)))
        scheduled += 1
        if len(pending) > window:
            done.append(pending.pop(0).fetch())
            sampler.progress(phase="train", step=len(done) // world)
        if scheduled % world == 0 and rule.decide(scheduled // world,
                                                  lambda: later_intervals(config, done)):
            break
    coordinator.join()
    return done + [p.fetch() for p in pending]


def later_intervals(config, records):
    """The chief's steady rate after the first epoch, as closure intervals (closure_intervals)."""
    first_epoch = config["steps_per_epoch"] * config["world_size"]
    later = [{"start": float(r["start"]), "total": float(r["end"] - r["start"])}
             for r in records[first_epoch:]]
    return closure_intervals(config, later)[0]


def async_steps(config, records):
    """Closure timings -> per-worker step lists (warm-up = each worker's first steps; epoch =
    the closure's place in the schedule over steps_per_epoch closures per worker)."""
    per_epoch = config["steps_per_epoch"] * config["world_size"]
    by_worker = {}
    for order, r in sorted(enumerate(records), key=lambda o_r: float(o_r[1]["start"])):
        by_worker.setdefault(int(r["worker"]), []).append((order, r))
    steps = {}
    for worker, rows in by_worker.items():
        steps[worker] = [{"total": float(r["end"] - r["start"]),
                          "loading": float(r["ready"] - r["start"]),
                          "loss": float(r["loss"]), "start": float(r["start"]),
                          "epoch": order // per_epoch,
                          "warmup": i < config["warmup_steps"]}
                         for i, (order, r) in enumerate(rows)]
    return steps


def closure_intervals(config, measured):
    """The chief's steady rate as samples: the gaps between successive measured closures'
    ends, times the workers (a step is one closure per worker), so their mean is wall_step;
    and the epoch of each gap's later closure."""
    ends = sorted((s["start"] + s["total"], s.get("epoch", 0)) for s in measured)
    gaps = [(b[0] - a[0]) * config["world_size"] for a, b in zip(ends, ends[1:])]
    return gaps, [b[1] for b in ends[1:]]


def train_async(config, sampler):
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    ps_strategy = getattr(tf.distribute, "ParameterServerStrategy", None) or \
        tf.distribute.experimental.ParameterServerStrategy  # TF 2.5
    strategy = ps_strategy(resolver)
    coordinator = coordinator_module().ClusterCoordinator(strategy)
    with strategy.scope():
        model = built(config)
        step = replica_step(config, model, sgd(config))
    if config["math"]:
        samemath.write_weights(config, models.canonical(model),
                               samemath.LOADED)
    per_worker = coordinator.create_per_worker_dataset(full_dataset_fn(config))
    fn = tf.function(lambda iterator: strategy.run(closure(step), args=(iterator,)))
    rule = loop.StopRule(config)  # the chief's alone: no agreement in an async mode
    runner.log(config, "%s: %d parameters, up to %d closures over %d workers (ParameterServer)"
               % (config["network"], models.parameter_count(model),
                  rule.ceiling * config["world_size"], config["world_size"]))
    started, net_before = time.time(), sampler.net_counters()
    iterator = iter(per_worker)
    records = schedule_all(config, sampler, coordinator, fn, iterator, rule)
    clock = {"started": started, "train_seconds": time.time() - started,
             "net": (net_before, sampler.net_counters())}
    sampler.progress(step=len(records) // config["world_size"])
    if config["math"]:  # the weights on the parameter servers
        samemath.write_weights(config, models.canonical(model),
                               samemath.FINAL)
    calibration = prepare_calibration(config, sampler, model.get_weights(),
                                      local_batch(config))()
    result = async_result(config, records, rule, clock, calibration)
    result["parameters"] = models.parameter_count(model)
    closure_seconds = result.pop("mean_closure")  # the profiler's estimate, not a result key
    if profile.wanted(config):
        runner.keep(config, result)
        result["profile"] = profile_async(config, sampler, coordinator, fn, iterator,
                                          closure_seconds)
    return result


def async_result(config, records, rule, clock, calibration):
    """The chief's result from every closure's record: the keys loop.timed_steps gives a
    synchronous mode, per worker and over all; clock: when scheduling began, how long it
    took, the network counters before and after."""
    steps = async_steps(config, records)
    measured = [s for w in steps for s in steps[w] if not s["warmup"]]
    ends = sorted(float(r["end"]) for r in records)
    summaries = {w: summarise(s, calibration, worker_updates=False) for w, s in steps.items()}
    wall = ends[-1] - min(s["start"] for s in measured)
    samples, epochs = closure_intervals(config, measured)
    first = min(records, key=lambda r: float(r["start"]))
    (sent_before, recv_before), (sent_after, recv_after) = clock["net"]
    return {"steps": [s for w in sorted(steps) for s in steps[w]],
            "train_seconds": clock["train_seconds"],
            "wall_step": wall * config["world_size"] / len(measured),
            "mean_closure": wall / len(measured),  # popped by train_async
            "step_samples": samples, "step_epochs": epochs,
            "stopped_by": rule.reached, "halfwidth": rule.finite_halfwidth(),
            # node 1's interface (the chief's node) over every closure: bytes per step
            "net_bytes_sent": sent_after - sent_before,
            "net_bytes_recv": recv_after - recv_before,
            "net_steps": len(records) / float(config["world_size"]),
            # on the chief's clock: the first closure, timed on its worker, as if it began
            # when scheduling began (the workers' clocks may differ from the chief's)
            "first_step_ended": clock["started"] + float(first["end"] - first["start"]),
            "loop_ended": clock["started"] + clock["train_seconds"],
            "per_worker": {str(w): dict(summary, node=config["worker_nodes"][w]
                                        if w >= 0 else None)
                           for w, summary in summaries.items()},
            "calibration": calibration,
            "summary": summarise([s for w in steps for s in steps[w]], calibration,
                                 worker_updates=False)}


def profile_async(config, sampler, coordinator, fn, iterator, step_estimate):
    """The profiled steps: scheduled as the timed ones, while the servers are traced. The
    closures still queued when the trace returns are left, not joined: joining them took
    11-22 s more than the trace in 5 of 18 cells of a verdict matrix, at 0% CPU, and what
    the profile reports was taken already. The chief leaves with os._exit (main)."""
    pending = []

    def schedule_one():
        pending.append(coordinator.schedule(fn, args=(iterator,)))
        if len(pending) > 2 * config["world_size"]:
            pending.pop(0).fetch()
    return profiling.remote_steps(dict(config, step_estimate=step_estimate), sampler,
                                  schedule_one)


def local_batch(config):
    """One batch from this node's copy of the training set, for the calibration."""
    images = data.image_count(config["full_data"], config["label_bytes"])
    return next(iter(data.dataset(config, config["full_data"], images, config["seed"])))


def local_loop(config):
    """The same step on a local model, no strategy (bench/overhead.py)."""
    set_threads(config)
    seed_everything(config["seed"])
    model = models.build(config["network"], config["classes"], config["input_size"])
    step = replica_step(dict(config, mode="async"), model, sgd(config))
    run = tf.function(step)
    images = data.image_count(config["shard"], config["label_bytes"])
    batches = iter(data.dataset(config, config["shard"], images, config["seed"]))
    return batches, lambda batch, timer: run(*batch).numpy()


def kernels():
    """oneDNN or Eigen, as TensorFlow itself answers (IsMklEnabled: its oneDNN custom
    operations on, after TF_ENABLE_ONEDNN_OPTS and the CPU's default), with the setting it
    ran under (the package's scripts set it: the report says so); TF 2.5+ has the question
    in tensorflow.python.util, older releases in tensorflow.python."""
    try:
        from tensorflow.python.util import _pywrap_util_port as port
    except ImportError:
        from tensorflow.python import _pywrap_util_port as port
    setting = os.environ.get("TF_ENABLE_ONEDNN_OPTS", "unset")
    return {"library": "oneDNN" if port.IsMklEnabled() else "Eigen", "isa": None,
            "read": "_pywrap_util_port.IsMklEnabled(), TF_ENABLE_ONEDNN_OPTS=%s" % setting}


def main(argv):
    config = runner.load_config(argv)
    set_threads(config)
    versions = {"tensorflow": tf.__version__, "numpy": runner.installed_version("numpy"),
                "tf-keras": runner.installed_version("tf-keras")}
    if config["mode"] == "async":
        # The chief's interpreter exit (the coordinator's and the remote iterators' teardown)
        # held it about 20 s at 0% CPU after its result in 2 of 18 cells, the servers with it.
        runner.run(config, train_async, versions, kernels)
    else:
        finish = []
        runner.run(config, lambda c, s: train_sync(c, s, finish.append), versions, kernels)
        leave_together(config, finish[0])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # result.json is written; see KEPT


if __name__ == "__main__":
    main(sys.argv)
