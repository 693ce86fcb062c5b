"""Networks in PyTorch. The same architectures are written in every framework's models.py."""
import torch.nn as nn


class LeNet5(nn.Module):
    """LeNet-5 as LeCun et al. (1998) on 32x32x3: tanh, average-pool subsampling; 62,006 params."""

    def __init__(self, classes):
        super(LeNet5, self).__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 6, 5), nn.Tanh(), nn.AvgPool2d(2),
            nn.Conv2d(6, 16, 5), nn.Tanh(), nn.AvgPool2d(2))
        self.classifier = nn.Sequential(
            nn.Flatten(),
            nn.Linear(16 * 5 * 5, 120), nn.Tanh(),
            nn.Linear(120, 84), nn.Tanh(),
            nn.Linear(84, classes))

    def forward(self, x):
        return self.classifier(self.features(x))


NETWORKS = {"lenet5": LeNet5}


def build(network, classes):
    if network not in NETWORKS:
        raise ValueError("pytorch: no network %r (have %s)" % (network, ", ".join(NETWORKS)))
    return NETWORKS[network](classes)


def parameter_count(model):
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
