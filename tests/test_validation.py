"""verdict-check's arithmetic (selfcheck/validation.py) on results folders with known numbers:
the in-run projection from a full run's first steps, the full run's spread, the goal."""
import pytest

from analysis import tidy
from selfcheck import known_run, validation

BENCH, SYSTEM = "lenet5-cifar10", "pytorch-sync"


def full_run(tmp_path):
    """10 x 396 steps, 10 of them warm-up: epoch 0 at 20 ms, epoch 1's first 120 at 10 ms,
    every later step at 30 ms (a machine that slowed down); start-up 5 s."""
    samples = [0.02] * 386 + [0.01] * 120 + [0.03] * (396 - 120) + [0.03] * 396 * 8
    epochs = [0] * 386 + [e for e in range(1, 10) for _ in range(396)]
    mean = sum(samples) / len(samples)
    phases = {p: mean / 4 for p in tidy.PHASES}
    cell = known_run.cell(BENCH, SYSTEM, 5 + mean * 3960, startup=5.0, phases=phases,
                          samples=samples, sample_epochs=epochs)
    return known_run.write_run(tmp_path, [cell], run_id="full")


def verdict_run(tmp_path):
    """The verdict size's older shape (one run of up to 4 x 40 steps, 5 of them
    warm-up): 35 first-epoch samples, 120 later ones."""
    cell = known_run.cell(BENCH, SYSTEM, 9.0, startup=5.0, steps=40, epochs=4,
                          samples=[0.02] * 35 + [0.01] * 120,
                          sample_epochs=[0] * 35 + [1] * 40 + [2] * 40 + [3] * 40)
    return known_run.write_run(tmp_path, [cell], run_id="before")


def records(run):
    return tidy.load_records(run / "records.jsonl")


def test_the_in_run_projection_uses_as_many_first_steps_as_the_verdict_run_timed(tmp_path):
    full, short = full_run(tmp_path), verdict_run(tmp_path)
    # start-up + 395 steps at epoch 0's 20 ms + 9 x 396 at the first 120 later steps' 10 ms
    assert validation.in_run_projection(records(full), records(short)) == pytest.approx(
        5 + 395 * 0.02 + 3564 * 0.01)


def test_the_spread_is_how_far_the_later_epochs_mean_steps_lie_apart(tmp_path):
    epoch1 = (120 * 0.01 + 276 * 0.03) / 396
    means = [epoch1] + [0.03] * 8
    expected = (0.03 - epoch1) / (sum(means) / len(means))
    assert validation.epoch_spread(records(full_run(tmp_path))) == pytest.approx(expected)


def test_a_row_compares_each_verdict_run_with_the_full_runs_measurement(tmp_path):
    full, short = full_run(tmp_path), verdict_run(tmp_path)
    row = validation.compare(SYSTEM, {"full": str(full), "before": str(short)})
    measured = records(full).query("metric == 'execution_seconds'").value.max()
    assert row["measured"] == pytest.approx(measured)
    assert row["before"]["error"] == pytest.approx(row["before"]["projected"] / measured - 1)
    assert "after" not in row
    assert validation.goal(row).startswith("not met; not judged here")


@pytest.mark.parametrize("errors, spread, expected", [
    ((0.03, -0.04), 0.20, "met"),
    ((0.03, 0.08), 0.02, "not met"),
    ((0.03, 0.08), 0.12, "not met; not judged here: the full run's own speed moved by 12%"),
])
def test_the_goal_needs_every_verdict_run_within_five_percent(errors, spread, expected):
    row = {"before": {"error": errors[0]}, "after": {"error": errors[1]}, "spread": spread}
    assert validation.goal(row) == expected


def test_a_failed_verdict_run_leaves_its_columns_empty(tmp_path):
    full = full_run(tmp_path)
    failed = known_run.write_run(tmp_path, [known_run.cell(BENCH, SYSTEM, 9.0, status="failed")],
                                 run_id="before")
    row = validation.compare(SYSTEM, {"full": str(full), "before": str(failed)})
    assert "before" not in row and "in_run" not in row
    assert validation.goal(row).startswith("not met")
