"""The same-math check (selfcheck/math_check.py, bench/common/samemath.py): the layout
conversions, the comparison on hand-made losses and weights, and on the local cluster the
real check, passing as it is and failing, by name, on each planted error."""
import numpy as np
import pytest

from bench.common import samemath as node_side
from harness.nodes import inventory
from selfcheck import math_check

SYNC = ("mxnet-sync", "pytorch-sync", "tensorflow-sync")


def weights(scale=1.0):
    arrays = node_side.initial_weights("lenet5", 10, 0)
    names = [n for n, _ in node_side.canonical_shapes("lenet5", 10)]
    return {n: a * scale for n, a in zip(names, arrays)}


def entry(mode, losses, final=None, loaded=None):
    return {"mode": mode, "status": "succeeded", "reason": "", "checksum": None,
            "losses": losses, "final": {0: final or weights(0.5)},
            "loaded": {0: loaded or weights()}}


def curve(start=2.3, rate=0.97, steps=30, bend=None):
    out = [start * rate ** k for k in range(steps)]
    if bend:
        out = [v * (1.01 if k + 1 >= bend else 1.0) for k, v in enumerate(out)]
    return out


def test_the_keras_layout_round_trips_and_puts_the_flatten_in_nhwc_order():
    arrays = node_side.initial_weights("lenet5", 10, 0)
    keras = node_side.keras_layout(arrays)
    assert keras[0].shape == (5, 5, 3, 6) and keras[4].shape == (400, 120)
    # canonical fc1 input (channel 3, row 1, column 2) is Keras input (row 1, column 2, ch 3)
    assert keras[4][1 * 5 * 16 + 2 * 16 + 3, 7] == arrays[4][7, 3 * 25 + 1 * 5 + 2]
    back = node_side.canonical_layout(keras)
    assert all(np.array_equal(a, b) for a, b in zip(arrays, back))
    planted = node_side.canonical_layout(
        node_side.keras_layout(arrays, "tensorflow-dense-not-transposed"))
    assert [np.array_equal(a, b) for a, b in zip(arrays, planted)] == [True] * 8 + [False, True]


def test_the_initial_weights_are_seeded_and_checked():
    a = node_side.initial_weights("lenet5", 10, 0)
    assert node_side.checksum(a) == node_side.checksum(node_side.initial_weights("lenet5", 10, 0))
    assert node_side.checksum(a) != node_side.checksum(node_side.initial_weights("lenet5", 10, 1))
    config = {"network": "lenet5", "classes": 10, "seed": 0, "init_checksum": "0" * 64}
    with pytest.raises(ValueError, match="not the controller's"):
        node_side.checked_initial_weights(config)


def test_agreeing_frameworks_pass_and_the_async_curve_is_placed():
    runs = {name: entry("sync", {0: curve(), 1: curve(rate=0.96)}) for name in SYNC}
    runs["mxnet-async"] = entry("async", {0: curve(rate=0.98), 1: curve(rate=0.98)})
    found = math_check.compare(runs)
    assert found["ok"] and not found["parted"] and len(found["sync"]) == 3
    (row,) = found["asynchronous"]
    assert row["falls"] and row["from_sync"] > 0  # slower than the synchronous curve
    assert "passed" in math_check.table(found)[0]


def test_one_framework_that_parts_is_named_with_its_first_step_and_layer():
    runs = {name: entry("sync", {0: curve(), 1: curve()}) for name in SYNC}
    final = weights(0.5)
    final["conv2.weight"] = final["conv2.weight"] * 1.01
    runs["pytorch-sync"] = entry("sync", {0: curve(), 1: curve(bend=3)}, final=final)
    found = math_check.compare(runs)
    assert not found["ok"]
    assert found["parted"] == [{"system": "pytorch-sync", "step": 3, "layer": "conv2.weight",
                                "what": "parts from mxnet-sync and tensorflow-sync"}]


def test_weights_loaded_wrong_are_named_before_any_step():
    runs = {name: entry("sync", {0: curve()}) for name in SYNC}
    loaded = weights()
    loaded["fc3.weight"] = loaded["fc3.weight"].T.reshape(10, 84)
    runs["tensorflow-sync"]["loaded"] = {0: loaded}
    found = math_check.compare(runs)
    assert not found["ok"]
    assert {"system": "tensorflow-sync", "step": 0, "layer": "fc3.weight",
            "what": "its weights before the first step are not the controller's"} \
        in found["parted"]


def test_an_async_loss_that_does_not_fall_fails():
    runs = {name: entry("sync", {0: curve()}) for name in SYNC}
    runs["tensorflow-async"] = entry("async", {0: [2.3] * 60})
    found = math_check.compare(runs)
    assert not found["ok"] and not found["asynchronous"][0]["falls"]


def test_an_async_loss_that_falls_with_a_spike_at_its_end_falls():
    # TensorFlow-async's ResNet-18 curve of a real run (paper-py39): it falls from
    # 2.50 to 0.15, then a stale update throws it back to 3.74 in the last steps; its last 5
    # steps' mean (2.68) said "does not fall", its second half's (1.34) says it does
    spiky = [2.65, 2.65, 2.42, 2.60, 2.21, 2.32, 2.63, 3.25, 1.53, 1.71, 2.18, 2.71, 1.47, 1.44,
             1.61, 1.81, 2.01, 2.02, 1.19, 1.13, 1.43, 1.79, 1.98, 2.07, 1.68, 1.62, 1.53, 1.31,
             1.45, 1.35, 1.88, 1.91, 0.86, 1.71, 1.53, 0.77, 1.58, 1.42, 0.15, 0.14, 0.46, 0.57,
             0.83, 0.78, 1.67, 1.49, 0.25, 0.28, 0.76, 1.03, 1.88, 1.08, 1.44, 0.85, 1.52, 2.46,
             3.74, 3.29, 2.20, 1.72]
    runs = {name: entry("sync", {0: curve()}) for name in SYNC}
    runs["tensorflow-async"] = entry("async", {0: spiky})
    (row,) = math_check.compare(runs)["asynchronous"]
    assert row["first"] == pytest.approx(2.506) and row["last"] == pytest.approx(2.682)
    assert row["second_half"] == pytest.approx(1.3417, abs=1e-3) and row["falls"]
    # a slow fall that only its last steps show (LeNet-5's in 30 steps) falls too
    runs["tensorflow-async"] = entry("async", {0: [2.3] * 15 + [2.2] * 10 + [1.95] * 5})
    (row,) = math_check.compare(runs)["asynchronous"]
    assert row["second_half"] > 0.9 * row["first"] and row["falls"]
    # a curve that rises in its second half still does not fall
    runs["tensorflow-async"] = entry("async", {0: spiky[:30] + [2.6] * 30})
    assert not math_check.compare(runs)["asynchronous"][0]["falls"]


def growing(values, offset=1e-7, growth=10.0):
    """values with a relative difference of offset x growth**k at step k + 1, capped at 0.5:
    rounding amplified by a fast-falling loss."""
    return [v * (1 + min(0.5, offset * growth ** k)) for k, v in enumerate(values)]


def test_the_noise_floor_lets_the_tolerance_grow_with_rounding_and_no_further():
    """Frameworks 10x a step apart fail against the fixed tolerance (first at step 4:
    1e-7 x 10**3 > 1e-4), pass against each one's own floor growing as fast from 3e-8, and a
    framework 30x a step apart (a real difference) fails at the step where it crosses 10x
    the floor."""
    base = curve(rate=0.9, steps=12)
    own = {"mxnet-sync": base, "pytorch-sync": growing(base),
           "tensorflow-sync": growing(base, offset=1.5e-7)}
    runs = {name: entry("sync", {0: values}) for name, values in own.items()}
    alone = math_check.compare(runs)
    assert not alone["ok"] and min(p["step"] for p in alone["parted"]) == 4
    floor_runs = {name: entry("sync", {0: growing(values, offset=3e-8)})
                  for name, values in own.items()}
    noise = math_check.noise_floor(runs, floor_runs)
    assert noise["per_step"][0] == pytest.approx(3e-8, rel=1e-3)
    assert noise["per_step"][3] == pytest.approx(3e-5, rel=1e-3)
    found = math_check.compare(runs, noise)
    assert found["ok"], found["parted"]
    assert "Noise floor" in "\n".join(math_check.table(found))
    # 1e-7 x 30**k against max(1e-4, 10 x 3e-8 x 10**k): 9e-5 at step 3 passes, 2.7e-3 at
    # step 4 (against 3e-4) does not
    runs["tensorflow-sync"] = entry("sync", {0: growing(base, growth=30.0)})
    found = math_check.compare(runs, noise)
    assert not found["ok"]
    assert found["parted"][0]["system"] == "tensorflow-sync"
    assert found["parted"][0]["step"] == 4


def test_the_perturbed_weights_move_by_one_rounding_step():
    arrays = node_side.initial_weights("lenet5", 10, 0)
    moved = node_side.perturbed(arrays, 0)
    ratio = np.abs(moved[0] / arrays[0] - 1)
    assert ratio.max() < 3e-7 and np.median(ratio) > 3e-8
    assert not np.array_equal(moved[0], arrays[0]) and moved[0].dtype == np.float32


# --- on the local cluster -----------------------------------------------------------------

NODES = len(inventory.load("local").hosts)


@pytest.fixture(scope="module")
def clean_check(provisioned, tmp_path_factory):
    """The check as CI runs it, every system-mode; the planted errors' tests compare against
    its losses and weights instead of running the clean system-modes again."""
    return math_check.run("local", "current", tmp_path_factory.mktemp("math"))


@pytest.mark.cluster
def test_the_five_system_modes_do_the_same_arithmetic(clean_check, capsys):
    found = clean_check
    with capsys.disabled():
        print("\n" + "\n".join(math_check.table(found)))
    assert found["ok"], found["parted"] or found["failed"]
    for p in found["sync"]:
        assert len(p["loss_differences"]) == 30
    assert {r["system"] for r in found["asynchronous"]} == {"mxnet-async", "tensorflow-async"}


@pytest.mark.cluster
@pytest.mark.parametrize("planted, system, steps, layer", [
    # the update of step 1 differs: the loss of step 2 shows it (3.2e-4 here)
    ("mxnet-server-lr-x3", "mxnet-sync", (2, 3), "conv1.weight"),
    # momentum first acts in the update of step 2: the loss of step 3 (1.6e-4 here)
    ("pytorch-momentum-off", "pytorch-sync", (3, 5), "conv1.weight"),
    # wrong before any step: named from the weights read back, the layer itself
    ("tensorflow-dense-not-transposed", "tensorflow-sync", (0, 0), "fc3.weight"),
])
def test_a_planted_error_is_caught_and_named(clean_check, tmp_path, planted, system, steps,
                                             layer):
    """Each planted error fails the check, which names the system-mode it was planted in
    (the others, from the clean check, agreeing), the step where the losses part and the
    first layer. Only the planted system-mode runs again."""
    found = math_check.run("local", "current", tmp_path, systems=system, planted=planted,
                         against=clean_check["run"])
    assert not found["ok"]
    assert found["parted"] and found["parted"][0]["system"] == system, found["parted"]
    first = found["parted"][0]
    assert steps[0] <= first["step"] <= steps[1] and first["layer"] == layer, first
    assert not any(p["system"] != system for p in found["parted"]), found["parted"]
