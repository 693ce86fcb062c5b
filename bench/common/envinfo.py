"""`python -m bench.common.envinfo`: the env's Python version and installed distributions as
JSON, for the node's facts (playbooks/roles/host_facts). Runs under every stack's Python,
3.6 included, where importlib.metadata does not exist yet."""
import json
import platform


def distributions():
    try:
        from importlib import metadata  # novermin (guarded: pkg_resources below on 3.6/3.7)
        return {d.metadata["Name"].lower(): d.version for d in metadata.distributions()}
    except ImportError:
        import pkg_resources
        return {d.project_name.lower(): d.version for d in pkg_resources.working_set}


if __name__ == "__main__":
    print(json.dumps({"python": platform.python_version(), "packages": distributions()}))
