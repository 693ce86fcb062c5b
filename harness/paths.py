"""Where things live on the controller."""
import os
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "bench"
PLAYBOOKS = REPO / "playbooks"
INVENTORIES = REPO / "inventory"
STACKS = REPO / "stacks"


def cache_dir():
    """Controller cache (datasets, staged bench code); outside the clone so clones share it."""
    root = os.environ.get("DLBENCH_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "dlbench")
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path
