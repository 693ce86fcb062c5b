"""tensorflow-async's chief: ParameterServerStrategy, the chief on node 1 schedules steps
(closures) that the workers run against the parameter servers; each worker reads the whole
training set. The chief builds its result from the closures' own timings (async_result) with
the keys bench/common/loop.py's timed_steps gives a synchronous trainer. The parameter servers
and workers run bench/tensorflow/server.py. Run by bench/tensorflow/train.py. Python 3.6."""
import time

import tensorflow as tf

from bench.common import loop, profile, runner, samemath
from bench.common.breakdown import summarise
from bench.tensorflow import data, models, profiling
from bench.tensorflow.parts import built, local_batch, prepare_calibration, replica_step, sgd


# Nothing TensorFlow made in the chief is destroyed before the process leaves (os._exit, in
# train.py): with parameter servers, each tf.function that dies is removed from every remote
# worker too, by a gRPC call that holds the interpreter's lock until it returns. py-spy caught
# one (AtomicFunction.__del__ -> EagerContext::MaybeRemoveFunctionRemotely, in a closure
# thread) holding the chief ~30 s while it wrote its result: 3 of 11 full-length LeNet-5
# launches lost 30 s so, and a fourth froze 20 s in its calibration, most likely the same way
# (its sampler silent, the cell failed as stalled): docs/notebook.md.
KEPT = []


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
    fixed count, or the verdict size's precision on the closures fetched so far)."""
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


def train(config, sampler):
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    ps_strategy = getattr(tf.distribute, "ParameterServerStrategy", None) or \
        tf.distribute.experimental.ParameterServerStrategy  # TF 2.5
    with runner.waiting(config, sampler):
        strategy = ps_strategy(resolver)
        coordinator = coordinator_module().ClusterCoordinator(strategy)
    with strategy.scope():
        model = built(config)
        step = replica_step(config, model, sgd(config))
    rule = loop.StopRule(config)  # the chief's alone: no agreement in an async mode
    runner.model_ready(config, models.parameter_count(model), "up to %d closures over %d "
                       "workers (ParameterServer)" % (rule.ceiling * config["world_size"],
                                                      config["world_size"]),
                       lambda: models.canonical(model))
    per_worker = coordinator.create_per_worker_dataset(full_dataset_fn(config))
    fn = tf.function(lambda iterator: strategy.run(closure(step), args=(iterator,)))
    started, net_before = time.time(), sampler.net_counters()
    iterator = iter(per_worker)
    records = schedule_all(config, sampler, coordinator, fn, iterator, rule)
    clock = {"started": started, "train_seconds": time.time() - started,
             "net": (net_before, sampler.net_counters())}
    sampler.progress(step=len(records) // config["world_size"])
    if config["math"]:  # the weights on the parameter servers
        samemath.write_weights(config, models.canonical(model),
                               samemath.FINAL)
    measure = prepare_calibration(config, sampler, model.get_weights(),
                                  local_batch(config, KEPT))
    KEPT.extend([strategy, coordinator, model, step, per_worker, fn, iterator, measure])
    calibration = measure()
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
            "mean_closure": wall / len(measured),  # popped by train()
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
