"""Read a CIFAR-format shard (the binary records written by the harness) into numpy arrays."""
import numpy as np

PIXELS = 3072


def read_shard(path, label_bytes):
    """Return (labels int64 [N], images uint8 [N, 3, 32, 32]); the fine label for CIFAR-100."""
    record = label_bytes + PIXELS
    raw = np.fromfile(path, dtype=np.uint8)
    if raw.size == 0 or raw.size % record:
        raise ValueError("%s: %d bytes is not a whole number of %d-byte records"
                         % (path, raw.size, record))
    raw = raw.reshape(-1, record)
    labels = raw[:, label_bytes - 1].astype(np.int64)
    images = raw[:, label_bytes:].reshape(-1, 3, 32, 32)
    return labels, images


# Per-channel statistics of the real CIFAR-10 training set: every framework normalises with
# the same constants so the input pipelines do the same arithmetic.
MEAN = np.array([0.4914, 0.4822, 0.4465], dtype=np.float32).reshape(3, 1, 1)
STD = np.array([0.2470, 0.2435, 0.2616], dtype=np.float32).reshape(3, 1, 1)


def normalise(image_uint8):
    """One CHW uint8 image -> float32, scaled to [0, 1] and standardised per channel."""
    return (image_uint8.astype(np.float32) / 255.0 - MEAN) / STD


def check_enough(config, images):
    """Every worker must be able to run steps_per_epoch full batches from what it reads."""
    needed = config["steps_per_epoch"] * config["local_batch"]
    if images < needed:
        raise ValueError("%s has %d images; %d steps of %d need %d"
                         % (config["shard"], images, config["steps_per_epoch"],
                            config["local_batch"], needed))


def load(path, label_bytes, input_size, limit=0):
    """The shard, resized once to input_size (a multiple of 32) by pixel repetition: every
    framework sees the same pixels (AlexNet: 64x64, Table IV). limit > 0: its first `limit`
    images only (the verdict size's subset, so that an epoch is short)."""
    labels, images = read_shard(path, label_bytes)
    if limit:
        labels, images = labels[:limit], images[:limit]
    factor = input_size // 32
    if factor * 32 != input_size or factor < 1:
        raise ValueError("input size %d is not a multiple of 32" % input_size)
    if factor > 1:
        images = images.repeat(factor, axis=2).repeat(factor, axis=3)
    return labels, images
