"""What was run: the command, the code, the time the cells took against the paper's length,
the nodes and the versions installed."""
import datetime
from pathlib import Path

import registry

from contract import runfolder


SHOWN_PACKAGES = registry.shown_packages() + ("numpy", "psutil")


def code_line(manifest):
    """The code the nodes ran (bench/ and contract/), as each training process hashed its
    own (result.json `code_digest`), against the controller's at the run's start (pre-flight
    refused nodes whose code differed)."""
    here, ran = manifest.get("code_digest"), manifest.get("code_ran") or []
    said = "node code (bench/, contract/): "
    if not here:
        return said + "not recorded (a run from before it was)"
    if not ran:
        return said + "digest %s on the controller; no process recorded its own" % here[:12]
    if ran == [here]:
        return said + "digest %s, the controller's, in every process that trained" % here[:12]
    return said + "**processes ran other code than the controller's** (digest %s): %s" % (
        here[:12], ", ".join(d[:12] for d in ran))


def time_line(run_path, groups, size, ids=None):
    """What the run's cells cost against the paper's length, in every report: the verdict
    size's budget (docs/methodology.md, "The verdict size") counts each setting's paper-scale
    time once, not once per repeat. ids: the cells counted (None: all)."""
    spent, launches = cells_seconds(run_path, ids), len(_statuses(run_path, ids))
    line = ("time: the cells took %s in %d launch(es), attempts set aside included (the "
            "contention probe and provisioning not counted)" % (minutes(spent), launches))
    paper = groups.execution_seconds.dropna() if len(groups) else groups
    if size == "paper" or not len(paper) or not spent:
        return line
    share = spent / paper.sum()
    line += ("; the same %d setting(s) at the paper's length: %s projected (each setting's "
             "paper-scale time once, the mean of its repeats), so this run took %.1f%% of it%s"
             % (len(paper), minutes(paper.sum()), 100 * share, _goal(share, size)))
    if share > 0.5:  # LeNet-5: start-up and the launches weigh more than the steps
        line += "; at that share, `--size paper` would measure the paper's length itself"
    return line


def _goal(share, size):
    """The verdict size's budget beside its share, and whether the run kept to it (rounded as
    the share is shown)."""
    if size != "verdict":
        return ""
    return " (the verdict size's goal: 5%%, %s)" % (
        "within it" if round(100 * share, 1) <= 5 else "over it")


def _statuses(run_path, ids=None):
    """Every launch's status file: the cells' and the attempts set aside (`<cell>.<n>`); ids:
    of these cells only (None: all)."""
    folder = Path(run_path)
    found = list(folder.glob("*/" + runfolder.STATUS)) + list(
        folder.glob("%s/*/%s" % (runfolder.ATTEMPTS, runfolder.STATUS)))
    return found if ids is None else [
        p for p in found if p.parent.name.rsplit(".", 1)[0] in ids or p.parent.name in ids]


def cell_ids(manifest):
    """The ids of a manifest's cells (a stack's view: that stack's)."""
    return {c.get("id") for c in manifest.get("cells") or []}


def cells_seconds(run_path, ids=None):
    """What the run's launches took, attempts set aside included; ids: these cells only."""
    return sum((runfolder.read_json(p, {}) or {}).get("seconds") or 0
               for p in _statuses(run_path, ids))


def minutes(seconds):
    return "%.0f s" % seconds if seconds < 120 else "%.1f min" % (seconds / 60)


def provenance(manifest, time_text=None):
    hosts = manifest.get("inventory", {}).get("hosts", [])
    facts = manifest.get("host_facts") or {}
    lines = ["- command: `%s`" % manifest.get("command", "?"),
             "- size: %s; stack: %s" % (manifest.get("size"),
                                          manifest.get("stack", {}).get("name")),
             "- git commit: %s%s" % (manifest.get("git", {}).get("commit"),
                                    " (uncommitted changes)" if manifest.get("git", {}).get(
                                        "dirty") else ""),
             "- " + code_line(manifest),
             "- started: %s; ended: %s" % (_when(manifest.get("started")),
                                          _when(manifest.get("ended")))]
    lines += ["- " + time_text] if time_text else []
    lines.append("- inventory `%s`: %d nodes" % (manifest.get("inventory", {}).get("name"),
                                                 len(hosts)))
    if any(h.get("connection") == "slurm" for h in hosts):
        lines.append("- launched through Slurm: every role a job step (`srun --overlap`), named "
                     "in its records (`slurm_step`); Slurm's account of each step in "
                     "`<cell>/sacct.txt`")
    nodes = [[h["name"], h["address"], h["vcpus"]] + [(facts.get(h["name"]) or {}).get(k, "?")
             for k in ("cpu_model", "cpu_count", "memory_mb", "kernel", "os",
                       "provisioned_through")] for h in hosts]
    versions = []
    for node, envs in sorted((manifest.get("installed") or {}).items()):
        for framework, env in sorted((envs or {}).items()):
            # distribution names as metadata spells them vary (tf_keras / tf-keras)
            pkgs = {k.replace("_", "-"): v for k, v in env.get("packages", {}).items()}
            shown = ", ".join("%s %s" % (k, pkgs[k]) for k in SHOWN_PACKAGES if k in pkgs)
            versions.append("%s / %s: Python %s; %s" % (node, framework, env.get("python"),
                                                         shown))
    return [("h2", "What was run"), ("list", [l[2:] for l in lines]),
            ("table", ["node", "address", "vcpus given", "CPU", "cores", "memory MB", "kernel",
                       "OS", "provisioned through"], nodes),
            ("p", "Installed versions (from each node's environments):"), ("list", versions)]


def _when(stamp):
    if not stamp:
        return "?"
    return datetime.datetime.fromtimestamp(stamp, datetime.timezone.utc).strftime(
        "%Y-%m-%d %H:%M:%S UTC")



def section(ctx):
    return provenance(ctx.manifest, time_line(ctx.run_path, ctx.groups, ctx.manifest.get("size"),
                                              ctx.ids))
