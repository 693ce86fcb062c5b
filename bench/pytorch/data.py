"""The shard through PyTorch's own pipeline: a map-style Dataset and a DataLoader, with no
cache ("No caching mechanism is available in the DataLoader mechanism", III-B): each image is
converted and normalised again every epoch."""
import torch
from torch.utils.data import DataLoader, Dataset

from bench.common import cifar


class ShardDataset(Dataset):
    def __init__(self, path, label_bytes, input_size, limit=0):
        self.labels, self.images = cifar.load(path, label_bytes, input_size, limit)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, index):
        return torch.from_numpy(cifar.normalise(self.images[index])), int(self.labels[index])


def loader(config):
    dataset = ShardDataset(config["shard"], config["label_bytes"], config["input_size"],
                           config.get("subset_images", 0))
    cifar.check_enough(config, len(dataset))
    workers = config["loader_workers"]
    generator = torch.Generator()
    generator.manual_seed(config["seed"] + config["rank"])
    return DataLoader(dataset, batch_size=config["local_batch"], shuffle=True, drop_last=True,
                      num_workers=workers, persistent_workers=workers > 0,
                      generator=generator)
