"""The keys of result.json, which every process writes (bench/common/runner.py and the
trainers' train()) and the controller reads (harness/results/run_records.py and
run_manifest.py, harness/run/launch.py, invoke explain), in one place, as cellconfig.py is for cell.json. A key written
that is not here fails tests/test_local_cluster.py. Python 3.6: a plain dict."""

KEYS = {
    # provenance: runner.run, for every process, whatever happened
    "config": "cell.json as the process read it (rank and world size from the launcher)",
    "versions": "the framework's and numpy's versions in the process's env",
    "host": "the node's hostname", "python": "the interpreter's version", "pid": "its pid",
    "cpu": "the CPU as the process sees it (bench/common/cpuinfo.py)",
    "kernels": "the kernel library and ISA the framework says it runs (its kernels())",
    "code_digest": "the digest of the bench/ and contract/ code that ran "
                   "(contract/codedigest.py)",
    "environment": "the thread and stack variables the process saw",
    "status": "running, profiling, succeeded or failed", "phase": "train, profile or done",
    "started": "when run() began (epoch s)", "ended": "when it ended (epoch s)",
    "process_started": "the process's start (epoch s)",
    "error": "a failure's exception", "traceback": "and its traceback",
    "interference": "what else ran on the node meanwhile (bench/common/interference.py)",
    "peak_rss_mb": "the process's and its children's peak RSS (MB)",
    "peak_own_rss_mb": "the process's own peak RSS (MB)",
    # the timed loop (bench/common/loop.py) and the trainer
    "steps": "each timed step's phases", "step_samples": "each measured step's time (s)",
    "step_epochs": "the epoch of each measured step", "summary": "the steps' means per phase",
    "train_seconds": "the loop's wall time", "wall_step": "the loop's wall per step",
    "first_step_ended": "the end of the first step (epoch s)",
    "loop_ended": "the end of the loop (epoch s)",
    "startup_seconds": "process start to the end of the first step",
    "rendezvous_seconds": "of it, the wait in the framework's rendezvous for the cell's other "
                          "processes (bench/common/runner.py waiting)",
    "execution_seconds": "process start to the end of the loop",
    "stopped_by": "fixed, precision or ceiling: what ended the loop",
    "halfwidth": "the verdict size's relative half-width at the stop",
    "calibration": "the per-phase calibration passes (bench/common/breakdown.py)",
    "parameters": "the model's parameter count",
    "net_bytes_sent": "bytes the node sent during the loop", "net_bytes_recv": "and received",
    "net_steps": "the steps the byte counts cover (tensorflow-async: the chief's closures)",
    "per_worker": "tensorflow-async: the chief's summary of each worker's steps",
    "stopped": "tensorflow-async: when a worker or ps was told to stop",
    "kvstore_rank": "mxnet: the process's rank in the KVStore",
    "update_in_backward": "tensorflow-sync: the update is timed inside the backward phase",
    "math": "the same-math check's losses and weights (selfcheck/math_check.py)",
    "profile": "the operator profile's summary (bench/common/profile.py)",
}


def unknown(result):
    """The keys of a result that this file does not name."""
    return sorted(set(result) - set(KEYS))
