"""Build one framework env with uv: `uv venv`, then `uv pip install` of the env's pins.

Run on the node by a Python beside which uv is installed (the tools' venv, or the
controller's on the local cluster). uv does not read
pip's configuration, and a node's pip configuration is part of what it installs from (a local
wheel cache, a private index, a constraints file, a proxy's certificate): the settings that
`pip config list` shows, from files and PIP_* variables alike, are handed to uv as the flags
and variables that mean the same. A setting uv has no counterpart for stops the build with its
name and the fix, rather than an env that differs from what pip would have installed.

    python uv_build_env.py --python PY --env DIR [--compile] [--wheelhouse DIR]
                           [--pip-args "ARGS"] -- PACKAGE ...
    python uv_build_env.py --into PY [--compile] -- -r requirements.txt

The second form is `make venv`'s: the controller's own packages, by the same rules.
"""
import argparse
import ast
import os
import shlex
import subprocess
import sys

# pip settings that carry over, as uv flags (one per value; a value may list several)
FLAGS = {
    "index-url": "--index-url",
    "extra-index-url": "--extra-index-url",
    "find-links": "--find-links",
    "constraint": "--constraints",
    "trusted-host": "--allow-insecure-host",
    "only-binary": "--only-binary",
    "no-binary": "--no-binary",
}
# pip settings that carry over as environment variables
VARIABLES = {"cert": "SSL_CERT_FILE", "proxy": "HTTPS_PROXY", "timeout": "UV_HTTP_TIMEOUT",
             "default-timeout": "UV_HTTP_TIMEOUT"}
SWITCHES = {"no-index": "--no-index", "pre": "--prerelease=allow"}
# settings about pip's own screen, cache or bookkeeping: nothing that changes what is installed
IGNORED = {"disable-pip-version-check", "cache-dir", "no-cache-dir", "progress-bar", "quiet",
           "verbose", "root-user-action", "no-warn-script-location", "break-system-packages",
           "require-virtualenv", "no-input", "retries", "log", "no-color", "user", "upgrade",
           "format"}
MARKER = ".dlbench-complete"  # framework_envs/tasks/main.yml: the env is complete
# pip picks the best version over every index; uv's default stops at the first that has one
SAME_AS_PIP = ["--index-strategy", "unsafe-best-match"]
# the flags that say where packages come from, which `uv venv` takes too (for its seed, pip)
WHERE_FROM = {"--index-url", "--extra-index-url", "--find-links", "--no-index",
              "--allow-insecure-host"}


def pip_settings(listing):
    """{key: value} from `pip config list` lines ("global.find-links='/opt/wheels'"); the
    environment's PIP_* (":env:.") over install's over global's, as pip reads them."""
    rank = {"global": 0, "install": 1, ":env:": 2}
    found = {}
    for line in listing.splitlines():
        name, sep, value = line.partition("=")
        section, _, key = name.rpartition(".")
        if not sep or section not in rank:
            continue
        if key not in found or found[key][0] <= rank[section]:
            found[key] = (rank[section], ast.literal_eval(value))
    return {key: value for key, (_, value) in found.items()}


def uv_options(settings):
    """(flags, environment) for uv that say what the pip settings say; ValueError naming a
    setting that has no counterpart."""
    flags, variables = [], {}
    for key, value in sorted(settings.items()):
        if key in FLAGS:
            flags += [part for each in value.split() for part in (FLAGS[key], each)]
        elif key in VARIABLES:
            variables[VARIABLES[key]] = value
        elif key in SWITCHES:
            flags += [SWITCHES[key]] if _true(value) else []
        elif key not in IGNORED:
            raise ValueError(key)
    return flags, variables


def where_from(flags):
    """The flags (and their values) among uv's that say where packages come from."""
    kept, keep = [], False
    for flag in flags:
        if flag.startswith("--"):
            keep = flag.split("=")[0] in WHERE_FROM
        if keep:
            kept.append(flag)
    return kept


def _true(value):
    return value.strip().lower() in ("1", "true", "yes", "on")


def read_pip_settings(python):
    done = subprocess.run([python, "-m", "pip", "config", "list"], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True)
    if done.returncode != 0:
        sys.exit("cannot read pip's settings (%s -m pip config list): %s"
                 % (python, done.stderr.strip()))
    return pip_settings(done.stdout)


def main(argv):
    options = parse(argv)
    uv = os.path.join(os.path.dirname(sys.executable), "uv")
    flags, variables = sources(options.wheelhouse)
    environment = dict(os.environ, **variables)
    python = options.into
    if options.env:  # seeded with pip, which `invoke reference-check` installs with
        run([uv, "venv", "--quiet", "--clear", "--seed", "--python", options.python,
             options.env] + SAME_AS_PIP + where_from(flags), environment)
        python = os.path.join(options.env, "bin", "python")
    install = [uv, "pip", "install", "--quiet", "--python", python] + SAME_AS_PIP + flags
    install += shlex.split(options.pip_args) + (["--compile-bytecode"] if options.compile else [])
    print("uv settings from pip's: %s" % (" ".join(flags + sorted(variables)) or "none"))
    run(install + options.packages, environment)
    if options.env:  # written last, as the playbook's marker: a host sharing the root skips it
        with open(os.path.join(options.env, MARKER), "w") as marker:
            marker.write("".join(package + "\n" for package in options.packages))


def parse(argv):
    parser = argparse.ArgumentParser()
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--env", help="a new env, made by `uv venv` with --python")
    where.add_argument("--into", help="the Python of an env that exists (the controller's)")
    parser.add_argument("--python", help="the interpreter of a new env")
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--wheelhouse", default="")
    parser.add_argument("--pip-args", default="")
    parser.add_argument("packages", nargs="+")
    options = parser.parse_args(argv)
    if options.env and not options.python:
        parser.error("--env needs --python")
    return options


def sources(wheelhouse):
    """(uv flags, environment variables) that say where packages come from: the wheelhouse
    alone (no index, no setting of the node's), else what pip's settings say."""
    if wheelhouse:
        return ["--no-index", "--find-links", wheelhouse], {}
    try:
        return uv_options(read_pip_settings(sys.executable))
    except ValueError as error:
        sys.exit("pip setting %r has no uv counterpart known here: take it out of the pip "
                 "configuration; for a node's envs, `env_installer: pip` in the inventory "
                 "builds them with pip instead" % str(error))


def run(command, environment):
    done = subprocess.run(command, env=environment)
    if done.returncode != 0:
        sys.exit("%s exited with %d" % (" ".join(shlex.quote(c) for c in command[:3]),
                                        done.returncode))


if __name__ == "__main__":
    main(sys.argv[1:])
