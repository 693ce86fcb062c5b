"""What every trainer does around its framework-specific loop: read the cell config, start the
sampler, write result.json whether the run succeeds or fails."""
import contextlib
import faulthandler
import os
import platform
import signal
import socket
import sys
import time
import traceback

from contract import cellconfig, codedigest, nodefolder

from . import cpuinfo, interference, samemath
from .results import write_json
from .sampler import Sampler


def load_config(argv):
    if len(argv) != 2:
        sys.exit("usage: python -m bench.<framework>.train CELL_JSON")
    config = cellconfig.read(argv[1])
    config["rank"] = int(os.environ.get("RANK", config.get("rank", 0)))
    config["world_size"] = int(os.environ.get("WORLD_SIZE", config.get("world_size", 1)))
    return config


# The result run() is building, for keep().
_BUILDING = {}


def print_stacks_when_asked():
    """On SIGUSR1, every Python thread's stack to the log: the controller, finding this
    process's progress standing still (a stall), asks before it stops it, so that the log says
    where it stood (harness/run/launch.py ask_for_stacks). faulthandler writes from the signal
    handler itself, so a thread that holds the interpreter's lock is shown too."""
    faulthandler.register(signal.SIGUSR1, all_threads=True)


def run(config, train, versions, kernels=None):
    """Call train(config, sampler) -> dict and write result.json with provenance either way;
    kernels() -> what the framework says it dispatches to (see read_kernels)."""
    # A framework that crashes in native code (SIGSEGV, SIGABRT) leaves no Python traceback:
    # this prints every thread's stack to the log first.
    faulthandler.enable(all_threads=True)
    print_stacks_when_asked()
    out_dir = config["out_dir"]
    sampler = Sampler(out_dir, config["sample_interval"], config.get("interface"),
                      most_steps(config)).start()
    result = {"config": config, "versions": versions, "host": socket.gethostname(),
              "python": platform.python_version(), "pid": os.getpid(),
              "started": time.time(), "status": "running",
              "process_started": sampler.process.create_time(), "phase": "train",
              "environment": recorded_environment(config), "cpu": cpuinfo.describe(),
              "kernels": read_kernels(kernels), "code_digest": codedigest.digest()}
    _BUILDING["result"] = result
    sampler.tracker = interference.start("/%s/%s/" % (config.get("run_id"),
                                                    config.get("cell_id")))
    try:
        result.update(train(config, sampler))
        result.update(lifetime(result))
        result.update(status="succeeded", phase="done")
    except BaseException as exc:  # also KeyboardInterrupt / SystemExit: record, then re-raise
        result["status"] = "failed"
        result["error"] = "%s: %s" % (type(exc).__name__, exc)
        result["traceback"] = traceback.format_exc()
        raise
    finally:
        result["ended"] = time.time()
        sampler.stop(result["status"])
        result["interference"] = interference.finish(sampler.tracker)
        result["peak_rss_mb"] = sampler.peak_rss_mb
        result["peak_own_rss_mb"] = sampler.peak_own_rss_mb
        write_json(os.path.join(out_dir, nodefolder.RESULT), result)
    return result


@contextlib.contextmanager
def waiting(config, sampler):
    """Around the framework's rendezvous: meanwhile the process's progress names whom it waits
    for (cell.json waits_for), so that a cell stuck in start-up says who has not come (the
    controller keeps those that have not: harness/run/stall.py), and result.json keeps how
    long the wait took, a part of the start-up."""
    began = time.time()
    sampler.progress(waiting=config["waits_for"])
    try:
        yield
    finally:
        sampler.state.pop("waiting", None)
        _BUILDING.get("result", {})["rendezvous_seconds"] = time.time() - began


def read_kernels(kernels):
    """{library, isa, read}: the kernel library the framework says this process uses (oneDNN
    or Eigen for TensorFlow) and the instruction set it dispatches to where it says, with how
    it was asked (`read`). The paper's explanation of TensorFlow's backward pass rests on Eigen
    against oneDNN (Table I, section V-E), so this is asked of the framework in the process that
    trains, not inferred from a variable. A failed question leaves {"error"}, never the cell."""
    if kernels is None:
        return None
    try:
        return kernels()
    except Exception as exc:  # a framework too old or too new for the question
        return {"error": "%s: %s" % (type(exc).__name__, exc)}


# What a process's environment says about how it ran, read back by invoke explain (which
# checks each rung's level in what the process saw, not in what was planned): the thread
# budget, the stack's variables and the factor's. Named ones only: a prefix would also catch
# whatever the controller's environment passes through (a token, on the local cluster).
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def recorded_environment(config):
    names = set(THREAD_VARIABLES) | set(config.get("stack_environment") or ())
    names |= {pair.split("=", 1)[0] for pair in (config.get("environment") or "").split(";")
              if pair}
    return {k: os.environ[k] for k in sorted(names) if k in os.environ}


def keep(config, measured):
    """Write what is measured so far (timed steps, calibration, summary) before the profiled
    steps. TensorFlow's profiler has aborted a worker in native code (heap corruption in
    stop()) after its timed steps: result.json then still holds them, with phase "profile",
    and the harness keeps the cell's timing (harness/run/launch.py salvage)."""
    result = _BUILDING.get("result")
    if result is None:  # not under run(): a self-check driving the trainer directly
        return
    result.update(measured)
    result.update(lifetime(result))
    result.update(status="profiling", phase="profile")
    write_json(os.path.join(config["out_dir"], nodefolder.RESULT), result)


def most_steps(config):
    """The steps a loop may time: epochs x steps_per_epoch, or the verdict size's ceiling
    (harness/plan/matrix.py Cell.total_steps, for the controller)."""
    epochs = config["epochs"]
    if config.get("precision"):
        epochs = max(epochs, config.get("max_epochs") or 0)
    return epochs * config["steps_per_epoch"]


def lifetime(result):
    """Start-up (process start to the end of the first step: imports, rendezvous, graph
    tracing, the first batch) and the measured execution (process start to the loop's end)."""
    started, first, ended = (result.get(k) for k in ("process_started", "first_step_ended",
                                                     "loop_ended"))
    out = {}
    if started and first:
        out["startup_seconds"] = first - started
    if started and ended:
        out["execution_seconds"] = ended - started
    return out


def model_ready(config, parameters, how, loaded_weights):
    """What every trainer does once its model is built (in the same-math check, from the
    canonical initial weights): writes those weights back as the framework holds them, a
    wrong conversion showing before any step (samemath LOADED; loaded_weights() reads them
    in the canonical layout), and logs the network, its parameters and how it trains."""
    if config["math"]:
        samemath.write_weights(config, loaded_weights(), samemath.LOADED)
    log(config, "%s: %d parameters, %s" % (config["network"], parameters, how))


def log(config, message):
    print("[%s rank %d] %s" % (config.get("node", "?"), config["rank"], message), flush=True)


def installed_version(name):
    """A distribution's version without importing it (importing mxnet in a server role runs
    the server; tf-keras has no __version__ when loaded through TF_USE_LEGACY_KERAS), or
    None when it is not installed (the paper stack has no tf-keras: TF 2.5 bundles Keras)."""
    try:
        from importlib import metadata  # novermin (guarded: falls back below on 3.6)
    except ImportError:  # Python < 3.8 (the paper stack)
        import pkg_resources
        try:
            return pkg_resources.get_distribution(name).version
        except pkg_resources.DistributionNotFound:
            return None
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None
