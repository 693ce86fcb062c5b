"""`python -m bench.common.envinfo`: the env's Python version, installed distributions and a
digest of each one's installed files as JSON, for the node's facts
(playbooks/roles/host_facts) and the artifact (ENVIRONMENTS.json). Runs under every stack's
Python, 3.6 included, where importlib.metadata does not exist yet."""
import hashlib
import json
import platform


def distributions():
    """[(name, version, RECORD text or None)] of every installed distribution."""
    try:
        from importlib import metadata  # novermin (guarded: pkg_resources below on 3.6/3.7)
        return [(d.metadata["Name"].lower(), d.version, d.read_text("RECORD"))
                for d in metadata.distributions()]
    except ImportError:
        import pkg_resources
        return [(d.project_name.lower(), d.version,
                 d.get_metadata("RECORD") if d.has_metadata("RECORD") else None)
                for d in pkg_resources.working_set]


def record_digest(record):
    """sha256 of a distribution's RECORD, pip's list of every file it installed with each
    file's own sha256: a rebuilt environment whose digests match has the same files. Lines are
    sorted, as the order of RECORD is the installer's; files outside site-packages ("../",
    the console scripts, whose first line names the environment's own path) are left out.
    None where there is no RECORD (a package installed without pip)."""
    if not record:
        return None
    lines = sorted(line for line in record.splitlines()
                   if line.strip() and not line.startswith("../"))
    return hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()


def describe():
    found = distributions()
    return {"python": platform.python_version(),
            "packages": {name: version for name, version, _ in found},
            "record_sha256": {name: record_digest(record) for name, _, record in found}}


if __name__ == "__main__":
    print(json.dumps(describe()))
