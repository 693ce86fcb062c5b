"""A digest of bench/ as it is on disk: the controller's, each node's (pre-flight), and each
training process's own (result.json), so that a run records the code that ran and refuses
nodes whose code is not the controller's. The same figure as, in the folder above bench/:

    find bench -type f ! -name '*.pyc' ! -path '*/__pycache__/*' | LC_ALL=C sort \\
        | xargs sha256sum | sha256sum

which is how pre-flight reads it on a node without starting Python. Python 3.6.
"""
import hashlib
import os

BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHELL = ("find bench -type f ! -name '*.pyc' ! -path '*/__pycache__/*' | LC_ALL=C sort "
         "| xargs sha256sum | sha256sum")


def files(root=BENCH):
    """bench/-relative paths ("bench/common/loop.py") of every file but compiled ones."""
    found = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in names:
            if not name.endswith(".pyc"):
                path = os.path.join(folder, name)
                found.append("bench/" + os.path.relpath(path, root).replace(os.sep, "/"))
    return sorted(found)


def digest(root=BENCH):
    lines = []
    for name in files(root):
        with open(os.path.join(root, name[len("bench/"):]), "rb") as handle:
            lines.append("%s  %s\n" % (hashlib.sha256(handle.read()).hexdigest(), name))
    return hashlib.sha256("".join(lines).encode("utf-8")).hexdigest()
