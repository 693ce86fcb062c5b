"""One run under the paper's releases and today's (analysis/releases.py): hand-made records
with known numbers, two stacks in one run folder; the first screen's two tallies in order,
each claim whose verdict differs with its change and each framework's release effect, the
kernels' note and its cost, and each stack's own report."""
import re

import pytest

from analysis import claims, releases, report
from contract.runfolder import CellStatus, RunFolder
from selfcheck import known_run
from tests.test_compare import FACTS, PAPER_ERA, TODAY

TF_OVER_TORCH = {"paper-py39": 2.65, "current": 0.8}


def two_stack_run(tmp_path, benchmarks=claims.PAPER_BENCHMARKS):
    cells = []
    for stack, ratio in TF_OVER_TORCH.items():
        for b in benchmarks:
            cells += [known_run.cell(b, "pytorch-sync", 100.0, stack=stack),
                      known_run.cell(b, "tensorflow-sync", 100.0 * ratio, stack=stack),
                      known_run.cell(b, "mxnet-sync", 100.0 / 1.38, stack=stack)]
    path = known_run.write_run(tmp_path, cells, run_id="both", manifest={
        "stacks": [{"name": "paper-py39"}, {"name": "current"}],
        "installed": {"paper-py39": {n: PAPER_ERA for n in FACTS},
                      "current": {n: TODAY for n in FACTS}},
        "host_facts": FACTS, "size": "verdict"})
    # what each launch took: today's TensorFlow cells 12 s, the others 6 s
    folder = RunFolder(path)
    for c in folder.manifest()["cells"]:
        seconds = 12.0 if c["system"] == "tensorflow-sync" else 6.0
        folder.save_status(CellStatus(c["id"], status="succeeded", seconds=seconds, settings=c),
                           0.0)
    return path


def test_the_first_screen_answers_both_questions_and_measures_what_moved(tmp_path):
    built = report.build(two_stack_run(tmp_path), quiet=True)
    text = built["report"].read_text()
    first = text.split("## Every claim under both stacks")[0]
    older = first.index("**Does the paper's software give its results?** Under paper-py39")
    newer = first.index("**Do they hold with today's releases?** Under current")
    assert older < newer
    assert "TensorFlow 2.5.0" in first[older:newer] and "TensorFlow 2.21.0" in first[newer:]
    # TF sync over PyTorch: 2.65 under 2021's software, 0.8 today; PyTorch's own time the same
    row = next(line for line in first.splitlines()
               if line.startswith("| 6 benchmarks: TensorFlow sync / PyTorch |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2] == "2.65"
    assert cells[3].startswith("2.65") and cells[3].endswith("reproduced")
    assert cells[4].startswith("0.80") and cells[4].endswith("not reproduced")
    assert cells[5].startswith("x0.30")
    assert "TensorFlow 2.5.0 -> 2.21.0 (TensorFlow sync): x0.30" in cells[6]
    assert "PyTorch 1.7.1 -> 2.13.0+cpu (PyTorch): x1.00" in cells[6]
    # the kernels changed with TF's release: the command and its cost, from this run's cells:
    # 3 repeats x 6 benchmarks x (2 x 12 s of TensorFlow + 6 s of PyTorch) = 9 min
    assert ("`invoke explain --claims tf_sync_vs_pytorch_sync --factors tf_kernels --size "
            "verdict --benchmarks %s`, about 9 min" % ",".join(claims.PAPER_BENCHMARKS)) in cells[7]
    # PyTorch over MXNet held under both: not listed as differing
    assert "PyTorch / MXNet sync |" not in first
    assert re.search(r"\*\*\d+ claim\(s\) whose verdict differs", first)
    assert "[paper-py39](paper-py39/report.md)" in first
    for stack in TF_OVER_TORCH:
        assert (built["report"].parent / stack / "report.md").is_file()
    assert (built["report"].parent / "claims_two_stacks.png").is_file()
    assert built["verdicts"].startswith("paper-py39: ")


def test_a_release_effect_is_one_system_modes_time_under_today_over_2021(tmp_path):
    path = two_stack_run(tmp_path)
    manifest = RunFolder(path).manifest()
    from analysis import tidy
    sides = releases.ordered_sides(manifest, tidy.load_records(path / "records.jsonl"))
    assert [s["label"] for s in sides] == ["paper-py39", "current"]
    value, low, high = releases.release_effect("tensorflow-sync", claims.PAPER_BENCHMARKS,
                                               *sides)
    assert value == pytest.approx(0.8 / 2.65)
    assert low <= value <= high
    assert releases.release_effect("tensorflow-sync", ["no-such"], *sides) is None


def test_short_labels_name_the_benchmarks_and_the_system_modes():
    by_id = claims.reference_by_id()
    assert claims.short_label(by_id["lenet_tf_sync_vs_mxnet_sync"])[1] == \
        "LeNet-5: MXNet sync / TensorFlow sync"
    assert claims.short_label(by_id["tf_async_vs_mxnet_async"])[1] == \
        "6 benchmarks: TensorFlow async / MXNet async"
    assert claims.short_label(by_id["resnet18_pytorch_vs_mxnet"])[1] == \
        "ResNet-18: PyTorch / MXNet"
    assert claims.benchmark_words(["resnet50-cifar100"]) == "ResNet-50/C100"


def test_the_half_width_counts_the_ratio_claims_with_an_interval():
    rows = [{"paper": 2.0, "measured": 2.0, "low": 1.8, "high": 2.2},   # 10%
            {"paper": 1.5, "measured": 1.0, "low": 0.95, "high": 1.05},  # 5%
            {"paper": 1.5, "measured": 1.0, "low": None, "high": None},  # no interval
            {"paper": "fastest: x", "measured": "x 1, y 2", "low": None, "high": None}]
    assert releases.half_widths(rows) == pytest.approx([0.10, 0.05])
