"""The same-math check on a node (`invoke same-math`, selfcheck/math_check.py): every framework
starts from one set of initial weights and reads its shard in one recorded order, so that step
k of every system-mode computes on the same weights and images, and its losses and final
weights can be compared number for number.

Weights are kept in one canonical layout, PyTorch's: convolutions (out, in, h, w), dense
layers (out, in), the first dense layer's inputs in NCHW flatten order (channel, row,
column). A framework that stores a tensor otherwise converts it on the way in and out.

The controller writes the initial weights (a file per network and class count) and their
checksum; a node rebuilds the same arrays from the same seed (numpy's RandomState stream is
fixed across numpy releases) and refuses to start if the checksum differs. Python 3.6.
"""
import hashlib
import math
import os

import numpy as np

from . import cifar


RESNETS = {"resnet18": ("basic", (2, 2, 2, 2)), "resnet50": ("bottleneck", (3, 4, 6, 3))}


def canonical_shapes(network, classes):
    """[(name, shape)] of the network's trained tensors, in canonical order (PyTorch's
    parameters(), which the other frameworks' models follow) and layout."""
    if network == "lenet5":
        return [("conv1.weight", (6, 3, 5, 5)), ("conv1.bias", (6,)),
                ("conv2.weight", (16, 6, 5, 5)), ("conv2.bias", (16,)),
                ("fc1.weight", (120, 16 * 5 * 5)), ("fc1.bias", (120,)),
                ("fc2.weight", (84, 120)), ("fc2.bias", (84,)),
                ("fc3.weight", (classes, 84)), ("fc3.bias", (classes,))]
    if network in RESNETS:
        return resnet_shapes(network, classes)
    raise ValueError("same-math: no canonical layout for %r (lenet5, resnet18, resnet50)"
                     % network)


def resnet_shapes(network, classes):
    block, depths = RESNETS[network]
    out = conv_bn("stem", 3, 64, 7)
    cin = 64
    for stage, depth in enumerate(depths):
        width = 64 * 2 ** stage
        for i in range(depth):
            name = "layer%d.%d" % (stage + 1, i)
            stride = 2 if (i == 0 and stage > 0) else 1
            if block == "basic":
                body = [(width, 3), (width, 3)]
            else:
                body = [(width, 1), (width, 3), (width * 4, 1)]
            channels = cin
            for j, (cout, kernel) in enumerate(body):
                out += conv_bn("%s.conv%d" % (name, j + 1), channels, cout, kernel)
                channels = cout
            if stride != 1 or cin != channels:
                out += conv_bn(name + ".shortcut", cin, channels, 1)
            cin = channels
    return out + [("fc.weight", (classes, cin)), ("fc.bias", (classes,))]


def conv_bn(name, cin, cout, kernel):
    return [(name + ".weight", (cout, cin, kernel, kernel)), (name + ".bn.gamma", (cout,)),
            (name + ".bn.beta", (cout,))]


def initial_weights(network, classes, seed):
    """Seeded arrays: weights uniform in +-1/sqrt(fan-in) (PyTorch's default bound), biases
    and batch norm's beta zero, its gamma one."""
    rng = np.random.RandomState(seed)
    arrays = []
    for name, shape in canonical_shapes(network, classes):
        if name.endswith(".weight"):
            bound = 1.0 / math.sqrt(int(np.prod(shape[1:])))
            arrays.append(rng.uniform(-bound, bound, shape).astype(np.float32))
        elif name.endswith(".gamma"):
            arrays.append(np.ones(shape, dtype=np.float32))
        else:
            arrays.append(np.zeros(shape, dtype=np.float32))
    return arrays


def checksum(arrays):
    digest = hashlib.sha256()
    for array in arrays:
        digest.update(np.ascontiguousarray(array, dtype=np.float32).tobytes())
    return digest.hexdigest()


def checked_initial_weights(config):
    """The initial weights, after checking them against the controller's checksum."""
    arrays = initial_weights(config["network"], config["classes"], config["seed"])
    if not config["init_checksum"]:
        raise ValueError("same-math: no checksum of the initial weights came with the cell: "
                         "the math size runs through `invoke same-math`")
    if checksum(arrays) != config["init_checksum"]:
        raise ValueError("same-math: the initial weights built here (checksum %s) are not the "
                         "controller's (%s): numpy differs in its seeded stream"
                         % (checksum(arrays)[:12], config["init_checksum"][:12]))
    if planted(config, PERTURBED):
        return perturbed(arrays, config["seed"])
    return arrays


# not an error: every weight moved by about one float32 rounding step, so that a framework
# run against itself shows how fast rounding differences grow (the check's noise floor)
PERTURBED = "weights-perturbed"
PERTURBATION = 2.0 ** -23  # float32's machine epsilon: one unit in the last place at 1.0


def perturbed(arrays, seed):
    """Each weight times (1 +- PERTURBATION), the signs seeded: the smallest change float32
    can hold, as different summation orders make it."""
    rng = np.random.RandomState([seed, 1])
    return [(a * (1 + PERTURBATION * rng.choice([-1.0, 1.0], a.shape))).astype(np.float32)
            for a in arrays]


def batch_order(config, epoch, images):
    """This worker's shard order in `epoch`: a permutation seeded by (seed, epoch, rank), the
    same in every framework."""
    return np.random.RandomState([config["seed"], epoch, config["rank"]]).permutation(images)


def ordered_batches(config, epoch):
    """The epoch's steps_per_epoch batches of this worker's shard in batch_order: (x NCHW
    float32 normalised as cifar.normalise does, y int64)."""
    labels, images = cifar.load(config["shard"], config["label_bytes"], config["input_size"],
                                config.get("subset_images", 0))
    order = batch_order(config, epoch, len(labels))
    size = config["local_batch"]
    for step in range(min(len(order) // size, config["steps_per_epoch"])):
        chosen = order[step * size:(step + 1) * size]
        x = (images[chosen].astype(np.float32) / 255.0 - cifar.MEAN) / cifar.STD
        yield x, labels[chosen]


LOADED = "weights-loaded.npz"  # as the framework holds them before the first step
FINAL = "weights-final.npz"  # after the last step


def write_weights(config, arrays, name):
    """Weights read back from the framework into the canonical layout, beside result.json:
    LOADED shows a wrong conversion before any step, FINAL what the steps did."""
    names = [n for n, _ in canonical_shapes(config["network"], config["classes"])]
    np.savez(config["out_dir"] + "/" + name, **dict(zip(names, arrays)))


def keras_layout(arrays, planted=None):
    """Canonical arrays (bench/common/samemath.py: PyTorch's layout) -> Keras's: convolution
    kernels HWIO, dense kernels (in, out), and the first dense layer after a convolution
    (the flatten) with its inputs in NHWC order (row, column, channel) instead of NCHW.
    planted: "tensorflow-dense-not-transposed" reads the last dense kernel without its
    transpose (a planted error the check must catch)."""
    out, channels = [], None
    last_dense = max(i for i, a in enumerate(arrays) if a.ndim == 2)
    for i, array in enumerate(arrays):
        if array.ndim == 4:
            channels = array.shape[0]
            out.append(array.transpose(2, 3, 1, 0))
        elif array.ndim == 2 and channels:  # after the flatten
            side = int(round((array.shape[1] // channels) ** 0.5))
            out.append(array.reshape(array.shape[0], channels, side, side)
                       .transpose(2, 3, 1, 0).reshape(-1, array.shape[0]))
            channels = None
        elif array.ndim == 2 and planted == "tensorflow-dense-not-transposed" \
                and i == last_dense:
            out.append(array.reshape(array.shape[1], array.shape[0]))
        else:
            out.append(array.T if array.ndim == 2 else array)
    return out


def canonical_layout(arrays):
    """Keras's arrays -> the canonical layout (keras_layout's inverse)."""
    out, channels = [], None
    for array in arrays:
        if array.ndim == 4:
            channels = array.shape[3]
            out.append(array.transpose(3, 2, 0, 1))
        elif array.ndim == 2 and channels:
            side = int(round((array.shape[0] // channels) ** 0.5))
            out.append(array.reshape(side, side, channels, array.shape[1])
                       .transpose(3, 2, 0, 1).reshape(array.shape[1], -1))
            channels = None
        else:
            out.append(array.T if array.ndim == 2 else array)
    return out


# errors the check must catch, put in on purpose by its tests (`invoke same-math --plant`)
PLANTED = ("mxnet-server-lr-x3", "pytorch-momentum-off", "tensorflow-dense-not-transposed")


def planted(config, name):
    """Whether the check's planted error `name` is asked for in this cell (tests only)."""
    return config.get("planted") == name


def record(config):
    """What result.json keeps of the check: the weights' checksum and the order's seed and
    first indices, so that a reader can tell which weights and images the steps saw."""
    images = os.path.getsize(config["shard"]) // (config["label_bytes"] + cifar.PIXELS)
    if config.get("subset_images"):
        images = min(images, config["subset_images"])
    return {"init_checksum": config["init_checksum"],
            "order": "RandomState([seed %d, epoch, rank %d]).permutation(%d)"
                     % (config["seed"], config["rank"], images),
            "first_indices": [int(i) for i in batch_order(config, 0, images)[:8]]}
