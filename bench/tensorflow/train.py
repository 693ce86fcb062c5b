"""TensorFlow's entry point: `python -m bench.tensorflow.train cell.json` runs a
tensorflow-sync worker (bench/tensorflow/sync.py) or tensorflow-async's chief
(bench/tensorflow/chief.py); the async parameter servers and workers run
bench/tensorflow/server.py. TF_CONFIG is set by the launch script; so is TF_USE_LEGACY_KERAS=1.
Python 3.6."""
import os
import sys

import tensorflow as tf

from bench.common import runner
from bench.tensorflow import chief, data, models, sync
from bench.tensorflow.parts import replica_step, seed_everything, set_threads, sgd


def local_loop(config):
    """The same step on a local model, no strategy (bench/overhead.py)."""
    set_threads(config)
    seed_everything(config["seed"])
    model = models.build(config["network"], config["classes"], config["input_size"])
    step = replica_step(dict(config, mode="async"), model, sgd(config))
    run = tf.function(step)
    images = data.image_count(config["shard"], config["label_bytes"])
    batches = iter(data.dataset(config, config["shard"], images, config["seed"]))
    return batches, lambda batch, timer: run(*batch).numpy()


def kernels():
    """oneDNN or Eigen, as TensorFlow itself answers (IsMklEnabled: its oneDNN custom
    operations on, after TF_ENABLE_ONEDNN_OPTS and the CPU's default), with the setting it
    ran under (the package's scripts set it: the report says so); TF 2.5+ has the question
    in tensorflow.python.util, older releases in tensorflow.python."""
    try:
        from tensorflow.python.util import _pywrap_util_port as port
    except ImportError:
        from tensorflow.python import _pywrap_util_port as port
    setting = os.environ.get("TF_ENABLE_ONEDNN_OPTS", "unset")
    return {"library": "oneDNN" if port.IsMklEnabled() else "Eigen", "isa": None,
            "read": "_pywrap_util_port.IsMklEnabled(), TF_ENABLE_ONEDNN_OPTS=%s" % setting}


def main(argv):
    config = runner.load_config(argv)
    set_threads(config)
    versions = {"tensorflow": tf.__version__, "numpy": runner.installed_version("numpy"),
                "tf-keras": runner.installed_version("tf-keras")}
    if config["mode"] == "async":
        # The chief's interpreter exit (the coordinator's and the remote iterators' teardown)
        # held it about 20 s at 0% CPU after its result in 2 of 18 cells, the servers with it.
        runner.run(config, chief.train, versions, kernels)
    else:
        finish = []
        runner.run(config, lambda c, s: sync.train(c, s, finish.append), versions, kernels)
        sync.leave_together(config, finish[0])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # result.json is written; see sync.KEPT


if __name__ == "__main__":
    main(sys.argv)
