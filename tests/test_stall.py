"""Stall detection (harness/run/stall.py) with hand-made progress and a hand-moved clock; the real
processes stopped with SIGSTOP are in tests/test_faults.py."""
from types import SimpleNamespace

import pytest

from harness.plan import matrix
from harness.run import stall
from harness.plan.estimate import Basis

(CELL,) = matrix.plan("smoke", 2, systems="pytorch-sync")


def proc(label="node2/worker-1", **progress):
    return SimpleNamespace(label=label, rc=None, progress=progress, halted=False)


def watch_over(process, timeline, bounds=None):
    """timeline: [(time, progress)]; the reasons given at each time."""
    watch = stall.StallWatch(bounds or stall.Bounds.for_cell(CELL))
    out = []
    for now, progress in timeline:
        process.progress = progress
        found = watch.check([process], now)
        out.append(found[0][1] if found else "")
    return out


def test_bounds_come_from_the_cells_basis_or_a_prior_with_floors():
    prior = stall.Bounds.for_cell(CELL)
    assert (prior.setup, prior.step) == (180.0, 40.0)  # 4 x 45 s; 20 x LeNet-5's 2 s bound
    quick = stall.Bounds.for_cell(CELL, Basis("r1", startup=8.0, wall_step=0.02, rest=3.0))
    assert (quick.setup, quick.step) == (90.0, 30.0)  # the floors
    slow = stall.Bounds.for_cell(CELL, Basis("r1", startup=40.0, wall_step=3.0, rest=3.0))
    assert (slow.setup, slow.step) == (160.0, 60.0)
    assert "run r1's start-up 40.0 s and step 3.000 s" in slow.describe()


def test_a_process_whose_progress_file_stands_still_is_stopped_in_every_phase_after_start_up():
    for phase, step in (("train", 5), ("calibrate", 12), ("profile", 12),
                        ("server", 0)):
        frozen = {"updated": 100.0, "phase": phase, "step": step}
        reasons = watch_over(proc(), [(0, frozen), (19.9, frozen), (20.1, frozen)])
        assert reasons[:2] == ["", ""], phase
        assert reasons[2].startswith("wrote no progress for 20 s (phase %s, %d steps)"
                                     % (phase, step)), reasons


def test_a_process_stopped_before_its_first_progress_is_singled_out_within_seconds():
    """A scheduler stopped (SIGSTOP) before it wrote any progress has no heartbeat to stand
    still: only the start-up bound (90 s and more) caught it, and its peers waiting on it
    read "still starting" alike. The state T its polls read names it after HALTED_SECONDS,
    in any phase; a moment in state T (a debugger's, a shell's) is not a stop."""
    scheduler, worker = proc("node1/scheduler-0"), proc("node1/worker-0", phase="setup",
                                                        updated=1.0)
    watch = stall.StallWatch(stall.Bounds.for_cell(CELL))
    scheduler.halted = True
    assert watch.check([scheduler, worker], 0.0) == []
    scheduler.halted = False  # it went on
    assert watch.check([scheduler, worker], 1.0) == []
    scheduler.halted = True
    assert watch.check([scheduler, worker], 2.0) == []
    assert watch.check([scheduler, worker], 3.9) == []  # 1.9 s since it was seen stopped again
    worker.progress = dict(worker.progress, updated=4.0)  # the worker waits, alive
    (found,) = watch.check([scheduler, worker], 4.1)
    assert found[0] is scheduler
    assert found[1] == "is stopped by a signal (state T) for 2 s (phase not begun, 0 steps)"
    slow = stall.StallWatch(stall.Bounds.for_cell(CELL, slowness=50.0))  # an emulated VM
    assert slow.check([scheduler], 0.0) == slow.check([scheduler], 99.0) == []


def test_a_process_in_its_rendezvous_says_whom_of_the_cell_has_not_come():
    """A tensorflow-async chief waits in its rendezvous for the ps and worker servers: past the
    start-up bound it names those that cannot have come (a ps not begun, one still importing
    TensorFlow: a server writes its role's phase once it serves), not those serving; before,
    the chief and its missing peers read "still starting" alike. With every other process
    serving it says so, not that they have registered (MXNet's servers serve from inside
    their import: whether they registered only MXNet knows)."""
    labels = ["node1/chief-0", "node1/ps-0", "node2/ps-1", "node1/worker-0", "node2/worker-1"]
    chief = proc(labels[0], phase="setup", updated=1.0, waiting=labels[1:])
    not_begun, importing = proc(labels[1]), proc(labels[2], phase="setup", updated=1.0)
    serving = [proc(label, phase="worker", updated=1.0) for label in labels[3:]]
    watch = stall.StallWatch(stall.Bounds(setup=90.0, step=30.0, source="a basis"))
    every = [chief, not_begun, importing] + serving
    assert watch.check(every, 0.0) == []
    for p in [chief, importing] + serving:
        p.progress = dict(p.progress, updated=89.0)  # alive, their heartbeats moving
    found = dict((p.label, why) for p, why in watch.check(every, 91.0))
    assert found["node1/chief-0"] == (
        "still starting after 91 s (phase setup; bound 90 s); waiting in its rendezvous for "
        "node1/ps-0, node2/ps-1")
    assert found["node1/ps-0"] == "still starting after 91 s (phase not begun; bound 90 s)"
    not_begun.progress, importing.progress = {"phase": "ps", "updated": 90.0}, dict(
        importing.progress, phase="ps")
    (why,) = [w for p, w in watch.check(every, 92.0) if p is chief]
    assert why.endswith("waiting in its rendezvous, every other process of the cell running")


def test_a_process_in_start_up_may_hold_its_sampler_three_times_as_long():
    """An import holds the interpreter while native libraries load: 20 s of silence in
    start-up is not yet a stop (tensorflow-async's servers on one cold CPU went past it)."""
    for phase in (None, "setup"):
        frozen = {"updated": 100.0, "phase": phase, "step": 0}
        reasons = watch_over(proc(), [(0, frozen), (20.1, frozen), (59.9, frozen),
                                      (60.1, frozen)])
        assert reasons[:3] == ["", "", ""], phase
        assert reasons[3].startswith("wrote no progress for 60 s (phase %s, 0 steps)"
                                     % phase), reasons


def test_a_beating_process_that_never_ends_its_start_up_stalls_at_the_setup_bound():
    """A tensorflow-async chief seen hanging: alive, sampling, never a first step."""
    bounds = stall.Bounds(setup=90.0, step=30.0, source="test")
    timeline = [(t, {"updated": float(t), "phase": "setup", "step": 0}) for t in range(0, 92)]
    reasons = watch_over(proc("node1/chief-0"), timeline, bounds)
    assert reasons.index(next(r for r in reasons if r)) == 91
    assert reasons[-1] == "still starting after 91 s (phase setup; bound 90 s)"
    # the first step belongs to start-up: phase train with 0 steps done counts the same
    first = [(t, {"updated": float(t), "phase": "setup" if t < 50 else "train", "step": 0})
             for t in range(0, 92)]
    assert watch_over(proc(), first, bounds)[-1].startswith("still starting after 91 s")


def test_a_training_process_stalls_when_its_step_count_stands_still():
    bounds = stall.Bounds(setup=90.0, step=30.0, source="test")
    steps = [(t, {"updated": float(t), "phase": "train", "step": min(t, 10)})
             for t in range(0, 42)]
    reasons = watch_over(proc(), steps, bounds)
    assert reasons[40] == "" and reasons[41] == "no step for 31 s after step 10 (bound 30 s)"
    # the same count standing still at its last step: waiting for peers, not stalled (a TCG
    # VM's worker waited 11 min for the others' calibration)
    done = [(t, dict(p, total=10)) for t, p in steps] + \
        [(t, {"updated": float(t), "phase": "train", "step": 10, "total": 10})
         for t in range(42, 700, 7)]
    assert not any(watch_over(proc(), done, bounds))
    short = [(t, dict(p, total=12)) for t, p in steps]
    assert watch_over(proc(), short, bounds)[41].startswith("no step for 31 s")


def test_services_and_ended_processes_are_watched_by_their_heartbeat_only():
    serving = [(t, {"updated": float(t), "phase": "ps", "step": 0}) for t in range(0, 400, 5)]
    assert not any(watch_over(proc("node1/ps-0"), serving))
    ended = proc()
    ended.rc = 0
    assert stall.StallWatch(stall.Bounds.for_cell(CELL)).check(
        [ended], 1e6) == []
    # no progress file yet (imports): only the start-up bound applies
    starting = [(t, {}) for t in (0, 100, 181)]
    assert watch_over(proc(), starting)[-1] == \
        "still starting after 181 s (phase not begun; bound 180 s)"


@pytest.mark.parametrize("bound", [stall.FROZEN_SECONDS])
def test_the_frozen_bound_is_longer_than_the_samplers_interval_many_times(bound):
    from harness.run.launch import TRAINING
    assert bound >= 20 * TRAINING["sample_interval"]


def test_slow_nodes_stretch_the_bounds_and_ordinary_ones_do_not():
    """An emulated VM computes 15-20x slower than this machine's nodes: its bounds, floors
    and freeze limit stretch as much; a machine 2x slower (drift, a slower CPU) keeps them."""
    from harness.plan import estimate

    def probe(speed):
        return {"nodes": {"node1": {"alone": estimate.PRIOR_SPEED}, "node2": {"alone": speed}}}
    assert estimate.slowness(probe(estimate.PRIOR_SPEED / 2)) == 1.0
    assert estimate.slowness(None) == 1.0
    slow = estimate.slowness(probe(estimate.PRIOR_SPEED / 16))
    assert slow == pytest.approx(16.0)
    bounds = stall.Bounds.for_cell(CELL, None, slow)
    assert bounds.frozen == pytest.approx(16 * stall.FROZEN_SECONDS)
    assert bounds.step >= 16 * stall.STEP_FLOOR and bounds.setup >= 16 * stall.SETUP_FLOOR
    assert stall.Bounds.for_cell(CELL, None, 1.0).frozen == stall.FROZEN_SECONDS


def test_the_freeze_and_lease_bounds_are_settings_with_floors(monkeypatch):
    from contract.errors import UserError
    from harness.run import launch
    monkeypatch.setenv(stall.FROZEN_VARIABLE, "12")
    monkeypatch.setenv(launch.LEASE_VARIABLE, "15")
    assert stall.Bounds.for_cell(CELL, None, 2.0).frozen == 24.0
    assert launch.lease_seconds(stall.Bounds.for_cell(CELL, None, 2.0)) == 30.0
    # the sampler and the calibration read the nodes' slowness from the lease, not its length
    assert launch.sample_interval(15.0) == launch.TRAINING["sample_interval"]
    assert launch.calibration(15.0) == {} and launch.calibration(45.0)
    monkeypatch.setenv(stall.FROZEN_VARIABLE, "5")  # 10 sampler intervals: a late sample
    with pytest.raises(UserError, match="DLBENCH_FROZEN_SECONDS=5 .* at least 10"):
        stall.frozen_seconds()
    monkeypatch.setenv(launch.LEASE_VARIABLE, "soon")
    with pytest.raises(UserError, match="DLBENCH_LEASE_SECONDS=soon"):
        launch.base_lease()
    monkeypatch.delenv(stall.FROZEN_VARIABLE)
    monkeypatch.delenv(launch.LEASE_VARIABLE)
    assert stall.frozen_seconds() == stall.FROZEN_SECONDS
    assert launch.base_lease() == launch.LEASE_SECONDS


def test_an_ended_process_may_take_a_while_to_exit_but_not_forever():
    """TensorFlow's workers wrote their result, then took over 20 s to exit (their peers'
    collectives closing): not stalled until 3x the freeze bound."""
    exiting = [(0, {"updated": 0.0, "phase": "train", "step": 30, "total": 30})] + \
        [(t, {"updated": 1.0, "phase": "succeeded", "step": 30, "total": 30})
         for t in range(1, 63)]
    reasons = watch_over(proc(), exiting)  # its last write at t=1
    assert not any(reasons[:62])
    assert reasons[62] == "ended (phase succeeded) but has not exited for 61 s"


class FakeNode:
    name = "node2"

    def __init__(self, result):
        self.result, self.killed = result, []

    def read_text(self, path):
        return self.result

    def bounded(self, call, seconds):
        return call()

    def terminate(self, pid):  # the stop TERMs every group first, then kills each
        pass

    def kill(self, pid):
        self.killed.append(pid)
        return []


def test_a_process_that_wrote_a_succeeded_result_and_lingers_is_stopped_not_failed():
    """TensorFlow-sync's ResNet-18 worker wrote its result, then took over 60 s to exit: the
    cell is measured; the process is killed by its pid and the cell keeps a warning."""
    from harness.run import launch
    done = launch.Process(node=FakeNode('{"status": "succeeded"}'), role="worker", rank=1,
                          out_dir="/x", pid=4242, progress={"phase": "succeeded"})
    assert launch.finished_but_lingering(done, "ended (phase succeeded) but has not exited")
    assert (done.rc, done.node.killed, done.lingered) == (
        0, [4242], "ended (phase succeeded) but has not exited")
    # one that failed, or whose result says otherwise, is still a stall
    for phase, result in (("failed", '{"status": "failed"}'),
                          ("succeeded", '{"status": "profiling"}')):
        other = launch.Process(node=FakeNode(result), role="worker", rank=1, out_dir="/x",
                               pid=7, progress={"phase": phase})
        assert not launch.finished_but_lingering(other, "why")
        assert other.rc is None and other.node.killed == []


def test_of_the_deaths_one_poll_sees_the_killed_one_is_named_first():
    """TF-async's chief exits with 1 within a second of its parameter server's SIGKILL: in the
    same round of polls, the ps's death (137) is the fault, the chief's the messenger."""
    from harness.run import launch
    chief, ps = proc("node1/chief-0"), proc("node2/ps-1")
    chief.rc, ps.rc = 1, 137
    assert launch.blamed([chief, ps], []) == \
        "node2/ps-1 exited with 137; node1/chief-0 exited with 1"
    ps.rc = None  # its shell gone too: no exit code
    assert launch.blamed([chief, ps], []).startswith("node2/ps-1 died without an exit code")


def test_a_failure_after_a_peer_froze_names_the_peer_first():
    """node2's worker stopped (SIGSTOP) at t=10; TensorFlow's heartbeat aborted node1's
    collective 14.8 s later (exit 1). The reason names node2 first, node1 after; a peer still
    starting, or beating, is not blamed."""
    from harness.run import launch
    watch = stall.StallWatch(stall.Bounds.for_cell(CELL))
    node1, node2 = proc("node1/worker-0"), proc("node2/worker-1")
    starting = proc("node3/worker-2", phase="setup", updated=0)
    for t in range(0, 25):
        node1.progress = {"phase": "train", "step": t, "updated": t}
        node2.progress = {"phase": "train", "step": min(t, 10), "updated": min(t, 10)}
        watch.check([node1, node2, starting], float(t))
    node1.rc = 1
    reason = launch.blamed([node1], watch.quiet_peers([node1, node2, starting], 24.8))
    assert reason == ("node2/worker-1 wrote no progress for 15 s before (the process stopped, "
                      "or its host went silent); then node1/worker-0 exited with 1")
    # a crash with every peer beating is the crashed process's alone
    assert launch.blamed([node1], watch.quiet_peers([node1], 24.8)) == \
        "node1/worker-0 exited with 1"
    # a peer stopped by a signal is named first, in any phase, start-up too
    starting.halted = True
    reason = launch.blamed([node1], watch.quiet_peers([node1, node2, starting], 24.8))
    assert reason.startswith("node3/worker-2 is stopped by a signal (state T); node2/worker-1 "
                             "wrote no progress for 15 s before"), reason
