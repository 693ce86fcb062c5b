"""TensorFlow's parts that both of its system-modes use: threads, seeds, the optimizer, the
loss over the global batch, the network (its seeded or canonical initial weights), one replica
step, and the calibration on a local copy of the model. Python 3.6."""
import tensorflow as tf

from bench.common import loop, samemath
from bench.tensorflow import data, models


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


def local_batch(config, keep=None):
    """One batch from this node's copy of the training set, for the calibration; `keep`: a
    list that keeps the dataset alive (tensorflow-async's chief: chief.KEPT)."""
    images = data.image_count(config["full_data"], config["label_bytes"])
    dataset = data.dataset(config, config["full_data"], images, config["seed"])
    if keep is not None:
        keep.append(dataset)
    return next(iter(dataset))
