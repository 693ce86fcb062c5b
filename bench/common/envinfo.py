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
    info = {"python": platform.python_version(),
            "packages": {name: version for name, version, _ in found},
            "record_sha256": {name: record_digest(record) for name, _, record in found}}
    if any(name in ("tensorflow", "tensorflow-cpu") for name, _, _ in found):
        info["default_kernels"] = tensorflow_default_kernels()
    return info


def cpu_flags():
    """The CPU's model and instruction-set flags (Linux), which TensorFlow's default reads."""
    try:
        with open("/proc/cpuinfo") as handle:
            text = handle.read()
    except OSError:
        return ""
    lines = [l for l in text.splitlines() if l.startswith(("model name", "flags"))]
    return "\n".join(sorted(set(lines)))


def tensorflow_default_kernels():
    """oneDNN or Eigen: what this TensorFlow release runs on this CPU by default, asked in a
    process of its own with TF_ENABLE_ONEDNN_OPTS unset (the package's scripts set it to 1 for
    the runs, docs/methodology.md). The answer depends on the release and the CPU: it is kept
    beside the environment, once per CPU, so that provisioning imports TensorFlow only once."""
    import os
    import subprocess
    import sys
    key = hashlib.sha256(cpu_flags().encode("utf-8")).hexdigest()[:16]
    cache = os.path.join(sys.prefix, "dlbench-default-kernels-%s.json" % key)
    if os.path.exists(cache):
        with open(cache) as handle:
            return json.load(handle)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("TF_ENABLE_ONEDNN_OPTS", None)
    ask = ("try:\n from tensorflow.python.util import _pywrap_util_port as port\n"
           "except ImportError:\n from tensorflow.python import _pywrap_util_port as port\n"
           "print('oneDNN' if port.IsMklEnabled() else 'Eigen')")
    done = subprocess.run([sys.executable, "-c", ask], env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=600)
    answer = {"library": done.stdout.strip().splitlines()[-1] if done.returncode == 0 and
              done.stdout.strip() else None,
              "read": "IsMklEnabled(), TF_ENABLE_ONEDNN_OPTS unset, at provisioning",
              "error": None if done.returncode == 0 else done.stderr.strip()[-300:]}
    if answer["library"]:
        try:
            with open(cache, "w") as handle:
                json.dump(answer, handle)
        except OSError:  # an environment this user may not write: ask again next time
            pass
    return answer


if __name__ == "__main__":
    print(json.dumps(describe()))
