"""The shard through TensorFlow's own pipeline: the Dataset API reading, decoding, shuffling,
caching and batching, as III-A describes it; reading the CIFAR binary records, resizing once,
normalising and prefetching are the package's choices."""
import os

import tensorflow as tf

from bench.common import cifar

PIXELS = 3072


def options(config):
    """The same loader budget as the other frameworks: `loader_workers` background threads."""
    opts = tf.data.Options()
    threading = getattr(opts, "threading", None) or opts.experimental_threading  # TF 2.5
    threading.private_threadpool_size = config["loader_workers"]
    threading.max_intra_op_parallelism = 1
    return opts


def records(path_tensor, label_bytes):
    return tf.data.FixedLengthRecordDataset(path_tensor, label_bytes + PIXELS)


def decode(label_bytes, size):
    """Record -> (uint8 HWC image at `size`, int64 label); resized by pixel repetition as in
    bench/common/cifar.load, so every framework sees the same pixels."""
    factor = size // 32

    def parse(record):
        raw = tf.io.decode_raw(record, tf.uint8)
        label = tf.cast(raw[label_bytes - 1], tf.int64)
        image = tf.transpose(tf.reshape(raw[label_bytes:], (3, 32, 32)), (1, 2, 0))
        if factor > 1:
            image = tf.repeat(tf.repeat(image, factor, axis=0), factor, axis=1)
        return image, label
    return parse


def normalise(image, label):
    mean = tf.constant(cifar.MEAN.reshape(1, 1, 3))
    std = tf.constant(cifar.STD.reshape(1, 1, 3))
    return (tf.cast(image, tf.float32) / 255.0 - mean) / std, label


def dataset(config, path_tensor, images, seed):
    """An endless dataset of (x, y) batches of local_batch; `images` sizes the shuffle buffer
    (the whole shard, as the other frameworks shuffle it whole every epoch); `seed` differs per
    worker so workers reading the same file do not read it in the same order."""
    parallel = config["loader_workers"]
    parse = decode(config["label_bytes"], config["input_size"])
    cached = os.environ.get("DLBENCH_TF_INPUT_CACHE", "1") != "0"  # a factor (invoke explain)
    ds = records(path_tensor, config["label_bytes"])
    subset = config.get("subset_images")
    if subset:  # the verdict size: short epochs, cached after the first
        images = min(images, subset)
        first = ds.take(subset).map(parse, num_parallel_calls=parallel)
        ds = the_rest_read_and_dropped(ds, subset, parse, parallel).concatenate(first) \
            if cached else first
    else:
        ds = ds.map(parse, num_parallel_calls=parallel)
    if cached:
        ds = ds.cache()
    ds = ds.shuffle(images, seed=seed, reshuffle_each_iteration=True)
    ds = ds.map(normalise, num_parallel_calls=parallel)
    ds = ds.batch(config["local_batch"], drop_remainder=True).repeat()
    return ds.prefetch(2).with_options(options(config))


def the_rest_read_and_dropped(ds, subset, parse, parallel):
    """The records after the first `subset`, decoded and dropped: put before the subset, they
    make the verdict size's first batch wait for as much work as a full-length run's, which
    waits for its whole shard (its shuffle buffer); the cache then spares its later epochs
    (uncached, each of its short epochs would read them again, so they are not read there).
    Without them, its start-up was 1.1 s shorter than a full run's (tensorflow-sync, LeNet-5:
    2.4% of the cell; docs/notebook.md)."""
    decoded = ds.skip(subset).map(parse, num_parallel_calls=parallel)
    return decoded.filter(lambda image, label: tf.constant(False))


def image_count(path, label_bytes):
    """Images in a record file, from its size (the file is checked at provisioning)."""
    return os.path.getsize(path) // (label_bytes + PIXELS)
