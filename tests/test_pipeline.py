"""A run and its cells' pipeline (harness/run/pipeline.py), and the options declared once
(harness/plan/options.py): the logic around the parts, with stand-ins for the nodes. That the
stages run real cells is the local cluster's tests' (tests/test_local_cluster.py)."""

import time

import pytest

from contract.errors import RunIncomplete, UserError
from contract.runfolder import CellStatus
from harness.nodes.stacks import RunStacks
from harness.plan import matrix, options
from harness.plan.options import BenchOptions
from harness.run import pipeline

(CELL,) = matrix.plan("smoke", 2, systems="pytorch-sync")


def a_run(tmp_path, **given):
    return pipeline.Run(tmp_path / "r", "r", [], RunStacks.load(["current"]),
                        BenchOptions(**given))


def test_a_failed_cell_stops_the_run_only_with_fail_fast_or_a_node_taken(tmp_path, monkeypatch):
    monkeypatch.setattr(pipeline.launch, "unusable", lambda nodes, fresh: "")
    assert a_run(tmp_path)._go_on("failed", left=2)
    assert not a_run(tmp_path, fail_fast=True)._go_on("failed", left=2)
    assert a_run(tmp_path, fail_fast=True)._go_on("succeeded", left=2)
    assert a_run(tmp_path, fail_fast=True)._go_on("failed", left=0)  # nothing left to stop
    monkeypatch.setattr(pipeline.launch, "unusable", lambda nodes, fresh: "node2 is DOWN")
    with pytest.raises(RunIncomplete, match="node2 is DOWN: 2 cell"):
        a_run(tmp_path)._go_on("failed", left=2)


def test_the_eta_after_a_cell_counts_the_cells_without_an_estimate(tmp_path):
    cells = matrix.plan("smoke", 2)
    run = pipeline.Run(tmp_path, "r", [], None, BenchOptions(),
                       expected=[(cells[0], 10.0, ""), (cells[1], None, ""),
                                 (cells[2], 5.5, "")])
    assert run._after(cells[1:3])[:2] == (5.5, 1)
    assert run._after(cells[1:])[:2] == (5.5, 3)  # cells 4 and 5: no estimate either
    assert run._after([])[:2] == (0, 0)


def test_the_display_says_where_the_run_stands(tmp_path):
    """Before each cell, and in the terminal's live table: the cell's place, the cells done
    with how many were disturbed and failed (read from their status), the time so far."""
    import io
    from rich.console import Console
    from harness.run import progress
    cells = matrix.plan("smoke", 2)
    run = pipeline.Run(tmp_path, "r", [], None, BenchOptions())
    run.save(CellStatus(cells[0].id, status="succeeded", disturbed="disturbed (node2: ...)"))
    run.save(CellStatus(cells[1].id, status="succeeded"))
    tally = {"done": 0, "failed": 0, "disturbed": 0}
    for cell, outcome in zip(cells, ("succeeded", "succeeded", "failed")):
        run._count(tally, cell.id, outcome)
    assert tally == {"done": 3, "failed": 1, "disturbed": 1}
    so_far = run._after(cells[4:], index=4, total=5, began=time.monotonic() - 100, **tally)
    assert so_far.text() == "cell 4/5; 3 done, 1 disturbed, 1 failed; 100s in"
    screen = io.StringIO()
    display = progress.CellProgress(cells[3], [], after=so_far, console=Console(
        file=screen, force_terminal=True, width=120))
    screen_text = display._table([], 12.0).title
    assert screen_text.startswith("cell 4/5; 3 done, 1 disturbed, 1 failed; ") and \
        cells[3].id in screen_text
    with display:  # the live table stands in place, and leaves with the cell
        assert display.live.transient
    log = io.StringIO()  # not a terminal: plain lines, no live table
    with progress.CellProgress(cells[3], [], after=so_far, console=Console(file=log)) as plain:
        assert plain.live is None


def test_hooks_add_to_every_cell_json_in_the_prepare_stage(tmp_path, monkeypatch):
    seen = {}

    class Hook(pipeline.Hook):
        def cell_config(self, cell, classes):
            return {"init_checksum": "%s/%d" % (cell.network, classes)}

    def prepare(cell, run_id, nodes, stack, shards, lease, together, extra):
        seen.update(extra=extra, run_id=run_id)
        return ["processes"]
    monkeypatch.setattr(pipeline, "shard_index", lambda cell, count: {"classes": 10})
    monkeypatch.setattr(pipeline.launch, "prepare", prepare)
    run = a_run(tmp_path, hooks=[Hook()])
    monkeypatch.setattr(run, "bounds", lambda cell: None)
    assert pipeline.CellRun(run, CELL).prepare() == ["processes"]
    assert seen == {"extra": {"init_checksum": "lenet5/10"}, "run_id": "r"}
    assert "hooks" not in BenchOptions(hooks=[Hook()]).manifest()  # not a setting of the run


def test_hooks_plan_a_new_run_and_choose_the_cells_that_run_now():
    from harness.ladder_run import Round
    cells = matrix.plan("smoke", 2, systems="pytorch-sync,mxnet-sync", repeats=2)
    assert pipeline.planned([pipeline.Hook()]) is None  # the run plans its own
    assert pipeline.planned([Round(1, cells[:3])]) == cells[:3]
    assert [c.repeat for c in pipeline.chosen([Round(1)], cells)] == [1, 1]
    assert pipeline.chosen([pipeline.Hook()], cells) == cells


def test_the_same_math_hook_plants_its_error_in_math_cells_only():
    from selfcheck.math_check import SameMath
    (math_cell,) = matrix.plan("math", 2, systems="pytorch-sync")
    config = SameMath("pytorch-momentum-off").cell_config(math_cell, 10)
    assert config["planted"] == "pytorch-momentum-off" and len(config["init_checksum"]) == 64
    assert SameMath("pytorch-momentum-off").cell_config(CELL, 10) == {}  # not a math cell


def test_options_come_from_one_dataclass_with_their_checks():
    names = [f.name for f in options.on_command_line(BenchOptions)]
    assert names[:6] == ["inventory", "stack", "stacks", "size", "profile", "run"]
    assert not {"hooks", "order_seed"} & set(names)
    parsed = BenchOptions.parsed(steps="21", profile_steps="0", max_hours="1.5", systems="a")
    assert (parsed.steps, parsed.profile_steps, parsed.max_hours) == (21, 0, 1.5)
    with pytest.raises(UserError, match="--profile-steps must be a whole number >= 0"):
        BenchOptions.parsed(profile_steps="-1")
    with pytest.raises(TypeError, match="bench has no option node_counts"):
        BenchOptions.given(node_counts="1,2")  # the older names are gone


def test_invoke_reads_each_task_s_parameters_from_its_dataclass():
    import tasks
    for task, options_type in ((tasks.bench, BenchOptions),
                               (tasks.provision, options.ProvisionOptions),
                               (tasks.explain, options.ExplainOptions),
                               (tasks.cluster_up, options.ClusterUpOptions)):
        parameters = list(task.argspec(task.body).parameters.values())
        fields = options.on_command_line(options_type)
        assert [p.name for p in parameters] == [f.name for f in fields]
        assert [p.default for p in parameters] == [f.default for f in fields]
        assert set(task.help) == {f.name for f in fields}
    assert "{" not in tasks.bench.help["inventory"]  # what the repository lists, filled in


def test_a_plan_refuses_a_choice_it_does_not_know():
    with pytest.raises(TypeError, match="unexpected keyword argument 'colour'"):
        matrix.plan("smoke", 2, colour="red")
    assert [c.steps_per_epoch for c in matrix.plan("smoke", 2, steps=7)] == [7] * 5


def test_each_cell_runs_under_its_own_stack_in_a_run_of_two():
    """The stack is a factor like the system-mode: a run of two plans each cell under both,
    each block holding both stacks' cells; a run of one plans cells that name none (their
    ids stay those of runs before cells named a stack), which run under the run's stack."""
    from harness import commands
    two = RunStacks.load(["paper-py39", "current"])
    cells = commands.plan_cells("verdict", 2, BenchOptions(
        benchmarks="lenet5-cifar10", order_seed=3, stacks="paper-py39,current"))
    assert len(cells) == 5 * 2 * 3
    for repeat in range(3):
        block = [c for c in cells if c.repeat == repeat]
        assert block == cells[repeat * 10:(repeat + 1) * 10]  # blocks one after another
        assert {(c.system, c.stack) for c in block} == {
            (s, k) for s in matrix.SYSTEMS for k in ("paper-py39", "current")}
    assert {two.of(c).name for c in cells} == {"paper-py39", "current"}
    assert len({c.id for c in cells}) == len(cells)
    (one,) = commands.plan_cells("smoke", 2, BenchOptions(systems="pytorch-sync",
                                                            stack="current"))
    assert one.stack == "" and one.id == CELL.id
    assert RunStacks.load(["current"]).of(one).name == "current"
    with pytest.raises(UserError, match="runs under stack paper-py39, which this run"):
        RunStacks.load(["current"]).of(next(c for c in cells if c.stack == "paper-py39"))
