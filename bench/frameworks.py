"""The frameworks' modules of bench/, loaded by the framework's name in one place, with import
statements the layer contracts can see (.importlinter): the timed trainer and the reference
models. Each import is inside its function, so a node imports only its own framework.
Python 3.6."""


def trainer(framework):
    """bench/<framework>/train.py."""
    if framework == "tensorflow":
        from bench.tensorflow import train
    elif framework == "pytorch":
        from bench.pytorch import train
    elif framework == "mxnet":
        from bench.mxnet import train
    else:
        raise ValueError("no framework %r in bench/" % framework)
    return train


def reference(framework):
    """bench/<framework>/reference.py."""
    if framework == "tensorflow":
        from bench.tensorflow import reference as module
    elif framework == "pytorch":
        from bench.pytorch import reference as module
    elif framework == "mxnet":
        from bench.mxnet import reference as module
    else:
        raise ValueError("no framework %r in bench/" % framework)
    return module
