"""The system-modes' registry (registry/systems.yml): what the harness and the analysis need
to know of each system-mode, in one place. The harness and the analysis ask here; neither
names a framework itself (tests/test_registry.py checks it)."""
import functools
import re
from pathlib import Path

import yaml

FILE = Path(__file__).resolve().parent / "systems.yml"
# The paper as the package reads it: its setup (Table IV's steps and batch), its claims and
# their tolerances. The plan and the analysis take the paper's numbers from here, never as
# literals.
REQUIRED = ("framework", "mode", "template", "communication", "roles", "listens", "launch",
            "order", "colour")
OPTIONAL = ("coordinator", "services", "profiler", "timed_by", "reads", "barrier")
COMMUNICATION = ("all-reduce", "parameter-server")


@functools.lru_cache(maxsize=None)
def load(path=FILE):
    """{ports, frameworks, systems}, checked: a wrong entry fails here, naming it."""
    raw = yaml.safe_load(Path(path).read_text())
    for name, entry in raw["systems"].items():
        _check(name, entry, raw)
    return raw


def _check(name, entry, raw):
    where = "%s: system-mode %s" % (FILE.name, name)
    missing = [k for k in REQUIRED if k not in entry]
    unknown = [k for k in entry if k not in REQUIRED + OPTIONAL]
    if missing or unknown:
        raise ValueError("%s: missing %s, unknown %s" % (where, missing, unknown))
    if entry["framework"] not in raw["frameworks"]:
        raise ValueError("%s: framework %s is not under frameworks" % (where, entry["framework"]))
    if "barrier" in entry and (entry["barrier"] != "agree" or entry["mode"] != "sync"):
        raise ValueError("%s: barrier can only be `agree`, in a sync mode" % where)
    if entry["communication"] not in COMMUNICATION:
        raise ValueError("%s: communication must be one of %s" % (where, COMMUNICATION))
    ports = list(entry["listens"].values()) + list((entry.get("profiler") or {}).values())
    ports += [p for k, p in entry["launch"].items() if k != "cluster"]
    bad = [p for p in ports if p not in raw["ports"]]
    if bad:
        raise ValueError("%s: ports %s are not under ports" % (where, bad))


def systems(manifest=None):
    """system-mode -> entry: the run's own (its manifest's `systems`) over this registry's."""
    return dict(load()["systems"], **((manifest or {}).get("systems") or {}))


def system(name, manifest=None):
    return systems(manifest)[name]


def frameworks():
    return load()["frameworks"]


def vm_smoke():
    """The system-mode VM checks run by default (the smallest framework install)."""
    return load()["vm_smoke"]


def ports():
    return load()["ports"]


def firewall_table():
    """The firewall table of docs/reproducing.md, as markdown lines: each fixed port (offset
    from base_port), who listens, and the system-modes that use it, from this registry."""
    raw = load()
    users = {name: [] for name in raw["ports"]}
    for system, entry in raw["systems"].items():
        named = list(entry["listens"].values()) + list((entry.get("profiler") or {}).values())
        named += [p for k, p in entry["launch"].items() if k != "cluster"]
        named += ["agree"] if entry["mode"] == "sync" else []
        for port in dict.fromkeys(named):
            users[port].append(system)
    lines = ["| port (TCP) | who listens | system-modes |", "| --- | --- | --- |",
             "| 22 | sshd on every node, from the controller (not on Slurm: job steps) | all |",
             "| 1 | nothing: the controller's liveness probe during a cell expects a refusal; "
             "where a firewall drops it, the probe uses 22 | all |"]
    for name, offset in sorted(raw["ports"].items(), key=lambda item: item[1]):
        when = ", ".join(users[name])
        if name == "agree":
            barriers = [s for s, e in raw["systems"].items() if e.get("barrier") == "agree"]
            when += " (verdict size%s)" % "".join("; %s in every size" % s
                                                     for s in barriers)
        elif name.startswith("tf_profiler"):
            when += " (profiled steps)"
        lines.append("| base_port + %d | %s | %s |" % (offset, raw["listeners"][name], when))
    lines.append("| 1024-65535 | Gloo pairs and ps-lite servers and workers bind ephemeral ports "
                 "| pytorch-sync, mxnet-sync, mxnet-async |")
    return lines


def ordered(names):
    """System-modes in the registry's display order; unknown names last, sorted."""
    known = systems()
    return (sorted((n for n in names if n in known), key=lambda n: known[n]["order"])
            + sorted(n for n in names if n not in known))


def shown_packages():
    """Every framework's packages that the report lists, in the registry's order."""
    return tuple(p for f in frameworks().values() for p in f["shown"])


def version_packages():
    """Version name (as the paper's reference spells it) -> the packages that give it."""
    return {f["version"]["name"]: tuple(f["version"]["packages"])
            for f in frameworks().values()}


def caching_frameworks():
    """Display names of the frameworks whose input pipeline caches the data after epoch 1."""
    return [f["name"] for f in frameworks().values() if f.get("caches_input")]


def for_manifest(names):
    """The entries of the system-modes a run uses, for its manifest."""
    every = systems()
    return {n: every[n] for n in sorted(set(names)) if n in every}


FACTORS = Path(__file__).resolve().parent / "factors.yml"
APPLY = ("environment", "stack", "threads", "network", "releases")
RELEASES = Path(__file__).resolve().parent / "releases.yml"
PLAIN = re.compile(r"^[A-Za-z0-9_.+-]+$")


@functools.lru_cache(maxsize=None)
def releases(path=RELEASES):
    """{base, frameworks: {framework: [{release, packages, environment}]}} (releases.yml),
    checked: a wrong entry fails here, naming it."""
    raw = yaml.safe_load(Path(path).read_text())
    where = Path(path).name
    if not raw.get("base") or not PLAIN.match(str(raw["base"])):
        raise ValueError("%s: `base:` must name a stack in stacks/" % where)
    for framework, entries in (raw.get("frameworks") or {}).items():
        if framework not in frameworks():
            raise ValueError("%s: %s is not a framework (%s)" % (where, framework,
                                                                   sorted(frameworks())))
        seen = [str(e.get("release")) for e in entries]
        bad = [r for r in seen if not re.match(r"^[0-9][A-Za-z0-9.]*$", r)]
        if bad or len(set(seen)) != len(seen) or len(seen) < 2:
            raise ValueError("%s: %s needs two or more distinct releases of digits and dots "
                             "(got %s)" % (where, framework, seen))
        if not all(e.get("packages") for e in entries):
            raise ValueError("%s: every %s release needs `packages:`" % (where, framework))
    return raw


def release_stack(framework, release, path=RELEASES):
    """The name of the stack made from one release (stacks.load builds it)."""
    return "%s+%s-%s" % (releases(path)["base"], framework, release)


def _release_levels(entry, where):
    """A factor applied by `releases: <framework>` climbs that framework's releases."""
    framework = entry["apply"]["releases"]
    listed = (releases()["frameworks"] or {}).get(framework)
    if not listed:
        raise ValueError("%s: releases.yml lists no releases of %s" % (where, framework))
    entry["levels"] = [{"value": str(r["release"]), "name": "%s %s" % (
        frameworks()[framework].get("name", framework), r["release"])} for r in listed]
    entry.setdefault("paper", str(listed[0]["release"]))
    entry.setdefault("today", str(listed[-1]["release"]))
    entry.setdefault("frameworks", [framework])


@functools.lru_cache(maxsize=None)
def factors(path=FACTORS):
    """name -> factor (registry/factors.yml), checked: a wrong entry fails here, naming it."""
    raw = yaml.safe_load(Path(path).read_text())["factors"]
    known = set(frameworks())
    for name, entry in raw.items():
        where = "%s: factor %s" % (Path(path).name, name)
        if "releases" in (entry.get("apply") or {}):
            _release_levels(entry, where)
        values = [str(level["value"]) for level in entry.get("levels") or []]
        how = [k for k in (entry.get("apply") or {}) if k in APPLY]
        if len(values) < 2 or len(how) != 1 or len(entry["apply"]) != 1:
            raise ValueError("%s: needs two or more levels and one apply of %s" % (where, APPLY))
        if str(entry.get("paper")) not in values or str(entry.get("today")) not in values:
            raise ValueError("%s: paper and today must be among its levels %s" % (where, values))
        if not set(entry.get("frameworks") or known) <= known:
            raise ValueError("%s: frameworks must be among %s" % (where, sorted(known)))
        variable = entry["apply"].get("environment")
        if variable is not None and not re.match(r"^[A-Z_][A-Z0-9_]*$", str(variable)):
            raise ValueError("%s: %r is not an environment variable's name" % (where, variable))
        bad = [v for v in values if not PLAIN.match(v)]
        if bad:
            raise ValueError("%s: levels %s must be plain words" % (where, bad))
    return raw


def level_values(factor):
    """A factor's levels (factors.yml), as the strings plans and explanations compare."""
    return [str(level["value"]) for level in factor["levels"]]


def level_name(factor, value):
    names = {str(level["value"]): level.get("name", str(level["value"]))
             for level in factor["levels"]}
    return names[str(value)]
