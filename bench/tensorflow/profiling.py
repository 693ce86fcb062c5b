"""The profiled steps of a TensorFlow cell (bench/common/profile.py).

tensorflow-sync: each worker runs its profiled steps under tf.profiler and reads the XPlane
trace it wrote. tensorflow-async: the operators run in the worker and ps servers, not in the
chief; each server runs a profiler service, the chief asks every one of them for a trace while
it schedules the profiled steps, and each server reads its own trace when it is stopped.

An operator is a TensorFlow op event on the host plane, named `scope/.../name:OpType`; its
record's path is the name scopes, then the op type (analysis/operators.yml decides backward
from the `gradient_tape` scope where the op type alone does not tell).
"""
import glob
import os
import time

from bench.common.profile import Profile, run_steps

TRACE_DIR = "tf_trace"  # relative to each process's out_dir
# the threads that run ops: compute pool, collectives, the input pipeline
OP_THREADS = ("tf_Compute", "collective_ops", "tf_data")


# Stopping TF's profiler while another thread records an event corrupted the heap or hung
# (one tensorflow-sync worker in about ten, inside stop()). The likely other thread is the input
# pipeline's Python generator filling its prefetch buffer. So the profiled steps train on
# batches fetched beforehand, the pipeline is left to fill its buffer and go idle, and the
# workers stop the profiler together once no collective is in flight.
QUIET_SECONDS = 1.0


def profile_steps(config, sampler, train_step, batches, everyone):
    """everyone(): a barrier of all workers (tensorflow-sync)."""
    import tensorflow as tf
    logdir = os.path.join(config["out_dir"], TRACE_DIR)
    train_step(next(batches), None)  # a step outside the profile: tracing is done
    steps = int(config["profile_steps"])
    ready = iter([next(batches) for _ in range(steps)])
    time.sleep(QUIET_SECONDS)
    tf.profiler.experimental.start(logdir)
    try:
        seconds = run_steps(sampler, steps, lambda: train_step(next(ready), None))
    except BaseException:  # the peers failed too: no barrier to wait for
        tf.profiler.experimental.stop()
        raise
    everyone()
    tf.profiler.experimental.stop()
    everyone()  # no worker trains again while another is still stopping
    return write(config, logdir, steps, seconds)


def remote_steps(config, sampler, schedule_one):
    """tensorflow-async: trace every server for a window while the chief keeps scheduling
    steps; returns the steps per worker that ran and the window's seconds. The servers write
    the trace into their own folders (a relative logdir), read by server_profile()."""
    import threading
    import tensorflow as tf
    window = max(2.0, 3.0 * int(config["profile_steps"]) * config["step_estimate"])
    done = []
    tracer = threading.Thread(target=lambda: done.append(tf.profiler.experimental.client.trace(
        ",".join(config["profiler_services"]), TRACE_DIR, int(window * 1000))))
    sampler.progress(phase="profile")
    tracer.start()
    closures = 0
    while tracer.is_alive():
        schedule_one()
        closures += 1
    tracer.join()
    steps = max(1, closures // config["world_size"])
    return Profile("tensorflow", "tf.profiler (remote trace of the servers)").write(
        config, steps, window, {"window_seconds": window, "closures": closures})


def server_profile(config):
    """A tensorflow-async server, once stopped: the trace the chief asked for -> profile.json
    (steps unknown here: the chief's profile.json has them)."""
    logdir = os.path.join(config["out_dir"], TRACE_DIR)
    if not os.path.isdir(logdir):
        return None
    return write(config, logdir, 0, 0.0)


def write(config, logdir, steps, seconds):
    import tensorflow as tf
    profile = Profile("tensorflow", "tf.profiler %s (xplane)" % tf.__version__)
    for path in glob.glob(os.path.join(logdir, "plugins", "profile", "*", "*.xplane.pb")):
        add_xplane(profile, path)
    return profile.write(config, steps, seconds)


def add_xplane(profile, path):
    """Op events of the host plane, with self time (an op's nested ops subtracted). Events that
    are not ops (executor, thread pool, Python) are left out: operator time is op time, as in
    TensorBoard's op statistics. Ops on a tf.data thread get a `tf.data` scope."""
    try:
        from tensorflow.tsl.profiler.protobuf import xplane_pb2  # TF 2.12+
    except ImportError:
        from tensorflow.core.profiler.protobuf import xplane_pb2  # the paper's TF 2.5
    space = xplane_pb2.XSpace()
    with open(path, "rb") as handle:
        space.ParseFromString(handle.read())
    for plane in space.planes:
        if plane.name != "/host:CPU":
            continue
        names = {key: meta.name for key, meta in plane.event_metadata.items()}
        for line in plane.lines:
            if not line.name.startswith(OP_THREADS):
                continue  # the Python thread's function call spans the ops run for it
            scope = ["tf.data"] if line.name.startswith("tf_data") else []
            ops = [(e.offset_ps, e.duration_ps, names.get(e.metadata_id, "")) for e in line.events]
            for name, self_ps in self_times([op for op in ops if is_op(op[2])]):
                profile.add(scope + op_path(name), self_ps / 1e12)


def is_op(name):
    """`node/name:OpType`; not `ExecutorState::Process` and the like, nor a call of a
    function (`__inference_...`), whose ops are recorded themselves, on other threads."""
    return ":" in name and "::" not in name and "__inference" not in name and \
        "_partitioned_" not in name


def self_times(events):
    """(name, self duration) of (start, duration, name) events on one thread."""
    stack, out = [], []
    for start, duration, name in sorted(events, key=lambda e: (e[0], -e[1])):
        while stack and stack[-1][0] + stack[-1][1] <= start:
            out.append(stack.pop()[2:])
        if stack:
            stack[-1][3] -= duration
        stack.append([start, duration, name, duration])
    out.extend(entry[2:] for entry in stack)
    return out


def op_path(name):
    """`gradient_tape/model/conv2d/Conv2DBackpropFilter:Conv2DBackpropFilter` ->
    [gradient_tape, model, conv2d, Conv2DBackpropFilter]: scopes, then the op type."""
    node, _, op_type = name.rpartition(":")
    return node.split("/")[:-1] + [op_type]
