"""Write JSON results atomically, so a reader (or a crash) never sees half a file."""
import json
import os


def write_json(path, data, durable=True):
    """durable=False skips fsync: for files rewritten every second (progress)."""
    tmp = path + ".tmp"
    with open(tmp, "w") as handle:
        json.dump(data, handle, indent=1, sort_keys=True)
        handle.flush()
        if durable:
            os.fsync(handle.fileno())
    os.replace(tmp, path)


def read_json(path):
    with open(path) as handle:
        return json.load(handle)
