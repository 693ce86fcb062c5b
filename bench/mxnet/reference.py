"""The Gluon model zoo's ResNet-18 and ResNet-50 (v1) against bench/mxnet/models.py
(bench/reference.py). The zoo's v1 bottleneck puts the stride on its first 1x1
convolution, the package's on the 3x3: v1 does less work. v1.5 is the package's choice, as
torchvision writes it: the paper names no variant, and v1 and v1.5 have the same parameter
counts, so Table II's cannot tell them apart."""
import mxnet as mx
from mxnet import autograd, gluon

from bench.mxnet import models

ZOO = {"resnet18": "resnet18_v1", "resnet50": "resnet50_v1"}


def step_of(config, net):
    size = config["input_size"]
    mx.random.seed(config["seed"])
    x = mx.nd.random.normal(shape=(config["local_batch"], 3, size, size))
    y = mx.nd.random.randint(0, config["classes"], shape=(config["local_batch"],)).astype("float32")
    net.initialize(mx.init.Xavier(), ctx=mx.cpu())
    net.hybridize(static_alloc=True, static_shape=True)
    net(x)
    trainer = gluon.Trainer(net.collect_params(), "sgd",
                            {"learning_rate": config["lr"], "momentum": config["momentum"]})
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()

    def step():
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(config["local_batch"])
        mx.nd.waitall()
    return step


def steps(config):
    network = config["network"]
    found = {"package": step_of(config, models.build(network, config["classes"])),
             "name": "gluon.model_zoo.vision.%s" % ZOO.get(network, "-")}
    if network in ZOO:
        zoo = gluon.model_zoo.vision.get_model(ZOO[network], classes=config["classes"])
        found["reference"] = step_of(config, zoo)
    else:
        found["missing"] = "the model zoo's %s is written for 224x224 input (no adaptive " \
                           "pooling before its classifier)" % network
    return found
