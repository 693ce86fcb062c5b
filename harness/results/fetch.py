"""What each process of a cell wrote on its node, copied into the run's folder."""
import shlex
from pathlib import Path


def fetch_cell(path, status, nodes):
    """Copy every file each process wrote into results/<run>/<cell>/<node>/<role>-<rank>/."""
    by_name = {node.name: node for node in nodes}
    fetched = 0
    for proc in status.get("processes", []):
        if proc["node"] in status.get("unreachable", []):
            continue  # its files stay on it: `invoke collect` fetches them once it answers
        node = by_name[proc["node"]]
        local = path / status["cell_id"] / proc["node"] / ("%s-%d" % (proc["role"], proc["rank"]))
        local.mkdir(parents=True, exist_ok=True)
        listing = node.run("find %s -maxdepth 1 -type f ! -name '*.tmp' -print0"
                           % shlex.quote(proc["out_dir"]), check=False).stdout.split("\0")
        for remote in filter(None, listing):  # a path may hold spaces: NUL-separated
            node.get(remote, str(local / Path(remote).name))
            fetched += 1
    return fetched
