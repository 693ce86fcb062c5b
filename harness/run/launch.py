"""One cell on every node at once: render per-node scripts, start every role, watch, stop.

Whatever happens (success, a dead process, a timeout, Ctrl-C), every process the cell started is
killed by its recorded pid on every node before this returns.
"""
import json
import shlex
import time
from dataclasses import dataclass, field

import jinja2

from . import contention, interrupts, settings, stall
from ..plan import layout
from ..nodes import access as nodes_mod
from ..nodes.datasets import full_name, shard_name
from contract.errors import UserError
from ..plan.matrix import SYSTEMS
from ..paths import BENCH
from .progress import CellProgress, RunSoFar
from contract import cellconfig, nodefolder

SALVAGED = "operator profile incomplete"  # the warning of a cell kept after a fault
POLL_SECONDS = 1.0
POLL_TIMEOUT = 5.0    # s a node may take to answer a poll before it is checked for life
REACH_TIMEOUT = nodes_mod.REACH_TIMEOUT
SLOW_LIMIT = 120.0    # s a live node may go without answering a poll before the cell fails
KILL_TIMEOUT = 20.0   # s to stop one process (TERM, grace, KILL) before the node is given up
# s without a poll after which a role stops itself (bench/templates/_lease.sh.j2): a dead
# controller or a cut link leaves nothing running for longer
LEASE_SECONDS = 30  # times the nodes' slowness (stall.Bounds): an emulated VM's polls lag
LEASE_VARIABLE = "DLBENCH_LEASE_SECONDS"  # a shorter lease for the dead-controller tests
# a shorter calibration for the tests' cells, whose forward and backward nobody reads as a
# measurement: the 10 passes alone, not a second of them (docs/methodology.md, the breakdown)
CALIBRATION_VARIABLE = "DLBENCH_CALIBRATION_SECONDS"


def base_lease():
    """LEASE_SECONDS, or DLBENCH_LEASE_SECONDS where set: at least 10 s, several of the watch
    loop's polls on a busy machine."""
    return settings.seconds(LEASE_VARIABLE, float(LEASE_SECONDS), 10.0)


def calibration_seconds():
    """TRAINING's least time of calibration passes, or DLBENCH_CALIBRATION_SECONDS where set."""
    return settings.seconds(CALIBRATION_VARIABLE, TRAINING["calibration_seconds"], 0.0)


def lease_seconds(bounds):
    return base_lease() * (bounds.slowness if bounds else 1.0)

# Settings every trainer reads from cell.json; the same for all frameworks (methodology.md).
TRAINING = {
    "lr": 0.01, "momentum": 0.9, "seed": 0,
    "interop_threads": 1,       # inter-op pool; compute threads come from the node's vcpus
    "loader_workers": 1,        # background loader processes/threads per worker
    "calibration_warmup": 2, "calibration_steps": 10, "calibration_seconds": 1.0,
    "sample_interval": 0.5,     # psutil sampling period (s)
    "collective_timeout": 300,  # s a collective may wait for a peer before failing
}


@dataclass
class Process:
    """One role of a cell on one node."""
    node: object
    role: str
    rank: int
    out_dir: str
    script: str = ""
    config: dict = field(default_factory=dict)
    pid: int = 0
    rc: object = None
    slow_since: float = 0.0  # when its node began to miss polls while still answering TCP
    next_poll: float = 0.0  # monotonic time of its next poll
    progress: dict = field(default_factory=dict)
    service: bool = False  # runs until the harness stops it (registry `services`)
    killed_hard: list = field(default_factory=list)  # pids that needed a KILL to stop
    lingered: str = ""  # why it was stopped after writing its result (it did not exit)
    stalled: bool = False  # its progress stood still: asked for its stacks before the stop
    halted: bool = False  # it or its trainer is stopped by a signal (state T), as last polled

    @property
    def label(self):
        return layout.label(self.node, self.role, self.rank)


def environment():
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(BENCH / "templates")),
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                             trim_blocks=True, lstrip_blocks=True,
                             autoescape=False)
    env.filters["q"] = lambda value: shlex.quote(str(value))
    return env


def sample_interval(lease):
    """The sampler's period, times the nodes' slowness (the lease carries it): each sample
    walks the process table, 2-5 ms here and 50x that on an emulated CPU, where three roles
    sampling twice a second took half of a VM's one vCPU."""
    return TRAINING["sample_interval"] * max(1.0, lease / base_lease())


def calibration(lease):
    """The calibration's passes on these nodes: TRAINING's, or none where the nodes compute 3x
    or more slower than an ordinary machine (the lease is stretched then: emulated CPUs, whose
    times the report compares with nothing): forward and backward are then not measured, and
    the cell's breakdown says so. Each worker times its passes alone, in turn: a pass of
    LeNet-5 took about 16 s on a VM under QEMU's TCG, and the untimed pass and 1 timed pass of
    2 VMs' workers about a minute of a 4-step cell."""
    if lease <= base_lease():
        return {}
    return {"calibration_warmup": 0, "calibration_steps": 0, "calibration_seconds": 0}


def calibrate_together(probe, bounds=None, nodes=()):
    """Whether the workers time their calibration passes at once: only where the run's
    contention probe found no sharing (not where it found sharing or could not rule it out),
    on nodes the inventory does not put on common CPUs of one machine (`nodes`, the cell's),
    of an ordinary machine's speed. There another worker's load is not on this node's cores,
    and the calibration takes one worker's time instead of every worker's (bench/common/
    loop.py, in_turn; what it moved, docs/methodology.md)."""
    probe = probe or {}
    return bool(probe) and not probe.get("shared") and not probe.get("undecided") and \
        not contention.overlapping(nodes) and (bounds.slowness if bounds else 1.0) < 3


def prepare(cell, run_id, nodes, stack, shards, lease=None, together=False):
    """The processes of a cell with their rendered scripts and cell.json (written at start:
    the hooks' prepare stage may add to it); `~/` paths are made absolute with each node's
    home (node.path asks it once)."""
    lease = base_lease() if lease is None else lease
    system = SYSTEMS[cell.system]
    template = environment().get_template(system["template"])
    python_rel = stack.env(cell.framework)
    used = nodes[:cell.nodes]
    data_dirs = [nodefolder.data_dir(n.path(n.host.workdir), shards["id"]) for n in used]
    calibrating = {"calibration_steps": cell.calibration_steps or TRAINING["calibration_steps"],
                   "calibration_seconds": calibration_seconds(), "calibrate_together": together}
    calibrating.update(calibration(lease))  # none at all on slow nodes
    processes = []
    for node, role, rank in layout.roles(cell, nodes):
        host = node.host
        workdir = node.path(host.workdir)
        out_dir = nodefolder.role_dir(workdir, run_id, cell.id, role, rank)
        config = dict(cell.settings, **TRAINING)
        config.update(calibrating)
        config.update(
            run_id=run_id, cell_id=cell.id, node=node.name, role=role, rank=rank,
            world_size=cell.nodes, threads=cell.threads or host.vcpus, cpus=host.cpus,
            stack_environment=dict(python_rel.environment, **cell.exported),
            interface=host.cluster_interface,
            input_size=cell.input_size, address=host.address,
            out_dir=out_dir, classes=shards["classes"], label_bytes=shards["label_bytes"],
            shard="%s/%s" % (data_dirs[rank], shard_name(rank, cell.nodes)),
            full_data="%s/%s" % (data_dirs[rank], full_name(cell.nodes)),
            full_data_by_worker=["%s/%s" % (d, full_name(cell.nodes)) for d in data_dirs],
            worker_nodes=[n.name for n in used], sharing=sharing(cell, nodes, node),
            waits_for=layout.peers(cell, nodes, node, role, rank),
            profiler_services=layout.profiler_services(cell, nodes),
            profiler_port=layout.profiler_port(cell, node, role),
            subset_images=cell.subset_images, agree_address=layout.agree_address(cell, nodes),
            planted="", init_checksum="", sample_interval=sample_interval(lease))
        cellconfig.check(config, "the cell.json of %s/%s-%d" % (node.name, role, rank))
        variables = dict(config, system=cell.system, code_dir=nodefolder.code_dir(workdir),
                         lease_seconds=int(lease),
                         python=python_rel.python(node.path(host.env_root)),
                         **layout.launch_variables(cell, nodes, role, rank))
        processes.append(Process(node=node, role=role, rank=rank, out_dir=out_dir,
                                 script=template.render(**variables), config=config,
                                 service=role in system.get("services", ())))
    return processes


def sharing(cell, nodes, node):
    """The roles of this cell that share `node` (recorded in every result: fairness)."""
    return ["%s-%d" % (role, rank) for n, role, rank in layout.roles(cell, nodes) if n is node]


def start(processes):
    """Each node's role folders made afresh with their files in one command, then its roles
    started in one more, in the cell's order. Over SSH each command starts the user's shell
    on the node, about 100 ms of its CPU where ~/.bashrc initialises pyenv or conda: one
    command per file and role counted as another program's CPU in the windows of the roles
    started first (docs/methodology.md, "Interference")."""
    nodes = by_node(processes)
    for node, procs in nodes:
        node.run("set -e\n" + "\n".join(folder_command(proc) for proc in procs))
    for node, procs in nodes:
        started = node.start_roles([proc.out_dir for proc in procs], nodefolder.SCRIPT,
                                   nodefolder.LOG)
        for proc, pid in zip(procs, started):
            proc.pid = pid


def by_node(processes):
    """[(node, its processes in the given order)], the nodes in the order they first appear."""
    grouped = {}
    for proc in processes:
        grouped.setdefault(id(proc.node), (proc.node, []))[1].append(proc)
    return list(grouped.values())


def folder_command(proc):
    """The shell lines that make the role's folder afresh (an earlier attempt's files, fetched
    already, must not be read as this one's: its rc) and write its script and cell.json."""
    folder = shlex.quote(proc.out_dir)
    return "\n".join([
        "rm -rf %s\nmkdir -p %s" % (folder, folder),
        file_command(proc.out_dir + "/" + nodefolder.SCRIPT, proc.script),
        file_command(proc.out_dir + "/" + nodefolder.CELL_CONFIG,
                     json.dumps(proc.config, indent=1))])


def file_command(path, text):
    quoted = shlex.quote(path)
    return "cat > %s.tmp <<'DLBENCH_EOF'\n%sDLBENCH_EOF\nmv %s.tmp %s" % (
        quoted, text if text.endswith("\n") else text + "\n", quoted, quoted)


def write_file(node, path, text):
    node.run(file_command(path, text))


def poll(proc, slowness=1.0):
    """Refresh progress, exit code and liveness of one process in one round trip, and renew
    its lease. Liveness is read before rc: a process seen dead has already written its rc, if
    it ever will. A node whose kernel stops answering TCP within REACH_TIMEOUT (node.answers,
    asked every few seconds while the poll waits) is gone, and fails the cell at once; one
    that is there but too busy to answer within POLL_TIMEOUT (an emulated VM's CPU) is given
    SLOW_LIMIT. Both bounds are times the nodes' slowness: a new SSH connection alone takes
    seconds of an emulated CPU."""
    try:
        progress_text, ps_text, rc_text = proc.node.bounded(
            lambda: proc.node.poll_files(proc.out_dir, proc.pid), POLL_TIMEOUT * slowness,
            reach=REACH_TIMEOUT)
    except nodes_mod.NodeGone:
        raise
    except UserError:
        proc.slow_since = proc.slow_since or time.monotonic()
        if not proc.node.answers(REACH_TIMEOUT):
            raise
        if time.monotonic() - proc.slow_since > SLOW_LIMIT * slowness:
            raise UserError("%s accepts connections but has answered no poll for %.0f s"
                            % (proc.node.name, SLOW_LIMIT * slowness),
                            "the node is overloaded: give it more CPU or fewer roles")
        return True  # there, but busy: no news of it this time
    proc.slow_since = 0.0
    try:
        proc.progress = json.loads(progress_text) if progress_text.strip() else proc.progress
    except ValueError:
        pass  # caught between write and rename on a filesystem without atomic rename
    rc_text = rc_text.strip()
    proc.rc = int(rc_text) if rc_text.lstrip("-").isdigit() else None
    proc.halted = nodes_mod.stopped(ps_text)
    return nodes_mod.alive(ps_text)


def watch(cell, processes, timeout, display, bounds=None, polled=lambda processes: None):
    """Until all succeed, one fails, one stalls, or the timeout; returns (status, reason).
    polled(processes): after each round of polls (the hooks' poll stage)."""
    started = time.monotonic()
    stalls = stall.StallWatch(bounds or stall.Bounds.for_cell(cell))
    # slow nodes (emulated VMs) are polled less often: each poll is a shell on them, and one a
    # second per process took most of a TCG guest's CPU; between polls, their kernel's answer
    # to TCP (node.answers) still tells within seconds whether they are there
    every = POLL_SECONDS * stalls.bounds.slowness
    alive = {}
    while True:
        interrupts.check()
        now = time.monotonic()
        for proc in processes:
            if now >= proc.next_poll and not proc.lingered:  # a lingering one was stopped
                alive[proc.label] = poll(proc, stalls.bounds.slowness)
                proc.next_poll = now + every
        polled(processes)
        gone = unanswering(processes) if every > POLL_SECONDS else ""
        if gone:
            return "failed", gone
        display.update(processes, time.monotonic() - started)
        failed = [p for p in processes if (p.rc not in (None, 0)) or
                  (p.rc is None and not alive[p.label])]
        if failed:
            quiet = stalls.quiet_peers(processes, time.monotonic())
            for proc, _ in quiet:  # the suspects: their stacks are asked for too
                proc.stalled = True
            return "failed", blamed(failed, quiet)
        stalled = stalls.check(processes, time.monotonic())
        stalled = [(p, why) for p, why in stalled if not finished_but_lingering(p, why)]
        if stalled:
            for proc, _ in stalled:
                proc.stalled = True
            return "failed", "stalled: %s (%s)" % ("; ".join(
                "%s %s" % (p.label, why) for p, why in stalled), stalls.bounds.describe())
        taken = unusable({p.node.name: p.node for p in processes}.values())
        if taken:
            return "failed", taken
        if all(p.rc == 0 for p in processes if not p.service):
            return stop_services(processes)
        if time.monotonic() - started > timeout:
            return "failed", "timeout after %d s (raise it with --timeout)" % timeout
        time.sleep(POLL_SECONDS)


def finished_but_lingering(proc, why):
    """A process that wrote a succeeded result and then did not exit (TensorFlow's
    multi-worker teardown has taken over 60 s here) has measured everything: it is stopped by
    its pid and counts as exited 0; the cell keeps a warning naming it."""
    if (proc.progress or {}).get("phase") != "succeeded" or _result_status(proc) != "succeeded":
        return False
    stop([proc])
    proc.rc, proc.lingered = 0, why
    return True


def unanswering(processes):
    """Why some nodes of these processes are gone (their kernel does not answer TCP), or ""."""
    nodes = {p.node.name: p.node for p in processes}.values()
    return "; ".join("%s did not answer within %.0f s (its link or the host is down)"
                     % (node.name, REACH_TIMEOUT) for node in nodes
                     if not node.answers(REACH_TIMEOUT))


def unusable(nodes, fresh=False):
    """Why some of these nodes can run no more (a scheduler took them away), or ""."""
    return "; ".join(filter(None, (node.unusable(fresh) for node in nodes)))


def blamed(failed, quiet):
    """The reason of a failure, the peers that had stopped moving first: a process that fails
    after a peer froze (its collective aborted) is the messenger, not the fault. Of the deaths
    one poll saw, those by a signal (killed, crashed: no exit code, or 128 + the signal) come
    first: a peer that exited with an error of its own in the same round (TF-async's chief on
    its parameter server's death, within a second) had only noticed."""
    deaths = "; ".join(_death(p) for p in sorted(failed, key=lambda p: not _signalled(p)))
    quiet = [(p, seconds) for p, seconds in quiet if p not in failed]
    if not quiet:
        return deaths
    return "%s; then %s" % ("; ".join(_silence(p, seconds) for p, seconds in quiet), deaths)


def _silence(proc, seconds):
    if proc.halted:
        return "%s is stopped by a signal (state T)" % proc.label
    return "%s wrote no progress for %.0f s before (the process stopped, or its host went " \
        "silent)" % (proc.label, seconds)


def _signalled(proc):
    return proc.rc is None or proc.rc > 128 or proc.rc < 0


def _death(proc):
    if proc.rc is None:
        return "%s died without an exit code (killed?)" % proc.label
    return "%s exited with %d" % (proc.label, proc.rc)


def stop_services(processes):
    """The others are done: SIGTERM the services, which record their end and exit 0."""
    services = [p for p in processes if p.service]
    stop(services)  # a node that does not answer shows below: no clean result
    unclean = [p.label for p in services if _result_status(p) != "succeeded"]
    if unclean:
        return "failed", "%s did not stop cleanly on SIGTERM" % ", ".join(unclean)
    return "succeeded", ""


def _result(proc):
    try:
        return json.loads(proc.node.read_text(proc.out_dir + "/" + nodefolder.RESULT) or "{}")
    except ValueError:
        return {}


def _result_status(proc):
    return _result(proc).get("status")


def timing_kept(processes):
    """After a failure, once every process is stopped: whether it came in the profiled steps,
    after every worker wrote its timed steps (bench/common/runner.keep). TensorFlow's profiler
    has aborted a worker there; the cell's timing is then whole, its operator profile not."""
    phases = [_result(p).get("phase") for p in processes if not p.service]
    return "profile" in phases and all(phase in ("profile", "done") for phase in phases)


def stop(processes):
    """Kill every still-running process group by its recorded pid. Returns (what needed KILL,
    the nodes that did not answer: their processes stop themselves when the lease runs out)."""
    hard, unreachable = {}, set()
    # every group TERMed first, then each waited for: the graces run side by side (one after
    # another, tensorflow-async's five roles took 22 s to stop)
    for proc in processes:
        if proc.pid and proc.node.name not in unreachable:
            try:
                proc.node.bounded(lambda: proc.node.terminate(proc.pid), KILL_TIMEOUT)
            except UserError:
                unreachable.add(proc.node.name)
    for proc in processes:
        if not proc.pid or proc.node.name in unreachable:
            continue
        try:
            left = proc.node.bounded(lambda: proc.node.kill(proc.pid), KILL_TIMEOUT)
        except UserError:
            unreachable.add(proc.node.name)
            continue
        if left:
            proc.killed_hard = sorted(set(proc.killed_hard) | set(left))
            hard[proc.label] = left
    return hard, sorted(unreachable)


STACKS_WAIT = 1.0  # s for the stalled processes to write their stacks to their logs
STACKS_ASK_SECONDS = 5.0  # a node that does not take the signal by then is left to the stop


def ask_for_stacks(stalled):
    """SIGUSR1 to each stalled process by the pid its progress file gives (the trainer's own:
    bench/common/runner.py has faulthandler print every Python thread's stack on it), so that
    its log says where it stood still. A process stopped by SIGSTOP is continued for it: the
    stop's TERM would otherwise come with it and end the process before the handler ran (as
    it did to a PyTorch worker, which has no TERM handler). Only a diagnosis: a node that
    cannot be asked (gone, its allocation over) is left to the stop, which names it."""
    asked = False
    for proc in stalled:
        pid = int((proc.progress or {}).get("pid") or 0)
        try:
            if pid and proc.node.bounded(lambda: _signal_member(proc, pid), STACKS_ASK_SECONDS):
                asked = True
        except Exception:  # noqa: BLE001 (the stop that follows reports what is wrong)
            continue
    if asked:
        time.sleep(STACKS_WAIT)


def _signal_member(proc, pid):
    """SIGUSR1 and SIGCONT to `pid` where it is one of the role's own processes (the group the
    recorded pid leads, as the stop finds them): never another program that took the pid."""
    if pid not in proc.node.group_members(proc.pid):
        return False
    proc.node.run("kill -USR1 %d 2>/dev/null; kill -CONT %d 2>/dev/null" % (pid, pid),
                  check=False)
    return True


def killed_hard(processes):
    """label -> pids that needed a KILL, over every stop of the cell (the services' included,
    which are stopped before the others' cleanup)."""
    return {p.label: p.killed_hard for p in processes if p.killed_hard}


def kill_recorded(records, nodes_by_name):
    """Kill an earlier attempt's processes that still run (a controller that died mid-cell
    left them), by recorded pid; a pid now used by another program (not in the role's
    folder) is left alone."""
    for record in records:
        node = nodes_by_name.get(record.get("node"))
        if node is not None and record.get("pid") in node.processes_in(record["out_dir"]):
            node.kill(record["pid"])


def log_tail(proc, lines=20):
    text = proc.node.read_text(proc.out_dir + "/" + nodefolder.LOG) or ""
    return "\n".join(text.splitlines()[-lines:])


def run_cell(cell, processes, timeout, status, save=lambda: None, after=RunSoFar(),
             bounds=None, polled=lambda processes: None):
    """start -> watch -> stop, filling `status` in place (so it survives an interrupt); save()
    writes it, once the pids are known, so a controller that dies leaves them on record;
    polled: watch's.
    Ctrl-C (or SIGTERM) stops the cell on every node, then re-raises."""
    began = time.time()
    status.update(status="running", reason="", started=began)
    display = CellProgress(cell, processes, after=after)
    try:
        with display:
            start(processes)
            status["processes"] = [{"node": p.node.name, "role": p.role, "rank": p.rank,
                                    "pid": p.pid, "out_dir": p.out_dir} for p in processes]
            save()
            status["status"], status["reason"] = watch(cell, processes, timeout, display,
                                                       bounds, polled)
    except KeyboardInterrupt:
        status["status"], status["reason"] = "failed", "interrupted"
        raise
    except UserError as exc:
        status["status"], status["reason"] = "failed", str(exc)
    finally:
        status["detected"] = time.time()  # the end, or the fault seen; cleanup follows
        if status["status"] == "failed":
            print("  %s: %s; stopping the cell on every node" % (cell.id, status["reason"]),
                  flush=True)
        ask_for_stacks([p for p in processes if p.stalled])
        _, status["unreachable"] = stop(processes)
        status["killed_hard"] = killed_hard(processes)
        if status["status"] == "failed" and status["reason"] != "interrupted" and \
                not status["unreachable"] and timing_kept(processes):
            status.update(status="succeeded", reason="", warning=(
                "%s: %s in the profiled steps; every worker's timed steps were written before "
                "them and are kept" % (SALVAGED, status["reason"])))
            print("  %s: %s" % (cell.id, status["warning"]), flush=True)
        lingered = ["%s %s" % (p.label, p.lingered) for p in processes if p.lingered]
        if status["status"] == "succeeded" and lingered:
            status["warning"] = "stopped after writing its result: %s" % "; ".join(lingered)
            print("  %s: %s" % (cell.id, status["warning"]), flush=True)
        status["ended"] = time.time()
        status["seconds"] = status["ended"] - began
        if status["status"] == "failed" or status.get("warning"):
            status["log_tails"] = {p.label: log_tail(p) for p in processes
                                   if p.node.name not in status["unreachable"]}
