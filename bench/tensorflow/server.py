"""A tensorflow-async parameter server or worker: `python -m bench.tensorflow.server cell.json`
with TF_CONFIG naming its job and index. It serves gRPC until the harness sends SIGTERM (after
the chief has finished: TensorFlow's ps and workers never exit on their own), then records
that it was stopped that way and exits 0. Its sampler logs its memory meanwhile."""
import json
import os
import signal
import sys
import time

from bench.common import runner

STOP = []


def on_term(signum, frame):
    STOP.append(time.time())


# The fewest inter-op threads a server can make progress with: a closure's graph blocks one
# inter-op thread in a receive while the op that feeds it waits for another. With a pool of
# 1 (what TensorFlow takes by default on a node pinned to 1 CPU) the first closure never
# ended: tensorflow-async hung in start-up on 2 nodes of 1 CPU each (docs/methodology.md).
SERVER_INTEROP_MIN = 2


def server_config(tf, config):
    """The thread budget given to the gRPC server itself: tf.config.threading configures only
    this process's eager context, not the graphs the server runs for the chief, which
    otherwise size both pools from the CPUs the process may use."""
    return tf.compat.v1.ConfigProto(
        intra_op_parallelism_threads=config["threads"],
        inter_op_parallelism_threads=max(SERVER_INTEROP_MIN, config["interop_threads"]))


def serve(config, sampler):
    import tensorflow as tf
    from bench.tensorflow.parts import set_threads
    set_threads(config)
    spec = json.loads(os.environ["TF_CONFIG"])
    server = tf.distribute.Server(tf.train.ClusterSpec(spec["cluster"]),
                                  job_name=spec["task"]["type"],
                                  task_index=spec["task"]["index"], protocol="grpc", start=True,
                                  config=server_config(tf, config))
    runner.log(config, "serving %s (%s)" % (server.target, spec["task"]["type"]))
    if config.get("profiler_port"):
        # the chief asks for a trace of its profiled steps (bench/tensorflow/profiling.py)
        tf.profiler.experimental.server.start(int(config["profiler_port"]))
    sampler.progress(phase=config["role"])
    while not STOP:  # the main thread stays in Python so the signal handler runs
        time.sleep(0.2)
    result = {"versions": {"tensorflow": tf.__version__},
              "stopped": "SIGTERM from the harness after the chief finished"}
    if config.get("profiler_port"):
        from bench.tensorflow import profiling
        result["profile"] = profiling.server_profile(config)
    return result


def main(argv):
    signal.signal(signal.SIGTERM, on_term)
    config = runner.load_config(argv)
    runner.run(config, serve, {})
    # gRPC server threads do not stop cleanly at interpreter exit; the result is written
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv)
