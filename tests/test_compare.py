"""Two runs side by side (analysis/compare.py, `invoke compare`) on hand-made runs with known
numbers: the change between the runs, the answer claim by claim, the warning when the runs
differ in more than the stack."""
import json

import pytest

from analysis import claims, compare
from selfcheck import known_run
from harness import commands
from contract.errors import UserError

PAPER_ERA = {"tensorflow": {"python": "3.9.2", "packages": {"tensorflow-cpu": "2.5.0"}},
             "pytorch": {"python": "3.9.2", "packages": {"torch": "1.7.1"}},
             "mxnet": {"python": "3.9.2", "packages": {"mxnet": "1.7.0.post2"}}}
TODAY = {"tensorflow": {"python": "3.11.7", "packages": {"tensorflow": "2.21.0"}},
         "pytorch": {"python": "3.11.7", "packages": {"torch": "2.13.0+cpu"}},
         "mxnet": {"python": "3.11.7", "packages": {"mxnet": "1.9.1"}}}
# one machine per node with 4 cores of its own: nothing shared, so verdicts are given
FACTS = {"node%d" % i: {"machine_id": "m%d" % i, "cpu_count": 4, "physical_cores": 4,
                        "usable_cpus": 4, "memory_mb": 16384} for i in (1, 2, 3)}


def run(tmp_path, run_id, stack, installed, tf_over_torch, tanh=None, **manifest):
    cells = []
    for b in claims.PAPER_BENCHMARKS:
        cells += [known_run.cell(b, "pytorch-sync", 100.0),
                  known_run.cell(b, "tensorflow-sync", 100.0 * tf_over_torch),
                  known_run.cell(b, "mxnet-sync", 100.0 / 1.38)]
    path = known_run.write_run(tmp_path, cells, run_id=run_id, manifest=dict(
        {"stack": {"name": stack}, "installed": {n: installed for n in FACTS},
         "host_facts": FACTS}, **manifest))
    if tanh:  # activation_backward per step on each worker: mxnet-sync, pytorch-sync
        with open(str(path / "records.jsonl"), "a") as out:
            for system, framework, op, seconds in (
                    ("mxnet-sync", "mxnet", ["operator", "_backward_Activation"], tanh[0]),
                    ("pytorch-sync", "pytorch", ["aten::tanh_backward"], tanh[1])):
                for rank in range(3):
                    out.write(json.dumps({
                        "metric": "operator", "cell_id": "lenet5-cifar10_%s_r0_fixture" % system,
                        "run_id": run_id, "benchmark": "lenet5-cifar10", "system": system,
                        "framework": framework, "op_path": op, "value": seconds,
                        "role": "worker", "rank": rank, "node": "node%d" % (rank + 1)}) + "\n")
    return path


def test_a_finding_of_2021s_software_and_the_change(tmp_path):
    old = run(tmp_path, "old", "paper-py39", PAPER_ERA, 2.65, tanh=(0.0348, 0.001))
    new = run(tmp_path, "new", "current", TODAY, 0.8, tanh=(0.002, 0.001))
    found = compare.build(old, new, tmp_path / "cmp", quiet=True)
    rows = {r["id"]: r for r in found["claims"]}
    tf = rows["tf_sync_vs_pytorch_sync"]
    assert (tf["a_measured"], tf["b_measured"]) == pytest.approx((2.65, 0.8))
    assert (tf["a_verdict"], tf["b_verdict"]) == ("reproduced", "not reproduced")
    assert tf["change"] == pytest.approx(0.8 / 2.65)
    assert tf["answer"] == ("reproduced under paper-py39 only: a finding about 2021's "
                            "software; its direction (ratio > 1) holds under paper-py39 only")
    # a claim neither run changed: PyTorch lags MXNet by 1.38x under both
    assert rows["pytorch_sync_vs_mxnet_sync"]["answer"] == (
        "reproduced under both stacks: it holds today; its direction (ratio > 1) holds under "
        "both")
    # MXNet's tanh_backward: 34.8x PyTorch's, then 2x: the size is 2021's, the sense holds
    tanh = rows["op_lenet_tanh_backward_mxnet_vs_pytorch"]
    assert (tanh["a_measured"], tanh["b_measured"]) == pytest.approx((34.8, 2.0))
    assert tanh["answer"] == ("reproduced under paper-py39 only: a finding about 2021's "
                              "software; its direction (ratio > 1) holds under both")
    cells = {(c["benchmark"], c["system"]): c for c in found["cells"]}
    assert cells[("lenet5-cifar10", "tensorflow-sync")]["change"] == pytest.approx(0.8 / 2.65)
    assert cells[("lenet5-cifar10", "pytorch-sync")]["change"] == pytest.approx(1.0)
    ops = {(o["system"], o["category"]): o for o in found["operators"]}
    assert ops[("mxnet-sync", "activation_backward")]["a_ms"] == pytest.approx(34.8)
    assert ops[("mxnet-sync", "activation_backward")]["change"] == pytest.approx(2 / 34.8)
    assert found["differences"] == []
    text = (tmp_path / "cmp" / "report.md").read_text()
    assert "differ only in their stack" in text and "| release lines | the paper's |" \
        in text
    assert (tmp_path / "cmp" / "report.html").is_file()


def test_runs_that_differ_in_more_than_the_stack_are_named(tmp_path):
    old = run(tmp_path, "old", "paper-py39", PAPER_ERA, 2.65)
    new = run(tmp_path, "new", "current", TODAY, 2.65, size="quick")
    found = compare.build(old, new, tmp_path / "cmp", quiet=True)
    assert found["differences"] == [("size", "fixture", "quick")]
    text = (tmp_path / "cmp" / "report.md").read_text()
    assert "**Warning**: the runs differ in more than the stack" in text
    assert "size: fixture under paper-py39, quick under current" in text


def test_shared_cores_are_not_judged_and_intervals_still_shown(tmp_path):
    shared = {n: dict(f, machine_id="one", cpu_count=2, physical_cores=2, usable_cpus=2)
              for n, f in FACTS.items()}
    old = run(tmp_path, "old", "paper-py39", PAPER_ERA, 2.65, host_facts=shared)
    new = run(tmp_path, "new", "current", TODAY, 1.0, host_facts=shared)
    rows = {r["id"]: r for r in compare.build(old, new, tmp_path / "c", quiet=True)["claims"]}
    assert rows["tf_sync_vs_pytorch_sync"]["answer"] == (
        "not judged (paper-py39: not comparable; current: not comparable); the intervals "
        "alone: reproduced under paper-py39 only: a finding about 2021's software; its "
        "direction (ratio > 1) holds under paper-py39 only (undecided under current)")


def test_compare_names_a_missing_run_and_refuses_one_run_twice(tmp_path):
    run(tmp_path, "old", "paper-py39", PAPER_ERA, 2.65)
    with pytest.raises(UserError, match="no run 'nope'"):
        commands.compare(tmp_path, "old", "nope")
    with pytest.raises(UserError, match="two different runs"):
        commands.compare(tmp_path, "old", "old")
