"""invoke explain on made-up records whose factors' effects are known (an interaction
included): the plan's rungs, each effect, the remainder, the sentence, the levels read back,
and the column the main report gets."""
import json
import math

import pytest

import registry
from analysis import explain, report
from contract.errors import UserError
from harness.plan import ladder
from selfcheck import known_run

CLAIM = "tf_sync_vs_mxnet_sync"
TWO = {name: registry.factors()[name] for name in ("tf_kernels", "versions")}


def setting_records(tmp_path, name, tf_seconds, mx_seconds=100.0, repeats=1, disturbed=""):
    """A run of one setting: resnet18-cifar10, TensorFlow-sync and MXNet-sync at the given
    paper-scale times (TensorFlow's cells disturbed twice where `disturbed` says why); -> what
    explain.measure finds in it."""
    cells = []
    for r in range(repeats):
        cells += [known_run.cell("resnet18-cifar10", "tensorflow-sync", tf_seconds, repeat=r,
                                 disturbed=disturbed),
                  known_run.cell("resnet18-cifar10", "mxnet-sync", mx_seconds, repeat=r)]
    return measured_from(tmp_path, name, cells)


def measured_from(tmp_path, name, cells):
    """What explain.measure finds in a run of these fixture cells."""
    run = known_run.write_run(tmp_path, cells, run_id=name)
    from analysis import tidy
    records = tidy.load_records(run / "records.jsonl")
    manifest = json.loads((run / "manifest.json").read_text())
    return explain.measure(records, manifest, set(records.cell_id), {CLAIM})


def two_factor_plan():
    base, end = ladder.ends(TWO)
    return base, end, ladder.rungs(TWO)


def test_the_plan_moves_each_path_factor_from_2021s_setting():
    base, end, rungs = two_factor_plan()
    assert base.levels == (("tf_kernels", "0"), ("versions", "paper-py39"))
    assert end.levels == (("tf_kernels", "1"), ("versions", "current"))
    assert [(r.factor, r.before, r.after, r.side) for r in rungs] == [
        ("tf_kernels", base, base.moved("tf_kernels", "1"), "path"),
        ("versions", base, base.moved("versions", "current"), "path")]
    # TF 2.5 with oneDNN cannot run here: the same step measured from today's setting
    other = ladder.from_today(rungs[0], end)
    assert (other.before, other.after, other.side) == (
        end.moved("tf_kernels", "0"), end, "from today")


def test_a_what_if_factor_is_moved_from_todays_setting():
    factors = {"tf_input_cache": registry.factors()["tf_input_cache"]}
    base, end = ladder.ends(factors)
    assert base == end
    (rung,) = ladder.rungs(factors)
    assert (rung.before, rung.after.get("tf_input_cache"), rung.side) == (end, "0", "what-if")


def test_each_setting_runs_with_its_stack_and_variables_for_its_frameworks_only():
    factors = dict(TWO, ddp_bucket=registry.factors()["ddp_bucket"])
    base, end = ladder.ends(factors)
    stack, environment, threads, link = ladder.run_of(end.moved("ddp_bucket", "0"), factors,
                                                      "current")
    assert (stack, threads, link) == ("current", 0, "")
    assert environment == {"tensorflow": "TF_ENABLE_ONEDNN_OPTS=1",
                           "pytorch": "DLBENCH_DDP_BUCKET_MB=0"}
    stack, cells = ladder.cells(base, factors, "current", "smoke", 2, ["lenet5-cifar10"],
                                ["tensorflow-sync", "mxnet-sync"], 2)
    assert stack == "paper-py39"
    assert [(c.system, c.repeat, c.exported) for c in cells] == [
        ("tensorflow-sync", 0, {"TF_ENABLE_ONEDNN_OPTS": "0"}), ("mxnet-sync", 0, {}),
        ("tensorflow-sync", 1, {"TF_ENABLE_ONEDNN_OPTS": "0"}), ("mxnet-sync", 1, {})]
    # a factor's level is part of the cell's id; a cell without one keeps the id it had
    plain = ladder.cells(ladder.Setting(()), {}, "paper-py39", "smoke", 2, ["lenet5-cifar10"],
                         ["mxnet-sync"], 1)[1][0]
    assert plain.id == cells[1].id and cells[0].id != ladder.cells(
        end, factors, "current", "smoke", 2, ["lenet5-cifar10"], ["tensorflow-sync"], 1)[1][0].id


def test_factors_that_cannot_apply_here_are_left_out_with_the_reason():
    chosen, left = ladder.choose("threads,link,tf_kernels", "local", [1, 1])
    assert list(chosen) == ["tf_kernels"]
    assert left == {
        "threads": "the nodes have 1 vCPU(s): its levels would run alike (needs more than 1)",
        "link": "applies only on the netns inventory (this run: local)"}
    with pytest.raises(UserError, match="unknown factor"):
        ladder.choose("oneDNN", "local", [1])
    # the default: every factor whose 2021 level differs from today's
    assert list(ladder.choose(None, "local", [4])[0]) == ["tf_kernels", "versions"]


def test_a_wrong_factors_file_is_named(tmp_path):
    bad = tmp_path / "factors.yml"
    bad.write_text("factors:\n  x:\n    apply: {environment: 'A;B'}\n    levels: [{value: '0'}, "
                   "{value: '1'}]\n    paper: '0'\n    today: '1'\n")
    with pytest.raises(ValueError, match="factor x: 'A;B' is not an environment"):
        registry.factors(bad)


def test_effects_interaction_and_sentence_from_known_records(tmp_path):
    # TF/MXNet is 3.0 under 2021's setting; oneDNN alone halves TF's time (x0.5), the new
    # versions alone take 20% off (x0.8); together they would give 1.2, but TF runs at 90 s
    # (0.9): an interaction of 0.9 / 1.2 = 0.75
    base, end, rungs = two_factor_plan()
    measured = {base.key: setting_records(tmp_path, "base", 300.0),
                rungs[0].after.key: setting_records(tmp_path, "onednn", 150.0),
                rungs[1].after.key: setting_records(tmp_path, "versions", 240.0),
                end.key: setting_records(tmp_path, "end", 90.0)}
    claim = lambda s: measured[s.key]["claims"][CLAIM]
    row = explain.decompose(CLAIM, claim(base), claim(end),
                            [(r, claim(r.before), claim(r.after), "") for r in rungs], paper=3.66)
    assert (row["base"], row["end"]) == pytest.approx((3.0, 0.9))
    assert [e["value"] for e in row["effects"]] == pytest.approx([0.5, 0.8])
    assert row["product"] == pytest.approx(0.4)
    assert row["interaction"] == pytest.approx(0.75)
    assert row["sentence"] == "tf_kernels 0 -> 1 moves it most: x0.50 [0.50-0.50]"
    # the ratio of each setting's own TensorFlow time: within one framework
    (effect,) = explain.system_effects([(rungs[0], measured[base.key]["times"],
                                         measured[rungs[0].after.key]["times"])])
    assert (effect["system"], effect["value"]) == ("tensorflow-sync", pytest.approx(0.5))


def test_a_rung_that_cannot_run_is_named_and_left_out_of_the_product(tmp_path):
    base, end, rungs = two_factor_plan()
    b, e = (setting_records(tmp_path, n, s)["claims"][CLAIM] for n, s in (("b", 300.0),
                                                                          ("e", 120.0)))
    v = setting_records(tmp_path, "v", 240.0)["claims"][CLAIM]
    steps = [(rungs[0], b, None, "not measurable here: SIGFPE"), (rungs[1], b, v, "")]
    row = explain.decompose(CLAIM, b, e, steps)
    assert math.isnan(row["effects"][0]["value"])
    assert row["effects"][0]["why"] == "not measurable here: SIGFPE"
    assert row["product"] == pytest.approx(0.8)
    assert row["interaction"] == pytest.approx(0.4 / 0.8)  # oneDNN's share, unmeasured


def test_a_rung_whose_cell_stayed_disturbed_names_it_and_is_left_out_of_the_product(tmp_path):
    # a smoke ladder's effect must not come out NaN saying only "not measured"
    base, end, rungs = two_factor_plan()
    measured = {base.key: setting_records(tmp_path, "base", 300.0),
                rungs[0].after.key: setting_records(tmp_path, "onednn", 150.0,
                                                    disturbed="disturbed (node1: steal 9%)"),
                end.key: setting_records(tmp_path, "end", 120.0)}
    measured[rungs[1].after.key] = measured[end.key]  # the disturbed setting is not on its rung
    steps = explain.rung_steps(rungs, {}, CLAIM, measured)
    row = explain.decompose(CLAIM, measured[base.key]["claims"][CLAIM],
                            measured[end.key]["claims"][CLAIM], steps)
    first, second = row["effects"]  # each rung moves one factor from 2021's setting
    assert math.isnan(first["value"]) and first["why"] == \
        "disturbed in both attempts, left out: resnet18-cifar10_tensorflow-sync_r0_fixture"
    assert second["value"] == pytest.approx(0.4) and second["why"] == ""
    assert row["product"] == pytest.approx(0.4) and row["interaction"] == pytest.approx(1.0)


def test_a_rung_unmeasured_for_another_reason_does_not_blame_a_disturbed_cell(tmp_path):
    # TensorFlow's cell failed and MXNet's was disturbed twice: the claim is not measured
    # even with MXNet's cell taken as it ran, so disturbance is not named as the reason
    found = measured_from(tmp_path, "failed", [
        known_run.cell("resnet18-cifar10", "tensorflow-sync", 150.0, status="failed"),
        known_run.cell("resnet18-cifar10", "mxnet-sync", 100.0, disturbed="disturbed (x)")])
    assert found["disturbed"] == {}
    base, end, rungs = two_factor_plan()
    measured = {base.key: setting_records(tmp_path, "base", 300.0), rungs[0].after.key: found}
    (step,) = explain.rung_steps(rungs[:1], {}, CLAIM, measured)
    assert step[3] == ""  # decompose then says "not measured"


def test_effects_within_the_noise_say_that_no_factor_clears_one():
    def est(values):
        return {"measured": sum(values) / len(values), "boot": values}
    base, end, rungs = two_factor_plan()
    row = explain.decompose(CLAIM, est([3.0, 3.1, 2.9]), est([3.0, 3.1, 2.9]),
                            [(rungs[0], est([3.0, 3.1, 2.9]), est([3.1, 2.9, 3.0]), "")])
    assert row["sentence"].startswith("no factor's interval clears 1 (largest: tf_kernels")


def test_levels_are_read_back_from_each_processs_recorded_environment(tmp_path):
    base, _, _ = two_factor_plan()
    stack, cells = ladder.cells(base, TWO, "current", "smoke", 2, ["lenet5-cifar10"],
                                ["tensorflow-sync"], 1)
    for rank, seen in ((0, "0"), (1, "1")):  # worker 1 did not get the planned level
        folder = tmp_path / cells[0].id / ("node%d" % (rank + 1)) / ("worker-%d" % rank)
        folder.mkdir(parents=True)
        (folder / "result.json").write_text(json.dumps(
            {"environment": {"TF_ENABLE_ONEDNN_OPTS": seen}}))
    rows = explain.levels_applied(tmp_path, base, TWO, cells)
    assert [(r["process"], r["ok"]) for r in rows] == [("node1/worker-0", True),
                                                       ("node2/worker-1", False)]


def test_the_main_report_shows_what_moves_each_claim(tmp_path):
    run = known_run.write_run(tmp_path, [known_run.cell(b, s, 100.0) for b in
                                         ("resnet18-cifar10",) for s in
                                         ("tensorflow-sync", "mxnet-sync")])
    result = explain_json("versions paper-py39 -> current moves it most: x0.40")
    (run / "explain.json").write_text(json.dumps(result))
    text = report.build(run, quiet=True)["report"].read_text()
    assert "what moves it (invoke explain)" in text
    assert "versions paper-py39 -> current moves it most: x0.40" in text
    # one of another version (a key renamed) is refused, naming the key, not read as "none"
    result["claims"][0]["why_it_moves"] = result["claims"][0].pop("sentence")
    (run / "explain.json").write_text(json.dumps(result))
    with pytest.raises(UserError) as refused:
        report.build(run, quiet=True)
    assert "claims[0] (claim): keys the contract does not name: why_it_moves; missing: " \
        "sentence" in refused.value.cause
    assert "move %s out of the run's folder" % (run / "explain.json") in refused.value.fix


def explain_json(sentence):
    """An explain.json of one claim and one effect with every key the contract names."""
    from contract import explain_result
    blank = {kind: dict.fromkeys(keys) for kind, keys in explain_result.KEYS.items()}
    # one ladder with its largest step, one none of whose steps was measured (most: null)
    claim = dict(blank["claim"], id=CLAIM, sentence=sentence, effects=[blank["effect"]],
                 ladders={"threads": dict(blank["ladder"], levels=[blank["ladder_level"]],
                                          most=blank["most"]),
                          "threads_unmeasured": dict(blank["ladder"], levels=[], most=None)})
    return dict(blank["result"], claims=[claim], system_effects=[], levels=[blank["level"]])


def test_the_plan_is_written_as_a_file_that_the_analysis_reads_back_whole(tmp_path):
    """explain's analysis reads the plan from the explain folder, not from the planner: every
    setting with its stack, run and cells, the rungs and the claims come back as planned."""
    from harness import ladder_run
    from harness.nodes import inventory
    plan = ladder_run.Plan(inventory.load("local"), "current", "smoke", "lenet5-cifar10",
                           CLAIM, "tf_kernels,versions", 2)
    plan.not_measurable[plan.end.key] = "a cell failed twice"
    out = tmp_path / "explain-1"
    ladder_run.write_plan(plan, tmp_path / "explain-runs", out)
    saved = explain.SavedPlan(out / "plan.json")
    assert saved.runs == (tmp_path / "explain-runs").resolve()
    assert [s.key for s in saved.settings()] == [s.key for s in plan.settings()]
    for setting in plan.settings():
        stack, cells = plan.cells_of(setting)
        saved_stack, saved_cells = saved.cells_of(setting)
        assert saved_stack == stack and saved.run_id(stack) == plan.run_id(stack)
        assert [(c.id, c.framework) for c in saved_cells] == [(c.id, c.framework) for c in cells]
    assert saved.rungs == plan.rungs and [r.name for r in saved.rungs] == \
        ["tf_kernels 0 -> 1", "versions paper-py39 -> current"]
    assert (saved.base, saved.end) == (plan.base, plan.end)
    assert saved.base.moved("versions", "current").key == \
        plan.base.moved("versions", "current").key
    assert [c["id"] for c, _ in saved.claims] == [CLAIM]
    assert saved.not_measurable == {plan.end.key: "a cell failed twice"}
    assert saved.repeats == 2 and saved.factors == plan.factors


def test_the_eta_counts_only_cells_left_to_run(tmp_path, capsys):
    from types import SimpleNamespace
    from harness import ladder_run as harness_explain
    from contract.runfolder import CellStatus, RunFolder, write_json
    cells = [SimpleNamespace(id="c%d" % r, repeat=r) for r in range(3)]
    plan = SimpleNamespace(by_stack=lambda: {"a": cells, "b": cells[:1]},
                           run_id=lambda stack: "run-" + stack)
    folder = RunFolder(tmp_path / "run-a")
    (tmp_path / "run-a").mkdir()
    write_json(tmp_path / "run-a" / "manifest.json", {"cells": []})
    folder.save_status(CellStatus("c0", status="succeeded"), 0.0)  # reused: costs nothing
    # run-b does not exist yet: its cell is left to run
    assert harness_explain.unmeasured(plan, tmp_path, range(3)) == 3
    assert harness_explain.unmeasured(plan, tmp_path, range(1, 3)) == 2
    harness_explain.print_eta(120.0, 2, 3, 0, 3)
    assert "2 cell(s) run, 60 s each); 3 cell(s) left, ETA 180 s" in capsys.readouterr().out


def test_a_process_records_the_variables_it_was_given_and_nothing_else(monkeypatch):
    # the controller's environment reaches local nodes: a prefix would have recorded a token
    from bench.common import runner
    monkeypatch.setenv("DLBENCH_TEST_TOKEN", "s3cret")
    monkeypatch.setenv("TF_ENABLE_ONEDNN_OPTS", "1")
    monkeypatch.setenv("DLBENCH_TF_INPUT_CACHE", "0")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    seen = runner.recorded_environment({"stack_environment": {"TF_ENABLE_ONEDNN_OPTS": "0"},
                                        "environment": "DLBENCH_TF_INPUT_CACHE=0"})
    assert seen == {"DLBENCH_TF_INPUT_CACHE": "0", "OMP_NUM_THREADS": "1",
                    "TF_ENABLE_ONEDNN_OPTS": "1"}


def test_a_factor_whose_levels_run_from_today_back_to_2021_is_moved_one_level_at_a_time():
    # the reversed slice once gave no rung at all where today's level is the first listed
    factors = {"x": {"apply": {"environment": "X"}, "paper": "c", "today": "a",
                     "levels": [{"value": "a"}, {"value": "b"}, {"value": "c"}]}}
    assert [r.name for r in ladder.rungs(factors)] == ["x c -> b", "x b -> a"]


# ---- the release ladder (registry/releases.yml) ----------------------------------------------

RELEASES = {"tf_releases": registry.factors()["tf_releases"]}


def test_the_release_factor_climbs_every_release_in_the_file_as_its_own_stack():
    listed = [str(r["release"]) for r in registry.releases()["frameworks"]["tensorflow"]]
    factor = RELEASES["tf_releases"]
    assert registry.level_values(factor) == listed and len(listed) >= 4
    assert (factor["paper"], factor["today"]) == (listed[0], listed[-1])
    base, end = ladder.ends(RELEASES)
    rungs = ladder.rungs(RELEASES)
    assert [r.name for r in rungs] == ["tf_releases %s -> %s" % p for p in zip(listed, listed[1:])]
    stack, environment, _, _ = ladder.run_of(base.moved("tf_releases", "2.9"), RELEASES,
                                             "current")
    assert (stack, environment) == ("paper-py39+tensorflow-2.9", {})


def test_the_release_ladder_is_chosen_only_by_name_and_not_beside_versions():
    chosen, _ = ladder.choose(None, "local", [1, 1])
    assert "tf_releases" not in chosen and "versions" in chosen
    with pytest.raises(UserError, match="versions and tf_releases each choose the stack"):
        ladder.choose("versions,tf_releases", "local", [1, 1])


def test_a_claims_ratio_at_each_release_and_the_release_where_it_moved_most(tmp_path):
    # three releases: TF/MXNet 3.0 -> 2.7 (x0.9) -> 1.2 (x0.44, the big step) -> 1.1
    factor = dict(RELEASES["tf_releases"], levels=[{"value": v, "name": "TF " + v}
                                                   for v in ("2.5", "2.8", "2.9", "2.11")],
                  paper="2.5", today="2.11")
    factors = {"tf_releases": factor}
    base, end = ladder.ends(factors)
    rungs = ladder.rungs(factors)
    seconds = {"2.5": 300.0, "2.8": 270.0, "2.9": 120.0, "2.11": 110.0}
    measured = {base.moved("tf_releases", v).key: setting_records(tmp_path, "r" + v, s)
                for v, s in seconds.items()}
    claim = lambda s: measured[s.key]["claims"][CLAIM]
    row = explain.decompose(CLAIM, claim(base), claim(end),
                            [(r, claim(r.before), claim(r.after), "") for r in rungs])
    plan = type("Plan", (), {"factors": factors, "base": base})
    (name, lad), = explain.ladders(plan, CLAIM, measured, row["effects"]).items()
    assert name == "tf_releases"
    assert [l["value"] for l in lad["levels"]] == pytest.approx([3.0, 2.7, 1.2, 1.1])
    assert [l["name"] for l in lad["levels"]] == ["TF 2.5", "TF 2.8", "TF 2.9", "TF 2.11"]
    assert lad["most"]["rung"] == "tf_releases 2.8 -> 2.9"
    assert lad["most"]["value"] == pytest.approx(120.0 / 270.0)
    assert row["interaction"] == pytest.approx(1.0)  # the rungs chain


def test_a_two_level_factor_draws_no_ladder():
    base, end, rungs = two_factor_plan()
    plan = type("Plan", (), {"factors": TWO, "base": base})
    assert explain.ladders(plan, CLAIM, {}, []) == {}
