"""The networks every framework builds (Table II). `python -m bench.<framework>.models` prints every network's trainable parameter count as
JSON, so the harness and the tests compare the frameworks' architectures (Table II)."""
import json

from contract.paper import input_size  # Table IV: 64x64 for AlexNet, 32x32 for the rest

NETWORKS = ("lenet5", "alexnet", "resnet18", "resnet50")
CLASSES = (10, 100)


def pick(networks, network, framework):
    """The builder of `network` from a framework's NETWORKS table, or a clear error."""
    if network not in networks:
        raise ValueError("%s: no network %r (have %s)"
                         % (framework, network, ", ".join(sorted(networks))))
    return networks[network]


def print_counts(count):
    """count(network, classes, input_size) -> trainable parameters."""
    table = {n: {str(c): int(count(n, c, input_size(n))) for c in CLASSES} for n in NETWORKS}
    print(json.dumps(table, sort_keys=True))
