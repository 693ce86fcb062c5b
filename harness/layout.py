"""Placement: which roles run on which node for a system-mode (paper section IV-A), and the
ports each role uses, as offsets from the node's `base_port`."""
from .errors import UserError

# Offsets from a node's base_port; every node keeps base_port .. base_port+99 to itself.
PORTS = {
    "torch_master": 0,       # c10d rendezvous store (node 1)
    "mxnet_scheduler": 1,    # ps-lite scheduler (node 1)
    "agree": 2,              # the verdict profile's stop vote of a sync mode (worker 0, node 1)
    "tf_worker": 10,         # gRPC server of a TensorFlow worker
    "tf_ps": 11,             # gRPC server of a TensorFlow parameter server
    "tf_chief": 12,          # gRPC server of the TensorFlow coordinator (node 1)
    "tf_profiler_worker": 13,  # profiler service of a tensorflow-async worker (profiled steps)
    "tf_profiler_ps": 14,      # profiler service of a tensorflow-async parameter server
}


def port(node, name):
    return node.host.base_port + PORTS[name]


def roles(cell, nodes):
    """(node, role, rank) for every process of the cell, on its first `cell.nodes` nodes.
    Rank is the node's index: it picks the node's data shard and names its folder."""
    if cell.nodes > len(nodes):
        raise UserError("cell %s needs %d nodes; the inventory has %d"
                        % (cell.id, cell.nodes, len(nodes)),
                        "add hosts to the inventory or lower --nodes")
    used = nodes[:cell.nodes]
    if cell.framework == "pytorch" or (cell.framework == "tensorflow" and cell.mode == "sync"):
        return [(node, "worker", rank) for rank, node in enumerate(used)]  # all-reduce
    first = {"mxnet": "scheduler", "tensorflow": "chief"}[cell.framework]
    servers = "server" if cell.framework == "mxnet" else "ps"
    placed = [(used[0], first, 0)]
    placed += [(node, servers, rank) for rank, node in enumerate(used)]
    placed += [(node, "worker", rank) for rank, node in enumerate(used)]
    return placed


def tf_config(cell, nodes, role, rank):
    """TF_CONFIG for one TensorFlow process: every job's gRPC addresses, and this task."""
    used = nodes[:cell.nodes]

    def addresses(port_name):
        return ["%s:%d" % (n.host.address, port(n, port_name)) for n in used]
    cluster = {"worker": addresses("tf_worker")}
    if cell.mode == "async":
        cluster["ps"] = addresses("tf_ps")
        cluster["chief"] = addresses("tf_chief")[:1]
    return {"cluster": cluster, "task": {"type": role, "index": rank}}


def agree_address(cell, nodes):
    """host:port where worker 0 of a synchronous cell in the verdict profile takes the workers'
    stop votes (bench/common/agree.py); None where the workers decide alone or never."""
    if not cell.precision or cell.mode != "sync":
        return None
    return "%s:%d" % (nodes[0].host.address, port(nodes[0], "agree"))


def profiler_services(cell, nodes):
    """gRPC addresses of the profiler services of a tensorflow-async cell's servers (the
    chief asks them for a trace of the profiled steps); none for other system-modes."""
    if cell.system != "tensorflow-async" or not cell.profile_steps:
        return []
    return ["grpc://%s:%d" % (n.host.address, port(n, "tf_profiler_" + role))
            for role in ("worker", "ps") for n in nodes[:cell.nodes]]


def profiler_port(cell, node, role):
    if cell.system == "tensorflow-async" and cell.profile_steps and role in ("worker", "ps"):
        return port(node, "tf_profiler_" + role)
    return None
