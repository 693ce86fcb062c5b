"""Estimates before a run (harness/plan/estimate.py): an earlier run of the same cell on the same
inventory and stack, scaled to the planned steps; --max-hours refuses a plan that is too long
or cannot be told."""
import dataclasses
import io
import json

import pytest
from rich.console import Console

from harness.plan import estimate, matrix, options
from harness.run import lifecycle, progress
from contract.errors import UserError


def earlier_run(results, run_id, inventory="local", stack="current", started=1.0,
                wall_step=0.5, startup=10.0, seconds=30.0):
    """One succeeded lenet5 pytorch-sync cell of 12 steps (2 warm-up): 10 + 12 x 0.5 = 16 s of
    start-up and steps, 14 s more (calibration, profiled steps, teardown)."""
    cell = matrix.plan("smoke", 3, systems="pytorch-sync")[0]
    run = results / run_id
    (run / cell.id).mkdir(parents=True)
    (run / "manifest.json").write_text(json.dumps({
        "run_id": run_id, "started": started, "inventory": {"name": inventory},
        "stack": {"name": stack}}))
    (run / cell.id / "status.json").write_text(json.dumps({
        "cell_id": cell.id, "settings": cell.settings, "status": "succeeded",
        "seconds": seconds}))
    base = {"cell_id": cell.id, "node": "node1", "role": "worker", "rank": 0}
    records = [dict(base, metric="wall_step", value=wall_step),
               dict(base, metric="startup_seconds", value=startup),
               dict(base, metric="step_samples", value=10),
               dict(base, metric="warmup_steps", value=2)]
    (run / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return cell


def test_a_cell_is_scaled_from_its_newest_earlier_run(tmp_path):
    earlier_run(tmp_path, "old", started=1.0, wall_step=2.0)
    earlier_run(tmp_path, "new", started=2.0)  # newest by start time, whatever its name
    earlier_run(tmp_path, "zzz-other-stack", stack="paper-py39", started=3.0, wall_step=9.0)
    basis = estimate.history(tmp_path, "local", ["current"])
    paper = matrix.plan("paper", 3, systems="pytorch-sync", benchmarks="lenet5-cifar10")
    rows, total = estimate.plan_seconds(paper, basis)
    # 10 s start-up + 3,960 steps x 0.5 s + 14 s of the rest
    assert total == pytest.approx(10 + 3960 * 0.5 + 14)
    assert rows[0][2] == "new"


def test_cells_without_a_basis_are_named(tmp_path):
    earlier_run(tmp_path, "new")
    quick = matrix.plan("quick", 3, systems="pytorch-sync,mxnet-sync",
                        benchmarks="lenet5-cifar10")
    rows, total = estimate.plan_seconds(quick, estimate.history(tmp_path, "local", ["current"]))
    assert [r[1] is None for r in rows] == [False, True]
    assert "1 without a basis: `invoke estimate`" in estimate.describe(rows, total)[-1]


def probe(*speeds):
    return {"nodes": {"node%d" % (i + 1): {"alone": v} for i, v in enumerate(speeds)}}


def test_a_cell_never_run_gets_a_prior_scaled_by_the_slowest_node(tmp_path, monkeypatch):
    """A first run: with the nodes' probe, every cell without a basis gets the prior's
    figures, scaled by the slowest node's probe speed against the prior's machine; a cell
    with a basis keeps it; without a probe nothing is guessed."""
    earlier_run(tmp_path, "new")
    monkeypatch.setattr(estimate, "PRIOR_SPEED", 400.0)
    monkeypatch.setitem(estimate.PRIOR_STEP, "lenet5", 0.02)
    monkeypatch.setattr(estimate, "PRIOR_STARTUP", 5.0)
    quick = matrix.plan("quick", 3, systems="pytorch-sync,mxnet-sync",
                        benchmarks="lenet5-cifar10")  # 30 steps, 10 profiled
    history = estimate.history(tmp_path, "local", ["current"])
    rows, total = estimate.plan_seconds(quick, history, probe(800.0, 200.0, 400.0))
    assert [r[2] for r in rows] == ["new", estimate.PRIOR]
    # half this machine's speed: start-up 5 x 2, 30 steps x 0.04, rest 3 + 2 x 10 x 0.04
    assert rows[1][1] == pytest.approx(10 + 30 * 0.04 + 3 + 0.8)
    assert total == pytest.approx(rows[0][1] + rows[1][1])
    line = estimate.summary(rows, total)
    assert "(1 from a prior: 15 s," in line and "off 2x either way; 1 from earlier runs)" in line
    assert "without a basis" not in line
    assert estimate.describe(rows, total)[1].endswith("(basis: a prior)")
    unknown, _ = estimate.plan_seconds(quick, history, {"nodes": {}})
    assert unknown[1][1] is None


def test_a_plan_with_no_basis_says_so_and_never_0_s():
    """No earlier run and no probe: the dry run says there is no basis, not "0 s",
    and so does its note of what 3 repeats would cost."""
    cells = matrix.plan("smoke", 2)
    rows, total = estimate.plan_seconds(cells, {})
    assert estimate.summary(rows, total) == ("expected: no basis for any of the 5 cell(s): "
                                             "`invoke estimate` times a few steps of each")
    (note,) = lifecycle.repeats_note(cells, rows, total)
    assert note.endswith("--repeats 3: no basis to say how long (5 cell(s) without an "
                         "estimate: `invoke estimate`)") and "0 s" not in note


def test_max_hours_refuses_a_plan_too_long_or_unknown(tmp_path):
    earlier_run(tmp_path, "new")
    paper = matrix.plan("paper", 3, systems="pytorch-sync", benchmarks="lenet5-cifar10")
    expected = estimate.plan_seconds(paper, estimate.history(tmp_path, "local", ["current"]))
    lifecycle.check_limit(expected, 1.0)  # 33.4 min: within an hour
    with pytest.raises(UserError, match=r"expected to take 33.4 min, over --max-hours 0.5"):
        lifecycle.check_limit(expected, 0.5)
    unknown = estimate.plan_seconds(paper, {})
    with pytest.raises(UserError, match="have no estimate yet"):
        lifecycle.check_limit(unknown, 10)
    with pytest.raises(UserError, match="positive number of hours"):
        options.check_hours("-1")


class _Proc:
    def __init__(self, step):
        self.progress = {"step": step}


@pytest.mark.parametrize("after, expected", [
    ((600.0, 0), ", cell ETA 30s, run ETA 10min"),
    ((600.0, 2), ", cell ETA 30s, run ETA 10min + 2 cell(s) not estimated"),
])
def test_the_run_eta_says_how_many_later_cells_it_could_not_count(after, expected):
    """40 of 160 steps in 10 s: 30 s left in the cell, then the later cells' estimates."""
    cell = dataclasses.replace(matrix.plan("verdict", 3, benchmarks="lenet5-cifar10",
                                           systems="pytorch-sync")[0],
                               steps_per_epoch=40, max_epochs=4)  # up to 160 steps
    display = progress.CellProgress(cell, [], console=Console(file=io.StringIO()), after=after)
    assert display.eta([_Proc(40), _Proc(38)], 10.0) == expected
