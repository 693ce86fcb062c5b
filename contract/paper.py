"""The paper's fixed setup as plain constants (Krisilias et al., IEEE Big Data 2021): the
controller plans its cells from them and the analysis scales to them. The paper's own words
for each are in analysis/reference/paper.yml (`setup` and `sources`, with their sections);
tests/test_paper_sources.py holds the two together. Python 3.6."""

# Table III: "Model-dataset combinations used" (benchmark -> network, dataset)
BENCHMARKS = {
    "lenet5-cifar10": ("lenet5", "cifar10"),
    "alexnet-cifar10": ("alexnet", "cifar10"),
    "resnet18-cifar10": ("resnet18", "cifar10"),
    "resnet18-cifar100": ("resnet18", "cifar100"),
    "resnet50-cifar10": ("resnet50", "cifar10"),
    "resnet50-cifar100": ("resnet50", "cifar100"),
}

# Section IV-A: "a cluster consisting of three virtual machines", "4 virtual CPUs" each
NODES = 3
VCPUS_PER_NODE = 4

# Table IV: "Training parameters"
TRAIN_IMAGES = 50000  # "Dataset Size 50,000"
GLOBAL_BATCH = 126  # "Global batch size 126"
LOCAL_BATCH = 42  # "Local batch size 42"
STEPS_PER_EPOCH = 396  # "Steps per epoch 396"
EPOCHS = 10  # "Number of epochs 10" (section IV-B: "a fixed number of epochs (10)")
STEPS = EPOCHS * STEPS_PER_EPOCH  # each worker's steps of a whole run (3,960)
# what the analysis scales each cell to, by the names of a cell's settings
TABLE_IV = {"epochs": EPOCHS, "steps_per_epoch": STEPS_PER_EPOCH, "local_batch": LOCAL_BATCH}
INPUT_SIZE = 32  # "Input size 32x32 (64x64 only for AlexNet)"
INPUT_SIZE_BY_NETWORK = {"alexnet": 64}


def input_size(network):
    """A network's input side in pixels (Table IV)."""
    return INPUT_SIZE_BY_NETWORK.get(network, INPUT_SIZE)
