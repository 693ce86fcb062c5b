"""Networks in tf.keras: the same architectures as bench/pytorch/models.py, in NHWC (the layout
TensorFlow's CPU kernels support). PyTorch pads k // 2 on every side. At stride 1 with an odd
kernel TensorFlow's `same` padding is that already, and is the fast path (a separate
ZeroPadding2D costs a copy of the tensor: ResNet-18 ran 1.48x slower). Where `same` would pad
asymmetrically (stride > 1 at even sizes) the padding stays explicit, so every layer's outputs
match the other frameworks' (tests/test_networks.py checks the two forms agree bit for bit)."""
import tensorflow as tf

from bench.common import samemath
from bench.common.counts import pick

layers = tf.keras.layers
# True: every padded convolution as ZeroPadding2D + `valid` (the form before the fix; the
# bit-for-bit test builds it to compare)
EXPLICIT_PADDING = False


def conv(channels, kernel, stride=1, pad=0, **kwargs):
    """A convolution padded by `pad` on every side, as PyTorch's Conv2d(padding=pad): a list of
    layers, `same` where that is the same padding."""
    if pad and stride == 1 and pad == kernel // 2 and kernel % 2 and not EXPLICIT_PADDING:
        return [layers.Conv2D(channels, kernel, padding="same", **kwargs)]
    padding = [layers.ZeroPadding2D(pad)] if pad else []
    return padding + [layers.Conv2D(channels, kernel, strides=stride, **kwargs)]


def lenet5(classes, size):
    return tf.keras.Sequential([
        tf.keras.Input((size, size, 3)),
        layers.Conv2D(6, 5, activation="tanh"), layers.AveragePooling2D(2),
        layers.Conv2D(16, 5, activation="tanh"), layers.AveragePooling2D(2),
        layers.Flatten(),
        layers.Dense(120, activation="tanh"), layers.Dense(84, activation="tanh"),
        layers.Dense(classes)], name="lenet5")


def alexnet(classes, size):
    """At 64x64 the features end at 1x1x256; adaptive average pooling to 6x6 (as in the
    PyTorch and MXNet versions) is then a 6x replication."""
    if size != 64:
        raise ValueError("alexnet: written for 64x64 input (Table IV), got %d" % size)
    return tf.keras.Sequential([
        tf.keras.Input((size, size, 3)),
        *conv(64, 11, 4, pad=2, activation="relu"), layers.MaxPooling2D(3, 2),
        *conv(192, 5, pad=2, activation="relu"), layers.MaxPooling2D(3, 2),
        *conv(384, 3, pad=1, activation="relu"),
        *conv(256, 3, pad=1, activation="relu"),
        *conv(256, 3, pad=1, activation="relu"),
        layers.MaxPooling2D(3, 2),
        layers.UpSampling2D(6),
        layers.Flatten(),
        layers.Dropout(0.5), layers.Dense(4096, activation="relu"),
        layers.Dropout(0.5), layers.Dense(4096, activation="relu"),
        layers.Dense(classes)], name="alexnet")


# The trained layers of the network being built, in the order they were made: a functional
# model lists its variables in its layers' topological order, which puts a block's shortcut
# convolution before the body's last batch norm; the same-math check needs PyTorch's order.
MADE = []


def made(layer):
    MADE.append(layer)
    return layer


def conv_bn(x, channels, kernel, stride=1, relu=True):
    for layer in conv(channels, kernel, stride, pad=kernel // 2, use_bias=False):
        x = made(layer)(x) if isinstance(layer, layers.Conv2D) else layer(x)
    # PyTorch's momentum 0.1 is Keras's 0.9 (the weight of the running value)
    x = made(layers.BatchNormalization(epsilon=1e-5, momentum=0.9))(x)
    return layers.ReLU()(x) if relu else x


# The body is built before the shortcut, as in the PyTorch and Gluon blocks, so that the
# trained variables come in the same order in every framework (the same-math check loads one
# set of weights by that order).
def basic(x, width, stride):
    y = conv_bn(conv_bn(x, width, 3, stride), width, 3, relu=False)
    shortcut = x
    if stride != 1 or x.shape[-1] != width:
        shortcut = conv_bn(x, width, 1, stride, relu=False)
    return layers.ReLU()(layers.Add()([y, shortcut]))


def bottleneck(x, width, stride):
    """ResNet v1.5: the stride sits on the 3x3 convolution."""
    y = conv_bn(conv_bn(conv_bn(x, width, 1), width, 3, stride), width * 4, 1, relu=False)
    shortcut = x
    if stride != 1 or x.shape[-1] != width * 4:
        shortcut = conv_bn(x, width * 4, 1, stride, relu=False)
    return layers.ReLU()(layers.Add()([y, shortcut]))


def resnet(block, depths, classes, size, name):
    """The ImageNet form: 7x7/2 stem, 3x3/2 max-pool, four stages, global pool, one dense."""
    del MADE[:]
    inputs = tf.keras.Input((size, size, 3))
    x = conv_bn(inputs, 64, 7, 2)
    x = layers.MaxPooling2D(3, 2)(layers.ZeroPadding2D(1)(x))  # zeros are neutral after ReLU
    for stage, depth in enumerate(depths):
        for i in range(depth):
            x = block(x, 64 * 2 ** stage, 2 if (i == 0 and stage > 0) else 1)
    x = layers.GlobalAveragePooling2D()(x)
    model = tf.keras.Model(inputs, made(layers.Dense(classes))(x), name=name)
    model.made_order = list(MADE)  # trained_in_order() reads it
    return model


NETWORKS = {
    "lenet5": lenet5,
    "alexnet": alexnet,
    "resnet18": lambda classes, size: resnet(basic, (2, 2, 2, 2), classes, size, "resnet18"),
    "resnet50": lambda classes, size: resnet(bottleneck, (3, 4, 6, 3), classes, size,
                                             "resnet50"),
}


def build(network, classes, size):
    return pick(NETWORKS, network, "tensorflow")(classes, size)


def trained_in_order(model):
    """The trained variables in the order their layers were made (PyTorch's order)."""
    order = getattr(model, "made_order", None)
    if not order:
        return model.trainable_variables
    return [v for layer in order for v in layer.trainable_weights]


def set_canonical(model, arrays, planted=None):
    variables = trained_in_order(model)
    converted = samemath.keras_layout(arrays, planted)
    if [tuple(v.shape) for v in variables] != [a.shape for a in converted]:
        raise ValueError("canonical weights do not fit: %s against %s"
                         % ([tuple(v.shape) for v in variables], [a.shape for a in converted]))
    for variable, array in zip(variables, converted):
        variable.assign(array)


def canonical(model, values=None):
    """The trained weights in the canonical layout and order; values: variable -> its value
    where the caller reads them its own way (a strategy's local copy)."""
    read = values or (lambda v: v.numpy())
    return samemath.canonical_layout([read(v) for v in trained_in_order(model)])


def parameter_count(model):
    return int(sum(tf.size(v).numpy() for v in model.trainable_variables))


if __name__ == "__main__":
    from bench.common.counts import print_counts
    print_counts(lambda network, classes, size: parameter_count(build(network, classes, size)))
