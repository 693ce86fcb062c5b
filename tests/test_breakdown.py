"""The breakdown every framework shares (bench/common/breakdown.py)."""
import pytest

from bench.common.breakdown import summarise

CALIBRATION = {"forward": [0.010, 0.012, 0.011], "backward": [0.020, 0.022, 0.021],
               "update": [0.003, 0.003, 0.003]}


def steps(totals, warmup=1, loading=0.002):
    return [{"total": t, "loading": loading, "warmup": i < warmup} for i, t in enumerate(totals)]


def test_communication_is_the_rest_of_the_measured_step():
    summary = summarise(steps([9.0, 0.050, 0.060]), CALIBRATION, worker_updates=True)
    assert summary["measured_steps"] == 2 and summary["step"] == pytest.approx(0.055)
    assert summary["backward"] == pytest.approx(0.021 + 0.003)  # the worker's own update
    assert summary["communication"] == pytest.approx(0.055 - (0.002 + 0.011 + 0.024))


def test_a_worker_with_only_warmup_steps_has_no_breakdown_rather_than_a_crash():
    """Async TF with few steps: a worker may run only warm-up closures."""
    summary = summarise(steps([0.5, 0.4], warmup=2), CALIBRATION, worker_updates=False)
    assert summary["measured_steps"] == 0
    assert summary["step"] is None and summary["communication"] is None
