"""A hang is a fault like a crash: a cell whose processes stop moving fails as "stalled".

Every role's sampler thread rewrites progress.json every sample interval (0.5 s), with its
phase and the steps done. The watch loop keeps, per process, when that file last changed
(the heartbeat) and when its phase or step count last changed (a move), on the controller's
clock, so that the nodes' clocks do not matter. A process stalls when:

- it, or the trainer it runs, is stopped by a signal (state T: SIGSTOP, SIGTSTP) in the
  watch loop's polls for HALTED_SECONDS (times the slowness), in any phase: the one sign
  there is before a process has written its first progress file;
- its heartbeat stops for FROZEN_SECONDS (times the nodes' slowness in the contention probe,
  where they compute slower than this machine's own: emulated VMs): the whole process is
  stopped (SIGSTOP, a frozen VM, native code holding the interpreter), in any phase; in
  start-up STARTUP_FROZEN_MULTIPLE times that, as an import holds the sampler while a
  framework's native libraries load;
- it stays in start-up (before its first step ends: imports, rendezvous, graph building, the
  first step) longer than SETUP_MULTIPLE x the expected start-up;
- its step count stands still in training for STEP_MULTIPLE x the expected step, before its
  last step (after it, a worker may wait for its peers or its turn to calibrate).

The expected start-up and step are the cell's basis (harness/plan/estimate.py: the newest earlier
run of the same cell) or, without one, a prior: STARTUP_PRIOR and the network's step bound
(harness/plan/matrix.py STEP_BOUND, a generous upper bound). Each bound has a floor, so that a
short expected value does not turn a hiccup of a busy machine into a failure. Phases with no
step count (calibration, profiled steps, the services' serving) are watched by the heartbeat
only; the cell's timeout stays as the last resort.
"""
from dataclasses import dataclass

from ..plan.matrix import STEP_BOUND
from . import settings

FROZEN_SECONDS = 20.0
FROZEN_VARIABLE = "DLBENCH_FROZEN_SECONDS"  # a shorter bound for the stall tests
SETUP_MULTIPLE = 4.0
STEP_MULTIPLE = 20.0
SETUP_FLOOR = 90.0
STEP_FLOOR = 30.0
STARTUP_PRIOR = 45.0  # s; the slowest start-up seen here (TensorFlow, 3 nodes on 2 CPUs) ~30 s
STARTING = (None, "setup")  # phases of start-up (None: no progress written yet)
ENDED = ("succeeded", "failed")  # written last, when the sampler stops
# TensorFlow's multi-worker teardown took over 20 s after a worker's result was written (its
# peers' collectives closing): an ended process gets 3x the freeze bound to exit
EXIT_MULTIPLE = 3.0
# An import holds the interpreter, and so the sampler, while a framework's native libraries
# load: three TensorFlow processes on one CPU, their libraries read from a cold page cache,
# wrote no progress for over 20 s in start-up (tensorflow-async on 1 node of 1 CPU)
STARTUP_FROZEN_MULTIPLE = 3.0
# A peer whose heartbeat has stood still this long when another process fails is named first
# (times the slowness): TensorFlow's own heartbeat aborted a healthy worker's collective 14.8 s
# after its peer was stopped, and "node1/worker-0 exited with 1" sent the user to the wrong
# node. Ten sampler intervals; start-up is left out, as an import can hold the sampler.
QUIET_PEER_SECONDS = 5.0
# A state T in three polls running is a stop: no running process passes through T (a
# debugger's tracing stop is t, which this does not read), and each second of waiting is a
# second of the cell's wall time spent on a process that will not move
HALTED_SECONDS = 2.0


@dataclass
class Bounds:
    setup: float
    step: float
    source: str  # where the expected values come from, for the failure's reason
    frozen: float = FROZEN_SECONDS
    slowness: float = 1.0

    @classmethod
    def for_cell(cls, cell, basis=None, slowness=1.0):
        """slowness: how many times slower than this machine's own nodes the cell's nodes
        computed in the contention probe (an emulated VM's: 50 and more); a process there
        may go longer without writing its progress (its sampler thread waits for the
        interpreter while a framework's import holds it)."""
        if basis is not None:
            startup, step = basis.startup, basis.wall_step
            source = "run %s's start-up %.1f s and step %.3f s" % (basis.run_id, startup, step)
        else:
            startup, step = STARTUP_PRIOR, STEP_BOUND[cell.network]
            source = "no earlier run: prior start-up %.0f s, step bound %.1f s" % (startup, step)
        slowness = max(1.0, slowness)  # the floors too: a slow node's hiccups are longer
        return cls(setup=max(SETUP_FLOOR * slowness, SETUP_MULTIPLE * startup),
                   step=max(STEP_FLOOR * slowness, STEP_MULTIPLE * step), source=source,
                   frozen=frozen_seconds() * slowness, slowness=slowness)

    def describe(self):
        return ("stalled = no progress file for %.0f s (%.0f s in start-up), start-up over "
                "%.0f s (%gx expected, floor %.0f s), or one step over %.0f s (%gx expected, "
                "floor %.0f s); %s"
                % (self.frozen, self.frozen_in(STARTING[-1]), self.setup, SETUP_MULTIPLE,
                   SETUP_FLOOR, self.step, STEP_MULTIPLE, STEP_FLOOR, self.source))

    def frozen_in(self, phase):
        """The seconds without a heartbeat that make a process in `phase` stopped."""
        if phase in STARTING:
            return STARTUP_FROZEN_MULTIPLE * self.frozen
        return self.frozen


def frozen_seconds():
    """FROZEN_SECONDS, or DLBENCH_FROZEN_SECONDS where set: at least 20 sampler intervals
    (launch.TRAINING's 0.5 s), so that a sample that is late is not a freeze."""
    return settings.seconds(FROZEN_VARIABLE, FROZEN_SECONDS, 10.0)


class StallWatch:
    def __init__(self, bounds):
        self.bounds = bounds
        # label -> [heartbeat, move, heartbeat changed at, moved at, first seen]
        self.seen = {}
        self.halted_since = {}  # label -> when a poll first found it stopped (state T)

    def check(self, processes, now):
        """[(process, why)] for every process that stopped moving, as of `now` (monotonic); one
        still starting in its rendezvous says whom of the cell it still waits for."""
        stalled = []
        absent = not_arrived(processes)
        for proc in processes:
            if proc.rc is not None:
                continue
            why = self._why(proc, now)
            if why.startswith("still starting"):
                why += waiting_for(proc, absent)
            if why:
                stalled.append((proc, why))
        return stalled

    def quiet_peers(self, processes, now):
        """[(process, seconds)] of the running processes stopped by a signal (state T), in any
        phase, or past start-up with a heartbeat that has stood still for QUIET_PEER_SECONDS
        (x slowness) or more: the stopped first, then the quietest."""
        floor = QUIET_PEER_SECONDS * self.bounds.slowness
        found = []
        for proc in processes:
            seen = self.seen.get(proc.label)
            phase = (proc.progress or {}).get("phase")
            quiet = now - seen[2] if seen else 0.0
            if proc.rc is None and (proc.halted or (
                    seen and phase not in STARTING + ENDED and quiet >= floor)):
                found.append((proc, quiet))
        return sorted(found, key=lambda pair: (not pair[0].halted, -pair[1]))

    def _why(self, proc, now):
        progress = proc.progress or {}
        heartbeat = progress.get("updated")
        phase, step = progress.get("phase"), progress.get("step") or 0
        move = (phase, step)
        seen = self.seen.setdefault(proc.label, [heartbeat, move, now, now, now])
        if seen[0] != heartbeat:
            seen[0], seen[2] = heartbeat, now
        if seen[1] != move:
            seen[1], seen[3] = move, now
        quiet, still, alive = now - seen[2], now - seen[3], now - seen[4]
        halted = self._halted(proc, now)
        if halted:
            return "is stopped by a signal (state T) for %.0f s (phase %s, %d steps)" % (
                halted, phase or "not begun", step)
        if phase in ENDED:  # its sampler has stopped: the process is on its way out
            if quiet > EXIT_MULTIPLE * self.bounds.frozen:
                return "ended (phase %s) but has not exited for %.0f s" % (phase, quiet)
            return ""
        if heartbeat is not None and quiet > self.bounds.frozen_in(phase):
            return "wrote no progress for %.0f s (phase %s, %d steps): the process is " \
                   "stopped" % (quiet, phase, step)
        if (phase in STARTING or (phase == "train" and step == 0)) and alive > self.bounds.setup:
            return "still starting after %.0f s (phase %s; bound %.0f s)" % (
                alive, phase or "not begun", self.bounds.setup)
        total = progress.get("total") or 0
        # after its last step a worker may wait (for its turn to calibrate, for its peers)
        if phase == "train" and 0 < step and (not total or step < total) \
                and still > self.bounds.step:
            return "no step for %.0f s after step %d (bound %.0f s)" % (
                still, step, self.bounds.step)
        return ""

    def _halted(self, proc, now):
        """Seconds the process has been found stopped (state T), once over HALTED_SECONDS
        (times the slowness); else 0."""
        if not proc.halted:
            self.halted_since.pop(proc.label, None)
            return 0.0
        since = now - self.halted_since.setdefault(proc.label, now)
        return since if since >= HALTED_SECONDS * self.bounds.slowness else 0.0


def not_arrived(processes):
    """The labels of the processes that cannot have come to the rendezvous: exited, stopped by
    a signal, or still starting and not yet waiting there. A service in its serving phase is
    running, but whether it has registered only the framework knows (MXNet's scheduler and
    servers register inside `import mxnet`, which they enter in that phase)."""
    out = set()
    for proc in processes:
        progress = proc.progress or {}
        arrived = progress.get("phase") not in STARTING or "waiting" in progress
        if proc.rc is not None or proc.halted or not arrived:
            out.add(proc.label)
    return out


def waiting_for(proc, absent):
    """"; waiting for node1/scheduler-0" where the process waits in its framework's rendezvous
    (its progress lists the cell's processes it waits for) for processes that have not come;
    "" where it is not waiting there."""
    waits = (proc.progress or {}).get("waiting")
    if waits is None:
        return ""
    missing = [label for label in waits if label in absent]
    if missing:
        return "; waiting in its rendezvous for %s" % ", ".join(missing)
    return "; waiting in its rendezvous, every other process of the cell running"
