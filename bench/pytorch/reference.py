"""torchvision's ResNet-18, ResNet-50 and AlexNet against bench/pytorch/models.py
(bench/reference.py). torchvision's ResNets are v1.5, as the package's."""
import torch
import torch.nn as nn

from bench.pytorch import models

TORCHVISION = {"resnet18": "resnet18", "resnet50": "resnet50", "alexnet": "alexnet"}


def step_of(config, model):
    torch.manual_seed(config["seed"])
    x = torch.randn(config["local_batch"], 3, config["input_size"], config["input_size"])
    y = torch.randint(0, config["classes"], (config["local_batch"],))
    opt = torch.optim.SGD(model.parameters(), lr=config["lr"], momentum=config["momentum"])
    criterion = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad()
        criterion(model(x), y).backward()
        opt.step()
    return step


def steps(config):
    torch.set_num_threads(config["threads"])
    torch.set_num_interop_threads(config["interop_threads"])
    network = config["network"]
    found = {"package": step_of(config, models.build(network, config["classes"])),
             "name": "torchvision.models.%s" % TORCHVISION.get(network, "-")}
    try:
        import torchvision
        builder = getattr(torchvision.models, TORCHVISION[network])
        found["reference"] = step_of(config, builder(num_classes=config["classes"]))
        found["name"] += " (torchvision %s)" % torchvision.__version__
    except Exception as exc:  # not installed, or a build whose import fails on CPU torch
        found["missing"] = "%s: %s" % (type(exc).__name__, str(exc).splitlines()[0][:200])
    return found
