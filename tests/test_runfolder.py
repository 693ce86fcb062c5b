"""The run folder (contract/runfolder.py): typed cell status, attempts kept aside, the newest
run by start time."""
import pytest

from contract import runfolder
from contract.errors import UserError
from contract.runfolder import CellStatus, RunFolder


def test_a_status_round_trips_and_refuses_unknown_keys(tmp_path):
    run = RunFolder(tmp_path / "r1")
    status = CellStatus("cell-a", status="running", settings={"benchmark": "lenet5-cifar10"})
    status.update(reason="", started=10.0)
    status["processes"] = [{"node": "node1", "pid": 42}]
    run.save_status(status, now=11.0)
    again = run.status("cell-a")
    assert again == CellStatus("cell-a", status="running", reason="", started=10.0,
                               updated=11.0, settings={"benchmark": "lenet5-cifar10"},
                               processes=[{"node": "node1", "pid": 42}])
    assert again.get("seconds", 0.0) == 0.0
    with pytest.raises(KeyError, match="no key 'reasn'"):
        again["reasn"] = "typo"
    with pytest.raises(ValueError, match="status 'done' is not one of"):
        CellStatus("cell-a", status="done")


def test_a_cell_without_a_status_file_is_pending(tmp_path):
    assert RunFolder(tmp_path).status("never-ran") == CellStatus("never-ran")


def test_an_earlier_attempt_is_set_aside_never_overwritten(tmp_path):
    run = RunFolder(tmp_path / "r1")
    for attempt in (1, 2):
        run.save_status(CellStatus("cell-a", status="failed", reason="try %d" % attempt), 1.0)
        (run.path / "cell-a" / "log.txt").write_text("attempt %d" % attempt)
        run.set_aside("cell-a")
        assert run.status("cell-a").status == "pending"
    kept = sorted(p.name for p in (run.path / ".attempts").iterdir())
    assert kept == ["cell-a.1", "cell-a.2"]
    assert (run.path / ".attempts" / "cell-a.2" / "log.txt").read_text() == "attempt 2"


def test_a_pending_cell_is_not_set_aside(tmp_path):
    run = RunFolder(tmp_path / "r1")
    run.set_aside("cell-a")
    assert not (run.path / ".attempts").exists()


def test_the_latest_run_is_the_newest_by_start_time_not_by_name(tmp_path):
    """A user-named run sorts after every dated one; it must not hide a later run."""
    for name, started in (("20261123-killB3", 100.0), ("20261123-090000", 200.0),
                          ("20261122-230000", 50.0)):
        RunFolder(tmp_path / name).write_manifest({"run_id": name, "started": started})
    assert runfolder.find(tmp_path).name == "20261123-090000"
    assert runfolder.find(tmp_path, "20261123-killB3").name == "20261123-killB3"
    with pytest.raises(UserError, match="no run 'nope'"):
        runfolder.find(tmp_path, "nope")


def test_a_run_without_records_names_the_collect_to_run(tmp_path):
    run = RunFolder(tmp_path / "r1")
    with pytest.raises(UserError) as error:
        run.require_records()
    assert "invoke collect --run r1" in error.value.fix


def test_retry_failed_runs_a_cell_disturbed_in_both_attempts_again():
    """Left out of the verdicts, so --retry-failed runs it again; a calm one is kept."""
    from harness.run import resume
    disturbed = {"status": "succeeded", "disturbed": "disturbed (node1: other programs 9% ...)"}
    assert resume.should_run(disturbed, retry_failed=True, force=False)
    assert not resume.should_run(disturbed, retry_failed=False, force=False)
    assert not resume.should_run({"status": "succeeded", "disturbed": ""}, True, False)
    assert resume.should_run({"status": "failed", "reason": "x"}, True, False)


def test_collect_keeps_each_nodes_cpu_as_the_runs_processes_read_it(tmp_path):
    import json
    from harness.results import run_manifest
    for node, model in (("node1", "AMD EPYC 7B13"), ("node2", "Intel(R) Xeon(R)")):
        folder = tmp_path / "cell-a" / node / "worker-0"
        folder.mkdir(parents=True)
        (folder / "result.json").write_text(json.dumps({"cpu": {"model": model, "isa": []}}))
    (tmp_path / "cell-b" / "node3" / "worker-0").mkdir(parents=True)
    (tmp_path / "cell-b" / "node3" / "worker-0" / "result.json").write_text("{broken")
    assert run_manifest.cpus_seen(run_manifest.results_of(tmp_path)) == {"node1": {"model": "AMD EPYC 7B13", "isa": []},
                                           "node2": {"model": "Intel(R) Xeon(R)", "isa": []}}


def test_bench_options_keep_the_manifest_and_the_resume_rules():
    from harness.plan.options import BenchOptions
    options = BenchOptions.given(systems="pytorch-sync", nodes="1,2", hooks=[object()],
                                 fail_fast=True, inventory="local", results="results")
    assert options.nodes == "1,2"
    manifest = options.manifest()
    assert "fail_fast" not in manifest and "hooks" not in manifest
    assert "inventory" not in manifest and "results" not in manifest  # the manifest's own
    assert manifest["systems"] == "pytorch-sync" and manifest["threads"] == 0
    assert options.chosen() == ["systems", "nodes"]
    # --profile-steps 0 chooses cells too: a resumed run refuses it
    assert BenchOptions(profile_steps=0).chosen() == ["profile_steps"]
    assert BenchOptions(repeats=3).chosen() == ["repeats"] and BenchOptions().chosen() == []
    with pytest.raises(TypeError, match="no option colour"):
        BenchOptions.given(colour="red")
    assert options.command_line(False) == ["--fail-fast"]
    assert options.command_line(True) == ["--systems", "pytorch-sync", "--nodes", "1,2",
                                          "--fail-fast"]


def test_a_run_is_whole_only_when_every_cell_succeeded_undisturbed(tmp_path):
    """Exit codes (contract/errors.py): `bench` and `reproduce` exit 3 for a run with a failed,
    disturbed or pending cell, over the whole folder (a resume's earlier cells too)."""
    import invoke
    import tasks
    from harness import commands
    run = RunFolder(tmp_path / "r1")
    for cell, given in (("a", {"status": "succeeded"}), ("b", {"status": "succeeded"})):
        run.save_status(CellStatus(cell, **given), now=1.0)
    outcome = {"run_id": "r1", "path": run.path}
    assert commands.unfinished(outcome) == ""
    tasks._exit_unless_whole("", "r1")  # a whole run: no exit
    run.save_status(CellStatus("b", status="succeeded", disturbed="node1: others 9%"), now=2.0)
    run.save_status(CellStatus("c", status="failed", reason="timeout"), now=2.0)
    run.save_status(CellStatus("d"), now=2.0)
    assert commands.unfinished(outcome) == "1 failed, 1 disturbed, 1 pending"
    with pytest.raises(invoke.Exit) as stopped:
        tasks._exit_unless_whole(commands.unfinished(outcome), "r1")
    assert stopped.value.code == 3 and "run r1 has 1 failed, 1 disturbed, 1 pending" in \
        stopped.value.message
    assert commands.unfinished(None) == "" and commands.unfinished({"printed": 1}) == ""


def test_a_refusal_exits_2_and_a_run_stopped_midway_3():
    from contract.errors import EXIT_INCOMPLETE, EXIT_REFUSED, RunIncomplete
    assert UserError("bad").exit_code == EXIT_REFUSED == 2
    assert RunIncomplete("node2 drained: 1 cell(s) left pending").exit_code == EXIT_INCOMPLETE
