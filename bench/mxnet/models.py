"""Networks in MXNet Gluon: the same architectures as bench/pytorch/models.py."""
from mxnet.gluon import nn

from bench.common.counts import pick


class LeNet5(nn.HybridSequential):
    def __init__(self, classes):
        super(LeNet5, self).__init__()
        with self.name_scope():
            self.add(nn.Conv2D(6, 5, activation="tanh"), nn.AvgPool2D(2),
                     nn.Conv2D(16, 5, activation="tanh"), nn.AvgPool2D(2),
                     nn.Dense(120, activation="tanh"), nn.Dense(84, activation="tanh"),
                     nn.Dense(classes))


class PoolTo6(nn.HybridBlock):
    """Adaptive average pooling to 6x6, as in the PyTorch AlexNet."""

    def hybrid_forward(self, F, x):
        return F.contrib.AdaptiveAvgPooling2D(x, output_size=6)


class AlexNet(nn.HybridSequential):
    def __init__(self, classes):
        super(AlexNet, self).__init__()
        with self.name_scope():
            self.add(nn.Conv2D(64, 11, strides=4, padding=2, activation="relu"),
                     nn.MaxPool2D(3, 2),
                     nn.Conv2D(192, 5, padding=2, activation="relu"), nn.MaxPool2D(3, 2),
                     nn.Conv2D(384, 3, padding=1, activation="relu"),
                     nn.Conv2D(256, 3, padding=1, activation="relu"),
                     nn.Conv2D(256, 3, padding=1, activation="relu"), nn.MaxPool2D(3, 2),
                     PoolTo6(), nn.Flatten(),
                     nn.Dropout(0.5), nn.Dense(4096, activation="relu"),
                     nn.Dropout(0.5), nn.Dense(4096, activation="relu"),
                     nn.Dense(classes))


def conv_bn(channels, kernel, stride=1, relu=True):
    block = nn.HybridSequential()
    block.add(nn.Conv2D(channels, kernel, strides=stride, padding=kernel // 2, use_bias=False),
              nn.BatchNorm(epsilon=1e-5, momentum=0.9))
    if relu:
        block.add(nn.Activation("relu"))
    return block


class Basic(nn.HybridBlock):
    expansion = 1

    def __init__(self, cin, width, stride):
        super(Basic, self).__init__()
        cout = width * self.expansion
        with self.name_scope():
            self.body = self.make_body(width, stride)
            self.shortcut = conv_bn(cout, 1, stride, relu=False) \
                if stride != 1 or cin != cout else None

    @staticmethod
    def make_body(width, stride):
        body = nn.HybridSequential()
        body.add(conv_bn(width, 3, stride), conv_bn(width, 3, relu=False))
        return body

    def hybrid_forward(self, F, x):
        shortcut = x if self.shortcut is None else self.shortcut(x)
        return F.Activation(self.body(x) + shortcut, act_type="relu")


class Bottleneck(Basic):
    """ResNet v1.5: the stride sits on the 3x3 convolution."""
    expansion = 4

    @staticmethod
    def make_body(width, stride):
        body = nn.HybridSequential()
        body.add(conv_bn(width, 1), conv_bn(width, 3, stride), conv_bn(width * 4, 1, relu=False))
        return body


class ResNet(nn.HybridSequential):
    def __init__(self, block, depths, classes):
        super(ResNet, self).__init__()
        with self.name_scope():
            self.add(conv_bn(64, 7, 2), nn.MaxPool2D(3, 2, padding=1))
            cin = 64
            for stage, depth in enumerate(depths):
                width = 64 * 2 ** stage
                for i in range(depth):
                    self.add(block(cin, width, 2 if (i == 0 and stage > 0) else 1))
                    cin = width * block.expansion
            self.add(nn.GlobalAvgPool2D(), nn.Dense(classes))


NETWORKS = {
    "lenet5": LeNet5,
    "alexnet": AlexNet,
    "resnet18": lambda classes: ResNet(Basic, (2, 2, 2, 2), classes),
    "resnet50": lambda classes: ResNet(Bottleneck, (3, 4, 6, 3), classes),
}


def build(network, classes):
    return pick(NETWORKS, network, "mxnet")(classes)


def set_canonical(net, arrays):
    """Load the same-math check's canonical weights (bench/common/samemath.py): Gluon keeps
    PyTorch's layout (OIHW, dense (out, in), NCHW flatten), in collect_params() order."""
    import mxnet as mx
    params = [p for p in net.collect_params().values() if p.grad_req != "null"]
    if [tuple(p.shape) for p in params] != [a.shape for a in arrays]:
        raise ValueError("canonical weights do not fit: %s against %s"
                         % ([tuple(p.shape) for p in params], [a.shape for a in arrays]))
    for param, array in zip(params, arrays):
        param.set_data(mx.nd.array(array))


def canonical(net):
    return [p.data().asnumpy() for p in net.collect_params().values() if p.grad_req != "null"]


def parameter_count(net):
    """Trainable parameters; call after the first forward pass (shapes are inferred)."""
    return sum(p.data().size for p in net.collect_params().values() if p.grad_req != "null")


def built(network, classes, size):
    """Initialised and run once on a zero batch, so every shape is known."""
    import mxnet as mx
    net = build(network, classes)
    net.initialize(mx.init.Xavier(), ctx=mx.cpu())
    net(mx.nd.zeros((1, 3, size, size)))
    return net


if __name__ == "__main__":
    from bench.common.counts import print_counts
    print_counts(lambda network, classes, size: parameter_count(built(network, classes, size)))
