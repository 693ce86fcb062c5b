"""Networks in PyTorch. The same architectures are written in every framework's models.py
(docs/methodology.md, "Networks"); tests check the parameter counts agree."""
import torch.nn as nn

from bench.common.counts import pick


class LeNet5(nn.Module):
    """LeNet-5 (LeCun et al., 1998) on 32x32x3: tanh, average-pool subsampling."""

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


class AlexNet(nn.Module):
    """AlexNet (Krizhevsky et al., 2012) in its common one-tower form on 64x64 input. At 64x64
    the features end at 1x1x256; as in the usual implementations, they are pooled (here:
    replicated) to 6x6 before the 9216 -> 4096 -> 4096 classifier."""

    def __init__(self, classes):
        super(AlexNet, self).__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, 11, stride=4, padding=2), nn.ReLU(inplace=True),
            nn.MaxPool2d(3, 2),
            nn.Conv2d(64, 192, 5, padding=2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
            nn.Conv2d(192, 384, 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(384, 256, 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(256, 256, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
            nn.AdaptiveAvgPool2d(6))
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Dropout(0.5), nn.Linear(256 * 6 * 6, 4096), nn.ReLU(inplace=True),
            nn.Dropout(0.5), nn.Linear(4096, 4096), nn.ReLU(inplace=True),
            nn.Linear(4096, classes))

    def forward(self, x):
        return self.classifier(self.features(x))


def conv_bn(cin, cout, kernel, stride=1, relu=True):
    layers = [nn.Conv2d(cin, cout, kernel, stride=stride, padding=kernel // 2, bias=False),
              nn.BatchNorm2d(cout, eps=1e-5, momentum=0.1)]
    if relu:
        layers.append(nn.ReLU(inplace=True))
    return nn.Sequential(*layers)


class Basic(nn.Module):
    expansion = 1

    def __init__(self, cin, width, stride):
        super(Basic, self).__init__()
        cout = width * self.expansion
        self.body = self.make_body(cin, width, stride)
        self.shortcut = conv_bn(cin, cout, 1, stride, relu=False) \
            if stride != 1 or cin != cout else nn.Identity()
        self.relu = nn.ReLU(inplace=True)

    @staticmethod
    def make_body(cin, width, stride):
        return nn.Sequential(conv_bn(cin, width, 3, stride), conv_bn(width, width, 3, relu=False))

    def forward(self, x):
        return self.relu(self.body(x) + self.shortcut(x))


class Bottleneck(Basic):
    """ResNet v1.5: the stride sits on the 3x3 convolution."""
    expansion = 4

    @staticmethod
    def make_body(cin, width, stride):
        return nn.Sequential(conv_bn(cin, width, 1), conv_bn(width, width, 3, stride),
                             conv_bn(width, width * 4, 1, relu=False))


class ResNet(nn.Module):
    """ResNet in its ImageNet form (He et al., 2016): 7x7/2 stem, 3x3/2 max-pool, four stages,
    global average pool, one fully connected layer."""

    def __init__(self, block, depths, classes):
        super(ResNet, self).__init__()
        layers = [conv_bn(3, 64, 7, 2), nn.MaxPool2d(3, 2, padding=1)]
        cin = 64
        for stage, depth in enumerate(depths):
            width = 64 * 2 ** stage
            for i in range(depth):
                layers.append(block(cin, width, 2 if (i == 0 and stage > 0) else 1))
                cin = width * block.expansion
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        return self.fc(self.pool(self.features(x)).flatten(1))


NETWORKS = {
    "lenet5": LeNet5,
    "alexnet": AlexNet,
    "resnet18": lambda classes: ResNet(Basic, (2, 2, 2, 2), classes),
    "resnet50": lambda classes: ResNet(Bottleneck, (3, 4, 6, 3), classes),
}


def build(network, classes):
    return pick(NETWORKS, network, "pytorch")(classes)


def set_canonical(model, arrays):
    """Load the same-math check's canonical weights (bench/common/samemath.py): PyTorch's own
    layout, in parameters() order."""
    import torch
    params = list(model.parameters())
    if [tuple(p.shape) for p in params] != [a.shape for a in arrays]:
        raise ValueError("canonical weights do not fit: %s against %s"
                         % ([tuple(p.shape) for p in params], [a.shape for a in arrays]))
    with torch.no_grad():
        for param, array in zip(params, arrays):
            param.copy_(torch.from_numpy(array))


def canonical(model):
    return [p.detach().numpy().copy() for p in model.parameters()]


def parameter_count(model):
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


if __name__ == "__main__":
    from bench.common.counts import print_counts
    print_counts(lambda network, classes, size: parameter_count(build(network, classes)))
