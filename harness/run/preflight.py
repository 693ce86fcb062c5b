"""Before a run touches a node: every host reachable with working credentials, the stack's
environments present with the pinned versions, the dataset shards present with the checksums the
controller made, the node's bench/ code the controller's own (contract/codedigest.py: a run
never records one commit and runs another's trainers), the ports free, enough disk. One round trip per node; each failure names the
host and the fix, and every failure found is reported at once.
"""
import shlex
import time

import registry
from contract import codedigest

from . import mesh
from ..nodes import datasets
from ..plan import layout
from contract.errors import UserError
from contract import nodefolder

MIN_FREE_MB = 1024  # results of one cell are a few MB; a nearly full disk fails mid-run
PROVISION_FIX = "run `invoke provision` with the same --inventory, --stack, --size (and --nodes)"


def check(nodes, stack, cells, inv=None):
    began = time.monotonic()
    needs = {node.name: {"envs": {}, "files": {}, "ports": set()} for node in nodes}
    problems = []
    for cell in cells:
        index = _shard_index(cell)
        problems += _too_few_images(cell, index)
        _add_needs(needs, cell, nodes, stack, index)
    code = codedigest.digest()
    used = [node for node in nodes if needs[node.name]["envs"] or needs[node.name]["files"]]
    for node in used:
        needs[node.name]["code"] = code
        taken = node.unusable()  # a Slurm node drained or down, its allocation over
        problems += [taken] if taken else _check_node(node, needs[node.name])
    if not problems and mesh.needed(used):  # the nodes as they are; then the network between
        problems = mesh.check({node: needs[node.name]["ports"] for node in used})
    if problems:
        raise UserError("pre-flight found %d problem(s):\n  %s"
                        % (len(problems), "\n  ".join(problems)),
                        "fix each as it says, then run the same command again")
    for warning in inv.warnings() if inv else []:
        print("warning: %s" % warning)
    print("pre-flight: %d node(s) ready in %.1f s" % (sum(1 for n in needs.values() if n["envs"]),
                                                      time.monotonic() - began), flush=True)


def _shard_index(cell):
    return datasets.index_of(datasets.prepare(cell.dataset, cell.data, cell.nodes,
                                              progress=lambda m: None))


def _too_few_images(cell, index):
    """An epoch is steps_per_epoch batches of a worker's shard: it must hold that many."""
    needed = cell.steps_per_epoch * cell.local_batch
    held = min(shard["images"] for shard in index["shards"])
    if held >= needed:
        return []
    return ["%s: %d steps of %d images need %d per shard; the %s shards hold %d: lower --steps "
            "to %d at most (and raise --epochs)" % (cell.id, cell.steps_per_epoch,
                                                    cell.local_batch, needed, index["id"], held,
                                                    held // cell.local_batch)]


def _add_needs(needs, cell, nodes, stack, index):
    env = stack.env(cell.framework)
    for node, role, rank in layout.roles(cell, nodes):
        need = needs[node.name]
        need["envs"][env.framework] = env
        data = nodefolder.data_dir(node.path(node.host.workdir), index["id"]) + "/"
        shard = index["shards"][rank]
        need["files"][data + shard["file"]] = shard["md5"]
        if registry.system(cell.system).get("reads") == "whole-set":
            need["files"][data + index["full"]["file"]] = index["full"]["md5"]
        need["ports"].update(_ports(cell, node, role, rank))


def _ports(cell, node, role, rank):
    """The fixed ports this role listens on (the others are ephemeral)."""
    voting = role == "worker" and rank == 0 and layout.agree_address(cell, [node])
    listening = layout.listening_port(cell, node, role, rank)
    return ({layout.port(node, listening)} if listening else set()) | (
        {layout.port(node, "agree")} if voting else set())


def _check_node(node, need):
    """One shell round trip: disk, listening ports, env markers, shard checksums."""
    env_root = node.path(node.host.env_root)
    workdir = node.path(node.host.workdir)
    markers = ["%s/%s/.dlbench-complete" % (env_root, e.dirname) for e in need["envs"].values()]
    script = "\n".join([
        "mkdir -p %s 2>/dev/null; df -Pk %s | tail -1" % (shlex.quote(workdir),
                                                           shlex.quote(workdir)),
        "echo '#tcp'; cat /proc/net/tcp /proc/net/tcp6 2>/dev/null",
        "echo '#owner'; cat %s 2>/dev/null || echo MISSING"
        % shlex.quote(workdir + "/" + nodefolder.NODE_NAME),
        "echo '#code'; cd %s 2>/dev/null && [ -f bench/__init__.py ] && (%s) || echo MISSING"
        % (shlex.quote(nodefolder.code_dir(workdir)), codedigest.SHELL),
    ] + ["echo '#marker'; cat %s 2>/dev/null || echo MISSING" % shlex.quote(m)
         for m in markers] +
        ["echo '#md5'; md5sum %s 2>&1 || true"
         % " ".join(shlex.quote(f) for f in sorted(need["files"]))])
    out = node.run(script, check=False).stdout  # an unreachable host raises here, named
    disk, tcp, *rest = out.split("\n#")
    sections = {"marker": [], "md5": [], "code": [], "owner": []}
    for part in rest:
        kind, _, body = part.partition("\n")
        sections.setdefault(kind.strip("#"), []).append(body)
    return (_disk(node, workdir, disk) + _listening(node, tcp, need["ports"]) +
            _owner(node, workdir, "".join(sections["owner"])) +
            _code(node, need.get("code"), "".join(sections["code"])) +
            _envs(node, need["envs"], sections["marker"]) +
            _shards(node, need["files"], "".join(sections["md5"])))


def _disk(node, workdir, text):
    fields = text.split()
    free_mb = int(fields[3]) // 1024 if len(fields) >= 4 and fields[3].isdigit() else None
    if free_mb is None:
        return ["%s: could not read the free disk space of %s" % (node.name, workdir)]
    if free_mb < MIN_FREE_MB:
        return ["%s: only %d MB free under %s (a run needs %d MB): free some space or move "
                "`workdir`" % (node.name, free_mb, workdir, MIN_FREE_MB)]
    return []


def _listening(node, text, ports):
    """Ports in LISTEN state (st 0A) in /proc/net/tcp{,6}: `sl local_address rem st ...`."""
    busy = set()
    for line in text.splitlines():
        fields = line.split()
        if len(fields) > 3 and fields[3] == "0A" and ":" in fields[1]:
            busy.add(int(fields[1].rsplit(":", 1)[1], 16))
    taken = sorted(busy & ports)
    if taken:
        return ["%s: port(s) %s already in use (another run, or another program): stop it, or "
                "give the node another `base_port` in the inventory"
                % (node.name, ", ".join(map(str, taken)))]
    return []


def _owner(node, workdir, text):
    """The name provisioning wrote into the node's workdir: another node's means the two share
    the folder (a shared filesystem), or that it is stale; MISSING, a workdir provisioned
    before the marker existed, passes (the env and shard checks still apply)."""
    found = text.strip()
    if found in ("", "MISSING", node.name):
        return []
    return ["%s: its workdir %s holds node %s's marker: the two nodes share that folder (a "
            "shared filesystem, an NFS home), where their shards, progress files and results "
            "would collide; give each node its own, e.g. `workdir: ~/dlbench/{host}` ({host} "
            "is the node's name; the env_root may stay shared), then run `invoke provision` "
            "(it also rewrites a stale marker)" % (node.name, workdir, found)]


def _code(node, expected, text):
    """The node's bench/ against the controller's: the trainers that run are the ones whose
    commit the manifest records."""
    found = text.split()[0] if text.split() else "MISSING"
    if expected is None or found == expected:
        return []
    if found == "MISSING":
        return ["%s: no bench/ or contract/ code under its workdir: %s"
                % (node.name, PROVISION_FIX)]
    return ["%s: its bench/ and contract/ code is not this controller's (digest %s there, %s "
            "here: edited since the last provisioning, here or there): %s, which copies it" % (
                node.name, found[:12], expected[:12], PROVISION_FIX)]


def _envs(node, envs, markers):
    problems = []
    for env, marker in zip(envs.values(), markers):
        if marker.strip() == "MISSING":
            problems.append("%s: the %s environment (%s) is missing or incomplete: %s"
                            % (node.name, env.framework, env.dirname, PROVISION_FIX))
        elif sorted(marker.split()) != sorted(env.packages):
            problems.append("%s: the %s environment has %s, the stack pins %s: %s"
                            % (node.name, env.framework, " ".join(marker.split()),
                               " ".join(env.packages), PROVISION_FIX))
    return problems


def _shards(node, files, text):
    got = {}
    for line in text.splitlines():
        parts = line.split(None, 1)
        if len(parts) == 2 and len(parts[0]) == 32:
            got[parts[1].strip()] = parts[0]
    problems = []
    for path, md5 in sorted(files.items()):
        if path not in got:
            problems.append("%s: dataset file %s is missing: %s" % (node.name, path, PROVISION_FIX))
        elif got[path] != md5:
            problems.append("%s: dataset file %s has md5 %s, expected %s (corrupt or from "
                            "another split): %s" % (node.name, path, got[path], md5,
                                                    PROVISION_FIX))
    return problems
