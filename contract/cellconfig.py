"""The keys of cell.json, which the controller writes (harness/run/launch.py) and every trainer
reads, in one place. A trainer checks the file when it loads it: a missing or unknown key, or
one of the wrong type, is an error naming the key, before any framework starts.
Python 3.6: a plain dict of key -> (types, meaning)."""

NUMBER = (int, float)
TEXT = (str,)
OPTIONAL_TEXT = (str, type(None))
LIST = (list,)

KEYS = {
    # the cell (harness/plan/matrix.py Cell): its id and settings
    "run_id": (TEXT, "the run's id"),
    "cell_id": (TEXT, "the cell's id: benchmark, system-mode, repeat, settings hash"),
    "benchmark": (TEXT, "network-dataset, Table III"),
    "system": (TEXT, "framework-mode"),
    "framework": (TEXT, "which bench/<framework>/ runs"),
    "mode": (TEXT, "sync or async"),
    "network": (TEXT, "lenet5, alexnet, resnet18 or resnet50"),
    "dataset": (TEXT, "cifar10 or cifar100"),
    "data": (TEXT, "synthetic or real"),
    "nodes": (NUMBER, "nodes the cell runs on"),
    "repeat": (NUMBER, "which repeat of the cell"),
    "epochs": (NUMBER, "epochs to run (the verdict size: the floor)"),
    "max_epochs": (NUMBER, "the verdict size's ceiling of epochs (0: fixed length)"),
    "steps_per_epoch": (NUMBER, "steps per epoch per worker"),
    "warmup_steps": (NUMBER, "first steps not measured"),
    "precision": (NUMBER, "the verdict size's target half-width (0: fixed length)"),
    "subset_images": (NUMBER, "images of the shard an epoch reads (0: the whole shard)"),
    "local_batch": (NUMBER, "images per worker and step"),
    "input_size": (NUMBER, "image side in pixels"),
    "profile_steps": (NUMBER, "profiled steps after the timed ones"),
    "link": (TEXT, "the emulated link's setting, or empty"),
    "stack": (TEXT, "the version set the cell runs under, or empty (the run's only one)"),
    "math": ((bool,), "the same-math check: canonical initial weights, the recorded batch "
                      "order, losses and final weights kept (bench/common/samemath.py)"),
    "planted": (TEXT, "the same-math check's planted error (tests), or empty"),
    "environment": (OPTIONAL_TEXT, "a factor's variables (invoke explain), also exported by the "
                                   "launch script: NAME=value;..."),
    "init_checksum": (TEXT, "the same-math check: the initial weights' sha256, or empty"),
    # training (harness/run/launch.py TRAINING): the same for every framework
    "lr": (NUMBER, "learning rate"),
    "momentum": (NUMBER, "SGD momentum"),
    "seed": (NUMBER, "random seed"),
    "interop_threads": (NUMBER, "inter-op threads"),
    "loader_workers": (NUMBER, "background loader threads or processes"),
    "calibration_warmup": (NUMBER, "calibration steps not measured"),
    "calibration_steps": (NUMBER, "calibration steps measured"),
    "calibration_seconds": (NUMBER, "calibration time budget (s)"),
    "calibrate_together": ((bool,), "the workers time their calibration at once, not in turn"),
    "sample_interval": (NUMBER, "psutil sampling period (s)"),
    "collective_timeout": (NUMBER, "s a collective may wait for a peer"),
    # this process: where it runs, what it reads, whom it talks to
    "node": (TEXT, "inventory name of the node"),
    "role": (TEXT, "worker, server, scheduler, ps or chief"),
    "rank": (NUMBER, "the node's index: its shard and its folder"),
    "world_size": (NUMBER, "workers in the cell"),
    "threads": (NUMBER, "compute threads (the node's vCPUs)"),
    "cpus": (TEXT, "CPUs to pin to, or empty"),
    "stack_environment": ((dict,), "environment variables of the stack"),
    "interface": (OPTIONAL_TEXT, "network interface between nodes"),
    "address": (TEXT, "this node's address"),
    "out_dir": (TEXT, "where result.json, memory.csv and the logs go"),
    "classes": (NUMBER, "classes of the dataset"),
    "label_bytes": (NUMBER, "label bytes per CIFAR record"),
    "shard": (TEXT, "this worker's shard file"),
    "full_data": (TEXT, "the whole training set on this node"),
    "full_data_by_worker": (LIST, "the whole training set's path on each worker's node"),
    "worker_nodes": (LIST, "the workers' node names"),
    "sharing": (LIST, "the cell's roles that share this node"),
    "waits_for": (LIST, "the cell's other processes (node/role-rank), whom this one waits for "
                        "in its framework's rendezvous (its progress names them meanwhile)"),
    "profiler_services": (LIST, "profiler services the coordinator asks for a trace"),
    "profiler_port": ((int, type(None)), "this process's profiler service port, or null"),
    "agree_address": (OPTIONAL_TEXT, "host:port of the stop vote, or null"),
}
OPTIONAL = {
    "check_every": (NUMBER, "steps between the stop rule's checks (default 10)"),
}


def check(config, source="cell.json"):
    """The config unchanged, or ValueError naming every missing, unknown or mistyped key."""
    problems = ["missing key %r (%s)" % (k, KEYS[k][1]) for k in KEYS if k not in config]
    problems += ["unknown key %r" % k for k in sorted(config)
                 if k not in KEYS and k not in OPTIONAL]
    for key, value in sorted(config.items()):
        types = (KEYS.get(key) or OPTIONAL.get(key) or (None,))[0]
        if types and not isinstance(value, types):
            problems.append("key %r is %s, expected %s" % (
                key, type(value).__name__, " or ".join(t.__name__ for t in types)))
    if problems:
        raise ValueError("%s: %s (the controller and bench/ differ: run the same commit on "
                         "both)" % (source, "; ".join(problems)))
    return config


def read(path):
    import json
    with open(path) as handle:
        return check(json.load(handle), path)
