"""The verdict size's stop rule (bench/common/loop.py, precision.py, agree.py): a loop stops
between its floor and ceiling once the mean step of the later epochs is known to +-2%, and
the workers of a synchronous mode stop at the same step."""
import math
import random
import socket
import threading
import time

import pytest

from bench.common import agree, breakdown, loop, precision


class Sampler(object):
    def progress(self, **kwargs):
        pass

    def net_counters(self):
        return (0, 0)


def run_loop(step_seconds, precision_goal=0.02, epochs=2, max_epochs=4, per_epoch=40, **more):
    """The loop with a fake step whose recorded time is step_seconds(index)."""
    config = dict({"epochs": epochs, "max_epochs": max_epochs, "steps_per_epoch": per_epoch,
                   "warmup_steps": 5, "precision": precision_goal, "check_every": 10,
                   "rank": 0, "world_size": 1, "node": "n", "collective_timeout": 10}, **more)
    index = [0]

    def step(batch, timer):
        timer._step_start -= step_seconds(index[0])  # the step "took" this long
        index[0] += 1

    def batches(epoch):
        return iter(range(per_epoch))
    return loop.timed_steps(config, Sampler(), batches, step)[0]


def test_steady_steps_stop_at_the_floor():
    result = run_loop(lambda i: 0.1)
    assert len(result["steps"]) == 80  # two epochs of 40: the floor
    assert result["stopped_by"] == "precision" and result["halfwidth"] == pytest.approx(0, abs=1e-3)
    assert result["step_epochs"].count(0) == 35 and result["step_epochs"].count(1) == 40


def test_noisy_steps_run_to_the_ceiling_and_say_so():
    noise = random.Random(1)
    result = run_loop(lambda i: 0.1 * (1 + noise.choice([-0.9, 0.9])))
    assert len(result["steps"]) == 160 and result["stopped_by"] == "ceiling"
    assert result["halfwidth"] > 0.02


def test_steps_that_settle_stop_between_floor_and_ceiling():
    noise = random.Random(2)
    # noisy through epoch 2 (+-3% at the floor), then steady: known after some more steps
    result = run_loop(lambda i: 0.1 * (1 + (noise.uniform(-0.15, 0.15) if i < 80 else 0)))
    assert 80 < len(result["steps"]) < 160 and result["stopped_by"] == "precision"
    assert (len(result["steps"]) - 80) % 10 == 0  # only at checks


def test_fixed_profiles_keep_their_step_count():
    result = run_loop(lambda i: 0.1, precision_goal=0, epochs=1, per_epoch=12)
    assert len(result["steps"]) == 12 and result["stopped_by"] == "fixed"
    assert result["halfwidth"] is None


def test_a_floor_as_high_as_the_ceiling_is_a_fixed_length():
    """The verdict size: 2 epochs of 16 steps, no room to stop earlier or
    later; the run says `fixed`, not that it reached a ceiling."""
    noise = random.Random(3)
    result = run_loop(lambda i: 0.1 * (1 + noise.choice([-0.5, 0.5])), max_epochs=2,
                      per_epoch=16)
    assert len(result["steps"]) == 32 and result["stopped_by"] == "fixed"


def test_halfwidth_by_batch_means():
    assert precision.relative_halfwidth([1.0] * 19) == math.inf  # too few for 10 batches
    # batch means 1, 3, 1, 3, ...: mean 2, sd 1.054, +-2.262 x 1.054 / sqrt(10) / 2
    samples = sum([[1.0] * 5 if i % 2 == 0 else [3.0] * 5 for i in range(10)], [])
    assert precision.relative_halfwidth(samples) == pytest.approx(2.262 * 1.0541 / 10 ** 0.5 / 2,
                                                                  rel=1e-3)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_workers_stop_together_when_every_one_is_done():
    address = "127.0.0.1:%d" % free_port()
    votes = {0: [True, True], 1: [False, True], 2: [True, True]}
    answers = {}
    peers = [agree.Agreement(address, rank, 3, timeout=10) for rank in (0, 1, 2)]

    def worker(rank):
        answers[rank] = [peers[rank].vote(v) for v in votes[rank]]
        peers[rank].close()
    threads = [threading.Thread(target=worker, args=(r,)) for r in (0, 1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    # worker 1 was not done at the first check: nobody stops there; at the second, all do
    assert answers == {r: [False, True] for r in (0, 1, 2)}


def test_a_peer_that_leaves_is_an_error_not_a_hang():
    address = "127.0.0.1:%d" % free_port()
    leader = agree.Agreement(address, 0, 2, timeout=5)
    follower = agree.Agreement(address, 1, 2, timeout=5)
    follower.peers = follower._connect()
    follower.close()  # leaves without voting
    with pytest.raises(ConnectionError, match="left before the stop decision"):
        leader.vote(True)
    leader.close()


def calibrate_three(together):
    """Three workers through loop.in_turn over the package's channel (tensorflow-sync's
    barrier): when each prepared, measured and left (start, end), and what each returned."""
    address = "127.0.0.1:%d" % free_port()
    configs = [{"agree_address": address, "rank": r, "world_size": 3,
                "collective_timeout": 10, "calibrate_together": together} for r in (0, 1, 2)]
    peers = [agree.Agreement(address, r, 3, timeout=10) for r in (0, 1, 2)]
    prepared, spans, left = {}, {}, {}

    def measure(rank):
        started = time.time()
        time.sleep(0.3)
        spans[rank] = (started, time.time())
        return rank

    def prepare(rank):
        started = time.time()
        time.sleep(0.5)
        prepared[rank] = (started, time.time())
        return lambda: measure(rank)

    def worker(rank):
        result = loop.in_turn(configs[rank], peers[rank].barrier, lambda: prepare(rank))
        left[rank] = (result, time.time())
    threads = [threading.Thread(target=worker, args=(r,)) for r in (0, 1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert sorted(left) == [0, 1, 2] and all(left[r][0] == r for r in left)
    assert max(s for s, _ in prepared.values()) < min(e for _, e in prepared.values())  # at once
    assert max(e for _, e in prepared.values()) <= min(s for s, _ in spans.values())
    assert min(t for _, t in left.values()) >= max(e for _, e in spans.values())
    return spans


def test_the_channel_is_a_barrier_for_the_in_turn_calibration():
    """Where nodes may share cores: every worker prepares at once, then each measures alone,
    rank after rank, and nobody leaves before the last one is done."""
    spans = calibrate_three(together=False)
    assert spans[0][1] <= spans[1][0] and spans[1][1] <= spans[2][0]  # one at a time


def test_workers_on_cores_of_their_own_calibrate_together():
    """Where the probe found no sharing: the timed passes run at once (every one starts
    before any ends), and nobody leaves before the last one is done."""
    spans = calibrate_three(together=True)
    assert max(s for s, _ in spans.values()) < min(e for _, e in spans.values())


def test_one_channel_per_process_and_none_without_an_address():
    address = "127.0.0.1:%d" % free_port()
    config = {"agree_address": address, "rank": 1, "world_size": 2, "collective_timeout": 1}
    assert agree.channel(config) is agree.channel(dict(config))
    assert agree.channel(dict(config, agree_address=None)) is None


def test_a_prepared_calibration_runs_one_untimed_pass_then_times_only_its_own():
    """loop.prepared: one pass at once (nothing recorded), then the warm-up and the timed
    passes when called; the phase reads "calibrate" from the start."""
    calls = []

    class Sampler:
        def progress(self, **fields):
            calls.append(fields["phase"])
    config = {"calibration_warmup": 2, "calibration_steps": 3}
    measure = loop.prepared(config, Sampler(), lambda: calls.append("f"),
                            lambda: calls.append("fb"), lambda: calls.append("u"))
    assert calls == ["calibrate", "f", "fb", "u"]
    times = measure()
    assert calls.count("f") == 1 + 2 + 3 and calls.count("u") == 1 + 2 + 3
    assert [len(times[k]) for k in ("forward", "backward", "update")] == [3, 3, 3]
    # no calibration steps (emulated CPUs): no pass at all, and the breakdown's parts unknown
    calls.clear()
    none = loop.prepared(dict(config, calibration_steps=0), Sampler(), lambda: calls.append("f"),
                         lambda: calls.append("fb"))()
    assert calls == [] and none == {"forward": [], "backward": [], "update": []}
    summary = breakdown.summarise([{"total": 2.0, "loading": 0.5}], none, worker_updates=True)
    assert (summary["step"], summary["forward"], summary["communication"]) == (2.0, None, None)
