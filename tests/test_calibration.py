"""calibration's arithmetic (selfcheck/calibration.py) on rows with known numbers: which
verdict runs' intervals cover the full run, before and after, and the order of the runs."""
from selfcheck import calibration


def row(full, shorts):
    return {"benchmark": "lenet5-cifar10", "system": "pytorch-sync", "full": full,
            "short": [{"run": "v%d" % i, "value": v, "low": lo, "high": hi, "one_low": ol,
                       "one_high": oh} for i, (v, lo, hi, ol, oh) in enumerate(shorts, 1)]}


def test_coverage_counts_the_intervals_that_hold_the_full_runs_value():
    """Full run 43.6 s; four verdict runs: three t-prediction intervals hold it, one does not;
    of the one-repeat intervals (narrow) two do."""
    found = row(43.6, [(44.0, 40.0, 48.0, 42.3, 47.2), (45.0, 41.0, 50.0, 43.4, 46.4),
                       (49.0, 44.0, 55.0, 48.1, 51.2), (47.0, 43.0, 52.0, 46.3, 49.2)])
    assert calibration.covered(found) == (3, 4)
    assert calibration.covered(found, "one_low", "one_high") == (2, 4)
    lines = calibration.table([found], [])
    assert "| lenet5-cifar10 pytorch-sync | 43.6 |" in lines[2] and "| 3 of 4 | 2 of 4 |" in lines[2]
    assert "cells, 3 repeats, t prediction: 3 of 4 intervals cover the full run (75%; " \
        "goal 90%)" in lines
    assert "cells, one repeat alone: 2 of 4 intervals cover the full run (50%; goal 90%)" \
        in lines


def test_a_missing_full_run_or_a_failed_verdict_run_is_not_counted():
    assert calibration.covered(row(None, [(44.0, 40.0, 48.0, 42.3, 47.2)])) == (0, 0)
    failed = row(43.6, [(44.0, 40.0, 48.0, 42.3, 47.2)])
    failed["short"].append({"run": "v2", "failed": True})
    assert calibration.covered(failed) == (1, 1)
    assert "failed" in calibration.table([failed], [])[2]


def test_the_full_run_sits_between_the_verdict_runs():
    assert calibration.order(4) == ["v1", "v2", "full", "v3", "v4"]
    assert calibration.order(2) == ["v1", "full", "v2"]
