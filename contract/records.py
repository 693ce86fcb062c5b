"""records.jsonl, the run's measurements (collect writes them, selfcheck/known_run.py builds them,
analysis/tidy.py reads them): one JSON object per line, each one metric of one process of one
cell, or one cell's status. Every record carries the cell's keys, the run's, and the process's
(none for a status); its `unit` is the metric's, from METRICS: nothing else names a unit."""

# copied onto every record from the manifest's cell
CELL_KEYS = ("benchmark", "network", "dataset", "system", "framework", "mode", "repeat",
             "config_hash", "nodes", "local_batch", "epochs", "steps_per_epoch", "data",
             "link", "link_mbit")
RUN_KEYS = ("run_id", "cell_id", "stack")
PROCESS_KEYS = ("node", "role", "rank")

PHASES = ("loading", "forward", "backward", "communication")  # the paper's breakdown (V)
# what else ran on a process's node while the cell did (bench/common/interference.py)
INTERFERENCE = ("others_cpu", "steal", "pressure_cpu", "pressure_io", "runqueue_wait")
# a result's summary keys that become records: the step, the breakdown, the calibration's walls
SUMMARY = ("step",) + PHASES + ("forward_wall", "backward_wall", "update_wall")

METRICS = dict(
    [("status", "ok")]
    + [(name, "s/step") for name in SUMMARY]
    + [(name, "share") for name in INTERFERENCE]
    + [("train_seconds", "s"), ("startup_seconds", "s"), ("execution_seconds", "s"),
       ("wall_step", "s/step"), ("peak_rss_mb", "MB"), ("peak_own_rss_mb", "MB"),
       ("parameters", "count"), ("measured_steps", "steps"), ("warmup_steps", "steps"),
       ("step_samples", "steps"),  # value: how many; `samples`: the measured steps' times
       ("stop_halfwidth", "relative"),  # the verdict size's stop; `stopped_by`: why
       ("net_bytes_sent_per_step", "B"),
       ("profiled_step", "s/step"), ("operator", "s/step"),  # `op_path`, `calls`: which op
       ("slurm_elapsed_s", "s"), ("slurm_cpu_s", "s"), ("slurm_max_rss_mb", "MB")])  # sacct


def run_keys(run_id, cell_id, stack):
    return dict(zip(RUN_KEYS, (run_id, cell_id, stack)))


def process_keys(node, role, rank):
    """A process's keys (all None on a cell's status record)."""
    return dict(zip(PROCESS_KEYS, (node, role, rank)))


def record(base, metric, value, **extra):
    """One record: base (the cell's, run's and process's keys) with the metric, its value
    and its unit. A metric not in METRICS is an error: a misspelt one cannot pass unseen."""
    if metric not in METRICS:
        raise KeyError("records.jsonl has no metric %r (contract/records.py METRICS)" % metric)
    out = dict(base, metric=metric, value=value, unit=METRICS[metric])
    out.update(extra)
    return out
