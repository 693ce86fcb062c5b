"""The shard through MXNet's own pipeline: a Gluon Dataset and gluon.data.DataLoader (no cache:
each image is converted and normalised again every epoch)."""
import numpy as np
from mxnet import gluon

from bench.common import cifar


class ShardDataset(gluon.data.Dataset):
    def __init__(self, path, label_bytes, input_size, limit=0):
        self.labels, self.images = cifar.load(path, label_bytes, input_size, limit)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, index):
        return cifar.normalise(self.images[index]), np.int32(self.labels[index])


def loader(config):
    dataset = ShardDataset(config["shard"], config["label_bytes"], config["input_size"],
                           config.get("subset_images", 0))
    cifar.check_enough(config, len(dataset))
    return gluon.data.DataLoader(dataset, batch_size=config["local_batch"], shuffle=True,
                                 last_batch="discard", num_workers=config["loader_workers"])
