"""A node's folder (the inventory's `workdir`), as provisioning makes it and a cell fills it:

    workdir/node-name                   the node's name: a folder two nodes share is found
    workdir/facts.json                  the host's facts (CPU, memory, versions)
    workdir/code/bench/                 the bench code provisioning unpacked
    workdir/data/<shard id>/            the node's dataset shards, shards.json their index
    workdir/runs/<run>/<cell>/<role>-<rank>/
        cell.json run.sh log.txt        what the controller wrote, and the process's output
        progress.json result.json rc    what the process says while and after it runs
        lease memory.csv profile.json   liveness, psutil samples, the operator profile
        slurm_step                      the job step that ran it (Slurm)

The controller's copy of a run keeps <cell>/<node>/<role>-<rank>/ (collect)."""

NODE_NAME, FACTS = "node-name", "facts.json"
CODE, DATA, RUNS = "code", "data", "runs"
SHARDS_INDEX = "shards.json"  # a split's index, beside its shards (written last)
CELL_CONFIG, SCRIPT, LOG = "cell.json", "run.sh", "log.txt"
PROGRESS, RESULT, EXIT_CODE = "progress.json", "result.json", "rc"
LEASE, MEMORY, OPERATORS, SLURM_STEP = "lease", "memory.csv", "profile.json", "slurm_step"


def code_dir(workdir):
    return "%s/%s" % (workdir, CODE)


def data_dir(workdir, shard_id):
    return "%s/%s/%s" % (workdir, DATA, shard_id)


def run_dir(workdir, run_id):
    return "%s/%s/%s" % (workdir, RUNS, run_id)


def role_dir(workdir, run_id, cell_id, role, rank):
    return "%s/%s/%s-%d" % (run_dir(workdir, run_id), cell_id, role, rank)


def fetched_results(cell_path):
    """The result.json of every process of a cell as collect keeps them (<node>/<role>/)."""
    return fetched(cell_path, RESULT)


def fetched(cell_path, name):
    """A file of every process of a cell as collect keeps them (<cell>/<node>/<role>/name)."""
    return sorted(cell_path.glob("*/*/" + name))
