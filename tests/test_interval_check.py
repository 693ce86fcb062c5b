"""The interval check's arithmetic (selfcheck/interval_check.py) on rows with known numbers: which
verdict runs' intervals hold what each is about (the confidence interval the full runs' mean,
the prediction each single full run), the gaps, the variation kept for one-repeat runs, and
the order of the runs."""
import math

import pytest

from analysis import stats
from selfcheck import interval_check


def row(full_runs, shorts):
    return {"benchmark": "lenet5-cifar10", "system": "pytorch-sync", "full_runs": full_runs,
            "full": sum(full_runs) / len(full_runs),
            "short": [{"run": "v%d" % i, "value": v, "low": lo, "high": hi, "pred_low": pl,
                       "pred_high": ph, "one_low": ol, "one_high": oh}
                      for i, (v, lo, hi, pl, ph, ol, oh) in enumerate(shorts, 1)]}


def test_each_interval_is_judged_against_what_it_is_about():
    """Full runs 42, 43.6 and 45.2 s (mean 43.6). The confidence intervals [40-48], [44-50]
    and [43-47]: two hold the mean. The predictions [38-50], [40-52], [44-55] against each of
    the three single runs: 3 + 3 + 1 = 7 of 9. One repeat alone [42.3-44], [43.4-46.4], [46-49]:
    1 + 2 + 0 = 3 of 9."""
    found = row([42.0, 43.6, 45.2], [(44.0, 40.0, 48.0, 38.0, 50.0, 42.3, 44.0),
                                     (47.0, 44.0, 50.0, 40.0, 52.0, 43.4, 46.4),
                                     (45.0, 43.0, 47.0, 44.0, 55.0, 46.0, 49.0)])
    assert interval_check.covered(found) == (2, 3)
    assert interval_check.covered(found, "pred_low", "pred_high", True) == (7, 9)
    assert interval_check.covered(found, "one_low", "one_high", True) == (3, 9)
    lines = interval_check.table([found], [])
    assert lines[2].endswith("| 2 of 3 | 7 of 9 |")
    assert "| confidence interval of the expected time (the report's) | 2 of 3 (67%) | 6.4% |" \
        in "\n".join(lines)  # half-widths 4/44, 3/47, 2/45: 9.1%, 6.4%, 4.4%


def test_a_failed_verdict_run_is_shown_and_not_counted():
    found = row([43.6], [(44.0, 40.0, 48.0, 38.0, 50.0, 42.3, 47.2)])
    found["short"].append({"run": "v2", "failed": True})
    assert interval_check.covered(found) == (1, 1)
    assert "v2 failed" in interval_check.table([found], [])[2]


def test_the_gap_of_each_verdict_run_from_the_full_mean():
    found = row([40.0, 44.0], [(39.6, 0, 0, 0, 0, 0, 0), (44.1, 0, 0, 0, 0, 0, 0)])
    (line,) = interval_check.gap_table([found])[2:]
    assert line == "| lenet5-cifar10 | pytorch-sync | -5.7%, +5.0% | -0.4% |"


def test_the_variation_kept_is_the_pooled_sd_of_log_times():
    """Two cells of three runs each: s^2 = the sum of both cells' squared log deviations over
    4 degrees of freedom; a cell of one run adds none."""
    found = stats.pooled_sd([[10.0, 11.0, 12.0], [20.0, 20.2, 20.4], [7.0]])
    logs = [[math.log(x) for x in c] for c in ([10.0, 11.0, 12.0], [20.0, 20.2, 20.4])]
    ss = sum(sum((x - sum(c) / 3) ** 2 for x in c) for c in logs)
    assert found["df"] == 4 and found["s"] == pytest.approx(math.sqrt(ss / 4))
    assert stats.pooled_sd([[7.0]]) == {"s": None, "df": 0}


def test_verdict_runs_and_full_rounds_interleave():
    assert interval_check.order(4, 3) == ["v1", "f1", "v2", "f2", "v3", "f3", "v4"]
    assert interval_check.order(2, 3) == ["v1", "f1", "v2", "f2", "f3"]


def test_the_full_means_own_uncertainty_widens_what_counts_as_held():
    """[40-48] (log centre 3.784, half-width 0.0912) against a full mean of 48.5: outside
    the interval, but within the root sum of squares with the mean's own half-width 0.05
    (0.102 <= 0.104); a full mean of 49 is not (0.112)."""
    for full, held in ((48.5, 1), (49.0, 0)):
        found = row([full], [(44.0, 40.0, 48.0, 38.0, 50.0, 42.3, 44.0)])
        found["full_half"] = 0.05
        assert interval_check.covered(found) == (0, 1)
        assert interval_check.covered(found, target_spread=True) == (held, 1)
    found["full_half"] = None  # the full runs' spread unknown: not judged
    assert interval_check.covered(found, target_spread=True) == (0, 0)


def test_again_finds_a_check_by_its_name_in_the_results_folder_or_says_what_is_there(tmp_path):
    """`interval-check --again interval-check-<time>`: a bare name is looked for in the results
    folder (it once ended in a traceback: no such directory)."""
    from contract.errors import UserError
    (tmp_path / "interval-check-20261130-014502" / "x1-lenet5-cifar10").mkdir(parents=True)
    with pytest.raises(UserError) as found:  # found: its runs are then read
        interval_check.again("interval-check-20261130-014502", str(tmp_path))
    assert "x1-lenet5-cifar10 is not an interval check's run" in found.value.cause
    with pytest.raises(UserError) as missing:
        interval_check.again("interval-check-nope", str(tmp_path))
    assert missing.value.cause == "no interval check's folder interval-check-nope (nor %s)" % (
        tmp_path / "interval-check-nope")
    assert "name one of %s/interval-check-*" % tmp_path in missing.value.fix
