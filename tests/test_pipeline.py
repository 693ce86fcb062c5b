"""A run's life and its cells' pipeline (harness/run/lifecycle.py, pipeline.py, hooks.py), and
the options declared once
(harness/plan/options.py): the logic around the parts, with stand-ins for the nodes. That the
stages run real cells is the local cluster's tests' (tests/test_local_cluster.py)."""

import time

import pytest

from contract.errors import RunIncomplete, UserError
from contract.runfolder import CellStatus
from harness.nodes.stacks import RunStacks
from harness.plan import matrix, options
from harness.plan.options import BenchOptions
from harness.run import hooks, lifecycle, pipeline

(CELL,) = matrix.plan("smoke", 2, systems="pytorch-sync")


def a_run(tmp_path, expected=(), **given):
    """A run on no nodes (nothing connects), its seconds from `expected` rows."""
    run = lifecycle.Run(BenchOptions(stack="current", **given), tmp_path / "r", nodes=[])
    run.seconds = {cell.id: s for cell, s, _ in expected}
    return run


def test_a_failed_cell_stops_the_run_only_with_fail_fast_or_a_node_taken(tmp_path, monkeypatch):
    monkeypatch.setattr(lifecycle.launch, "unusable", lambda nodes, fresh: "")
    assert a_run(tmp_path)._go_on("failed", left=2)
    assert not a_run(tmp_path, fail_fast=True)._go_on("failed", left=2)
    assert a_run(tmp_path, fail_fast=True)._go_on("succeeded", left=2)
    assert a_run(tmp_path, fail_fast=True)._go_on("failed", left=0)  # nothing left to stop
    monkeypatch.setattr(lifecycle.launch, "unusable", lambda nodes, fresh: "node2 is DOWN")
    with pytest.raises(RunIncomplete, match="node2 is DOWN: 2 cell"):
        a_run(tmp_path)._go_on("failed", left=2)


def test_the_eta_after_a_cell_counts_the_cells_without_an_estimate(tmp_path):
    cells = matrix.plan("smoke", 2)
    run = a_run(tmp_path, expected=[(cells[0], 10.0, ""), (cells[1], None, ""),
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
    run = a_run(tmp_path)
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


def test_hooks_act_before_and_after_each_stage_in_order(tmp_path):
    """Every hook's before, the stage, every hook's after on its value in the order given; a
    stage that does not exist is an error, not a point nobody calls."""
    seen = []

    class Note(hooks.Hook):
        def __init__(self, name):
            self.name = name

        def before(self, stage, run, cell=None):
            seen.append("%s before %s" % (self.name, stage))

        def after(self, stage, run, value, cell=None):
            seen.append("%s after %s" % (self.name, stage))
            return value + [self.name]
    run = a_run(tmp_path, hooks=[Note("a"), Note("b")])
    assert run.stage("probe", lambda: seen.append("probe") or []) == ["a", "b"]
    assert seen == ["a before probe", "b before probe", "probe", "a after probe",
                    "b after probe"]
    with pytest.raises(ValueError, match="no stage 'probing'"):
        run.hooks.before("probing", run)
    assert "hooks" not in BenchOptions(hooks=[Note("a")]).manifest()  # not a setting of the run


def test_a_cell_goes_through_its_stages_and_a_hook_changes_its_cell_json(tmp_path,
                                                                         monkeypatch):
    """The same-math hook adds to every cell.json of a math cell at the prepare stage; the
    stages run in order, and fetch, judge and record run after a launch that raised."""
    from harness.run.launch import Process
    from selfcheck.math_check import SameMath
    (math_cell,) = matrix.plan("math", 2, systems="pytorch-sync")
    stages = []

    class Order(hooks.Hook):
        def after(self, stage, run, value, cell=None):
            stages.append(stage)
            return value
    run = a_run(tmp_path, hooks=[SameMath("pytorch-momentum-off"), Order()])
    monkeypatch.setattr(run, "bounds", lambda cell: None)
    config = dict(planted="", init_checksum="", classes=10)
    node = type("Node", (), {"name": "node1"})()
    processes = [Process(node=node, role="worker", rank=0, out_dir="", config=dict(config))]
    monkeypatch.setattr(pipeline.CellRun, "prepare", lambda self: processes)
    monkeypatch.setattr("contract.cellconfig.check", lambda config, where: None)

    def launch(self, procs):
        raise RuntimeError("a node went away")
    monkeypatch.setattr(pipeline.CellRun, "launch", launch)
    for stage in ("fetch", "judge", "record"):
        monkeypatch.setattr(pipeline.CellRun, stage, lambda self: self.status)
    with pytest.raises(RuntimeError):
        pipeline.CellRun(run, math_cell).go()
    assert stages == ["prepare", "fetch", "judge", "record"]
    assert processes[0].config["planted"] == "pytorch-momentum-off"
    assert len(processes[0].config["init_checksum"]) == 64
    plain = [Process(node=node, role="worker", rank=0, out_dir="", config=dict(config))]
    SameMath("x").after("prepare", run, plain, CELL)  # not a math cell: left alone
    assert plain[0].config == config


def test_hooks_plan_a_new_run_and_choose_the_cells_that_run_now(tmp_path):
    from harness.ladder_run import Round
    cells = matrix.plan("smoke", 2, systems="pytorch-sync,mxnet-sync", repeats=2)
    own = hooks.Plan(cells, cells, 7)
    run = a_run(tmp_path)
    assert hooks.Hook().after("plan", run, own) is own  # the run plans its own
    given = Round(1, cells[:3]).after("plan", run, own)
    assert given.cells == cells[:3] and given.order_seed is None  # their order kept
    assert [c.repeat for c in given.todo] == [1]
    assert [c.repeat for c in Round(1).after("plan", run, own).todo] == [1, 1]
    run.resuming = True  # a resumed run's cells come from its manifest
    assert Round(1, cells[:3]).after("plan", run, own).cells == cells


def test_a_fault_hook_kills_its_victim_once_from_what_the_watch_loop_polled(tmp_path):
    """The kill comes at the first poll that sees the trigger's step (and its delay passed),
    by the pid the victim reports, once; another cell's polls are not its."""
    from harness.run.launch import Process
    from selfcheck import faults

    class Node:
        def __init__(self, name):
            self.name, self.sent = name, []

        def run(self, command, check=True):
            self.sent.append(command)
            return type("Result", (), {"exited": 0})()
    node1, node2 = Node("node1"), Node("node2")
    trigger = Process(node=node1, role="worker", rank=0, out_dir="", progress={"step": 1})
    victim = Process(node=node2, role="worker", rank=1, out_dir="",
                     progress={"step": 1, "pid": 4242, "phase": "train"})
    killer = faults.KillWhenTraining("node1", "node2", CELL.id)
    run = a_run(tmp_path)
    killer.after("poll", run, [trigger, victim], CELL)
    assert node2.sent == []  # step 1: not yet
    trigger.progress["step"] = 2
    (other,) = matrix.plan("smoke", 2, systems="mxnet-sync")
    killer.after("poll", run, [trigger, victim], other)
    assert node2.sent == []  # another cell
    killer.after("poll", run, [trigger, victim], CELL)
    killer.after("poll", run, [trigger, victim], CELL)
    assert node2.sent == ["kill -KILL 4242"] and killer.victim_phase == "train"
    assert killer.pid == 4242 and killer.killed_at


def test_a_node_fault_comes_once_at_the_trigger_s_progress_and_is_repaired_before_fetch(
        tmp_path):
    """A link cut or a VM destroyed (faults.NodeFault): injected at the first poll where a
    process on the trigger node reports progress (or the step asked for), once; repaired
    once, before the cell's files are fetched (a stage that runs whatever the launch
    raised), not again before a retry's fetch; another cell untouched."""
    from types import SimpleNamespace
    from selfcheck import faults
    done = []
    node1, node3 = SimpleNamespace(name="node1"), SimpleNamespace(name="node3")
    starting = SimpleNamespace(node=node3, progress={})
    trains = SimpleNamespace(node=node1, progress={"step": 1})
    cut = faults.NodeFault("node1", CELL.id, lambda: done.append("cut"),
                           lambda: done.append("up"), step=2)
    anything = faults.NodeFault("node3", CELL.id, lambda: done.append("destroyed"))
    run = a_run(tmp_path)
    (other,) = matrix.plan("smoke", 2, systems="mxnet-sync")
    for hook in (cut, anything):
        hook.after("poll", run, [starting, trains], CELL)
        hook.before("fetch", run, CELL)
    assert done == [] and cut.injected_at is None  # step 1; node3's progress not yet written
    trains.progress["step"], starting.progress = 2, {"phase": "setup"}
    for hook in (cut, anything):
        hook.after("poll", run, [starting, trains], other)
    assert done == []  # another cell's polls
    for _ in range(2):
        for hook in (cut, anything):
            hook.after("poll", run, [starting, trains], CELL)
    assert done == ["cut", "destroyed"] and cut.injected_at and anything.injected_at
    cut.before("judge", run, CELL)
    cut.before("fetch", run, other)
    assert done == ["cut", "destroyed"]
    for _ in range(2):  # the cell's fetch, then a retry's
        cut.before("fetch", run, CELL)
        anything.before("fetch", run, CELL)  # no repair given
    assert done == ["cut", "destroyed", "up"] and cut.repaired_at


def test_options_come_from_one_dataclass_with_their_checks():
    names = [f.name for f in options.on_command_line(BenchOptions)]
    assert names[:5] == ["inventory", "stack", "stacks", "size", "run"]
    assert not {"hooks", "profile"} & set(names)  # 'profile' is the operator profile's word
    with pytest.raises(TypeError, match="bench has no option profile"):
        BenchOptions.given(profile="smoke")
    parsed = BenchOptions.parsed(steps="21", profile_steps="0", max_hours="1.5", systems="a")
    assert (parsed.steps, parsed.profile_steps, parsed.max_hours) == (21, 0, 1.5)
    with pytest.raises(UserError, match="--profile-steps must be a whole number >= 0"):
        BenchOptions.parsed(profile_steps="-1")
    with pytest.raises(TypeError, match="bench has no option node_counts"):
        BenchOptions.given(node_counts="1,2")  # the older names are gone


def test_invoke_reads_each_task_s_parameters_from_its_dataclass():
    """Every task that takes options takes them from one dataclass: its parameters are the
    fields that have help, in order, with their defaults (a required one positional)."""
    import inspect
    import tasks
    from harness.plan import task_options
    every = [t for name in tasks.ns.task_names for t in [tasks.ns[name]]]
    with_options = [t for t in every if t.argspec(t.body).parameters]
    assert len(with_options) == 27 and all(hasattr(t, "options_type") for t in with_options), \
        [t.name for t in with_options if not hasattr(t, "options_type")]
    for task in with_options:
        parameters = list(task.argspec(task.body).parameters.values())
        fields = options.on_command_line(task.options_type)
        # and --profile after --size, its old name, which tasks.py alone takes
        names = [f.name for f in fields]
        if "size" in names:
            names.insert(names.index("size") + 1, tasks.OLD_SIZE)
        assert [p.name for p in parameters] == names, task.name
        assert [p.default for p in parameters if p.name != tasks.OLD_SIZE] == [
            inspect.Parameter.empty if f.metadata.get("required") else f.default
            for f in fields], task.name
        assert set(task.help) == set(names)
        assert not any("{" in text for text in task.help.values()), task.name  # filled in
    assert tasks.compare.positional == ["run_a", "run_b"]
    with pytest.raises(UserError, match="--rounds must be a whole number >= 1"):
        task_options.built(task_options.OverheadOptions, {"rounds": "0"})


def test_what_each_option_is_its_field_says_and_the_plan_takes_the_choice_whole():
    """Which options choose cells (a resumed run refuses them), say where the run goes, or how
    it goes, and which a batch script passes on: read from each field's metadata, not lists
    kept beside the fields. The cells they choose reach matrix.plan as one Choice."""
    from dataclasses import fields
    kinds = {f.name: f.metadata["kind"] for f in fields(BenchOptions)}
    assert options.of_kind(BenchOptions, options.CHOOSES) == (
        "benchmarks", "systems", "epochs", "steps", "data", "network", "nodes", "profile_steps")
    assert set(options.of_kind(BenchOptions, options.RUNS)) == {
        "dry_run", "fail_fast", "retry_failed", "force", "max_hours"}
    assert kinds["size"] == kinds["run"] == kinds["partition"] == options.WHERE
    assert set(BenchOptions().manifest()) == {"benchmarks", "systems", "epochs", "steps", "data",
                                              "timeout", "repeats", "network", "nodes",
                                              "profile_steps", "environment", "threads"}
    resumed = BenchOptions(fail_fast=True, force=True, steps=7).command_line(False)
    assert resumed == ["--fail-fast", "--force"]  # the cells' choice stays with the run
    choice = BenchOptions(systems="pytorch-sync", steps=7).choice(order_seed=3)
    assert (choice.systems, choice.steps, choice.order_seed, choice.threads) == (
        "pytorch-sync", 7, 3, 0)
    assert [c.steps_per_epoch for c in matrix.plan("smoke", 2, choice)] == [7]
    with pytest.raises(Exception):
        choice.steps = 8  # frozen: the plan's input cannot change under it


def test_reproduce_takes_every_option_of_the_steps_it_runs():
    """`invoke reproduce --systems ...` runs a part of the matrix: its options are bench's and
    provision's, each handed to its step, bench's counts checked as bench checks them; those
    that leave nothing to collect are bench's alone."""
    reproduce = {f.name for f in options.on_command_line(options.ReproduceOptions)}
    bench = {f.name for f in options.on_command_line(BenchOptions)}
    provision = {f.name for f in options.on_command_line(options.ProvisionOptions)}
    assert reproduce == (bench | provision) - set(options.BENCH_ONLY)
    given = options.ReproduceOptions(inventory="local", stack="current", size="smoke",
                                     systems="pytorch-sync", steps="3", frameworks="pytorch",
                                     nodes="1,2", results="r")
    bench_options = given.bench_options()
    assert (bench_options.systems, bench_options.steps, bench_options.nodes) == (
        "pytorch-sync", 3, "1,2")
    provision_options = given.provision_options()
    assert (provision_options.frameworks, provision_options.nodes) == ("pytorch", "1,2")
    with pytest.raises(UserError, match="--steps must be a whole number"):
        options.ReproduceOptions(steps="0").bench_options()


def test_a_plan_refuses_a_choice_it_does_not_know():
    with pytest.raises(TypeError, match="unexpected keyword argument 'colour'"):
        matrix.plan("smoke", 2, colour="red")
    assert [c.steps_per_epoch for c in matrix.plan("smoke", 2, steps=7)] == [7] * 5


def test_each_cell_runs_under_its_own_stack_in_a_run_of_two():
    """The stack is a factor like the system-mode: a run of two plans each cell under both,
    each block holding both stacks' cells; a run of one plans cells that name none (their
    ids stay those of runs before cells named a stack), which run under the run's stack."""
    two = RunStacks.load(["paper-py39", "current"])
    cells = lifecycle.plan_cells(BenchOptions(size="verdict", benchmarks="lenet5-cifar10",
                                              stacks="paper-py39,current"), 2, order_seed=3)
    assert len(cells) == 5 * 2 * 3
    for repeat in range(3):
        block = [c for c in cells if c.repeat == repeat]
        assert block == cells[repeat * 10:(repeat + 1) * 10]  # blocks one after another
        assert {(c.system, c.stack) for c in block} == {
            (s, k) for s in matrix.SYSTEMS for k in ("paper-py39", "current")}
    assert {two.of(c).name for c in cells} == {"paper-py39", "current"}
    assert len({c.id for c in cells}) == len(cells)
    (one,) = lifecycle.plan_cells(BenchOptions(size="smoke", systems="pytorch-sync",
                                               stack="current"), 2)
    assert one.stack == "" and one.id == CELL.id
    assert RunStacks.load(["current"]).of(one).name == "current"
    with pytest.raises(UserError, match="runs under stack paper-py39, which this run"):
        RunStacks.load(["current"]).of(next(c for c in cells if c.stack == "paper-py39"))


def test_help_after_a_task_with_a_required_option_says_where_the_help_is():
    """`invoke ledger.import --help`: Invoke hands --help to the required option; the task
    says so and names `invoke --help ledger.import` instead of looking for a file --help."""
    import tasks
    with pytest.raises(UserError) as refused:
        tasks._refuse_help_as_value({"archive": "--help", "digest": None}, "ledger_import",
                                    "import")
    assert refused.value.fix == "`invoke --help ledger.import` shows its help"
    with pytest.raises(UserError, match="one of fault-bench's options"):
        tasks._refuse_help_as_value({"run": "-h"}, "fault_bench", "fault-bench")
    tasks._refuse_help_as_value({"archive": "a.tar.gz"}, "ledger_import", "import")
