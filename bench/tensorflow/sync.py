"""tensorflow-sync: MultiWorkerMirroredStrategy (RING all-reduce over gRPC), one worker per
node, each reading its own shard. Run by bench/tensorflow/train.py. Python 3.6."""
import time

import tensorflow as tf

from bench.common import agree, cifar, loop, runner, sequence
from bench.tensorflow import data, models, profiling
from bench.tensorflow.parts import (built, ordered_dataset, prepare_calibration, replica_step,
                                    sgd)


# The input pipeline is never destroyed: destroying its MultiDeviceIterator waits for a tf.data
# thread (py-spy: ~MultiDeviceIterator -> ~LogicalThreadWrapper), which held a worker 60 s or
# more at 0% CPU in 2 of 3 ResNet-50 cells, its peer waiting in the final barrier. So the
# pipeline is kept here and the process leaves with os._exit once every worker has written its
# result (leave_together, over bench/common/agree.py's channel).
KEPT = []


# After the last result is written, the leader (task 0, which holds the coordination service)
# waits this long before exiting: a worker whose heartbeat finds the leader gone aborts.
LEADER_GRACE_SECONDS = 2.0


def train(config, sampler, finish=None):
    """finish: called with a barrier of every worker, for leave_together()."""
    options = tf.distribute.experimental.CommunicationOptions(
        implementation=tf.distribute.experimental.CommunicationImplementation.RING)
    with runner.waiting(config, sampler):
        strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    with strategy.scope():
        model = built(config)
        step = replica_step(config, model, sgd(config))
    runner.model_ready(config, models.parameter_count(model), "%d workers (MultiWorkerMirrored, "
                       "RING)" % strategy.num_replicas_in_sync,
                       lambda: trained_weights(strategy, model))
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

    result, batch = loop.timed_steps(config, sampler, lambda epoch: batches, train_step)
    local_batch = [strategy.experimental_local_results(t)[0] for t in batch]
    everyone = barrier(config)
    weights = local_weights(strategy, model)
    parts = sequence.Parts(
        canonical=lambda: trained_weights(strategy, model), barrier=everyone,
        calibration=lambda batch: prepare_calibration(config, sampler, weights, batch),
        parameters=models.parameter_count(model), worker_updates=False,
        profile=lambda: profiling.profile_steps(config, sampler, train_step, batches,
                                                everyone))
    result["update_in_backward"] = True
    sequence.after_training(config, result, local_batch, parts)
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
