"""keras.applications' ResNet-50 (v1: the stride on the bottleneck's first 1x1 convolution,
biases in its convolutions) against bench/tensorflow/models.py (bench/reference.py).
keras.applications has no ResNet-18 and no AlexNet."""
import tensorflow as tf

from bench.tensorflow import models, parts


def step_of(config, model):
    size = config["input_size"]
    tf.random.set_seed(config["seed"])
    x = tf.random.normal((config["local_batch"], size, size, 3))
    y = tf.random.uniform((config["local_batch"],), 0, config["classes"], dtype=tf.int64)
    optimizer = parts.sgd(config)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def run():
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    return lambda: run().numpy()


def steps(config):
    parts.set_threads(config)
    network, size = config["network"], config["input_size"]
    found = {"package": step_of(config, models.build(network, config["classes"], size)),
             "name": "tf.keras.applications.ResNet50" if network == "resnet50" else "-"}
    if network == "resnet50":
        reference = tf.keras.applications.ResNet50(
            weights=None, input_shape=(size, size, 3), classes=config["classes"],
            classifier_activation=None)
        found["reference"] = step_of(config, reference)
    else:
        found["missing"] = "keras.applications has no %s" % network
    return found
