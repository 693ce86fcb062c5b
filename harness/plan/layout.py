"""Placement: which roles run on which node for a system-mode (paper section IV-A), and the
ports each role uses, as offsets from the node's `base_port`; both from registry/systems.yml."""
import registry

from contract.errors import UserError

PORTS = registry.ports()


def port(node, name):
    return node.host.base_port + PORTS[name]


def roles(cell, nodes):
    """(node, role, rank) for every process of the cell, on its first `cell.nodes` nodes: the
    coordinator (if any) on node 1, then each of the system-mode's roles on every node.
    Rank is the node's index: it picks the node's data shard and names its folder."""
    if cell.nodes > len(nodes):
        raise UserError("cell %s needs %d nodes; the inventory has %d"
                        % (cell.id, cell.nodes, len(nodes)),
                        "add hosts to the inventory or lower --nodes")
    used = nodes[:cell.nodes]
    entry = registry.system(cell.system)
    placed = [(used[0], entry["coordinator"], 0)] if entry.get("coordinator") else []
    for role in entry["roles"]:
        placed += [(node, role, rank) for rank, node in enumerate(used)]
    return placed


def label(node, role, rank):
    """How the package names one process of a cell: node1/scheduler-0."""
    return "%s/%s-%d" % (node.name, role, rank)


def peers(cell, nodes, node, role, rank):
    """The cell's other processes, by label: whom a process waits for in its framework's
    rendezvous (every one registers there before any trains)."""
    return [label(n, r, k) for n, r, k in roles(cell, nodes)
            if (n.name, r, k) != (node.name, role, rank)]


def listening_port(cell, node, role, rank):
    """The port name this process listens on (registry `listens`: by role, or role-rank)."""
    listens = registry.system(cell.system)["listens"]
    return listens.get("%s-%d" % (role, rank)) or listens.get(role)


def launch_variables(cell, nodes, role, rank):
    """The launch template's rendezvous variables (registry `launch`): <name>_addr and
    <name>_port on node 1, and the cluster spec where the system-mode takes one."""
    out = {}
    for name, port_name in registry.system(cell.system)["launch"].items():
        if name == "cluster":
            out[port_name] = cluster_spec(cell, nodes, role, rank)
        else:
            out.update({name + "_addr": nodes[0].host.address,
                        name + "_port": port(nodes[0], port_name)})
    return out


def cluster_spec(cell, nodes, role, rank):
    """Every listening role's addresses, in rank order, and this process's task (the shape
    of TF_CONFIG)."""
    cluster = {}
    for node, other, other_rank in roles(cell, nodes):
        name = listening_port(cell, node, other, other_rank)
        if name:
            cluster.setdefault(other, []).append(
                "%s:%d" % (node.host.address, port(node, name)))
    return {"cluster": cluster, "task": {"type": role, "index": rank}}


def agree_address(cell, nodes):
    """host:port where worker 0 of a synchronous cell takes the workers' stop votes (the verdict
    size) or, at every size, holds the barriers of a system-mode whose registry entry says
    `barrier: agree` (bench/common/agree.py); None where neither applies."""
    voting = cell.precision and cell.mode == "sync"
    if not (voting or registry.system(cell.system).get("barrier") == "agree"):
        return None
    return "%s:%d" % (nodes[0].host.address, port(nodes[0], "agree"))


def profiler_services(cell, nodes):
    """gRPC addresses of the profiler services the coordinator asks for a trace of the
    profiled steps (registry `profiler`); none for most system-modes."""
    if not cell.profile_steps:
        return []
    services = registry.system(cell.system).get("profiler") or {}
    return ["grpc://%s:%d" % (n.host.address, port(n, services[role]))
            for role in services for n in nodes[:cell.nodes]]


def profiler_port(cell, node, role):
    services = registry.system(cell.system).get("profiler") or {}
    if cell.profile_steps and role in services:
        return port(node, services[role])
    return None
