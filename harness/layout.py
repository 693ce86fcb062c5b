"""Placement: which roles run on which node for a system-mode (paper section IV-A)."""
from .errors import UserError


def roles(cell, nodes):
    """(node, role, rank) for every process of the cell, on its first `cell.nodes` nodes."""
    if cell.nodes > len(nodes):
        raise UserError("cell %s needs %d nodes; the inventory has %d"
                        % (cell.id, cell.nodes, len(nodes)),
                        "add hosts to the inventory or lower --nodes")
    used = nodes[:cell.nodes]
    if cell.mode == "sync" and cell.framework == "pytorch":
        return [(node, "worker", rank) for rank, node in enumerate(used)]  # all-reduce
    raise UserError("no placement for %s" % cell.system)
