"""A digest of the code shipped to the nodes, bench/ and contract/, as it is on disk: the
controller's, each node's (pre-flight), and each training process's own (result.json), so
that a run records the code that ran and refuses nodes whose code is not the controller's.
The same figure as, in the folder above bench/:

    find bench contract -type f ! -name '*.pyc' ! -path '*/__pycache__/*' | LC_ALL=C sort \\
        | xargs sha256sum | sha256sum

which is how pre-flight reads it on a node without starting Python. Python 3.6.
"""
import hashlib
import os

SHIPPED = ("bench", "contract")  # the folders provisioning unpacks on every node
TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHELL = ("find %s -type f ! -name '*.pyc' ! -path '*/__pycache__/*' | LC_ALL=C sort "
         "| xargs sha256sum | sha256sum" % " ".join(SHIPPED))


def files(top=TOP):
    """top-relative paths ("bench/common/loop.py") of every shipped file but compiled ones."""
    found = []
    for shipped in SHIPPED:
        for folder, dirs, names in os.walk(os.path.join(top, shipped)):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for name in names:
                if not name.endswith(".pyc"):
                    path = os.path.join(folder, name)
                    found.append(os.path.relpath(path, top).replace(os.sep, "/"))
    return sorted(found)


def digest(top=TOP):
    lines = []
    for name in files(top):
        with open(os.path.join(top, name), "rb") as handle:
            lines.append("%s  %s\n" % (hashlib.sha256(handle.read()).hexdigest(), name))
    return hashlib.sha256("".join(lines).encode("utf-8")).hexdigest()
