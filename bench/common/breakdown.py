"""One breakdown for every framework (docs/methodology.md):

  loading        time blocked on the next batch, measured in the timed run
  forward        compute only: median forward time of the calibration (communication off)
  backward       compute only: median backward + local weight-update time of the calibration
  communication  step - (loading + forward + backward)

Warm-up steps are run, counted, and excluded from every mean.
"""
from .timer import mean, median


def summarise(steps, calibration):
    measured = [s for s in steps if not s.get("warmup")]
    step = mean(s["total"] for s in measured)
    loading = mean(s.get("loading", 0.0) for s in measured)
    forward = median(calibration["forward"])
    backward = median(calibration["backward"])
    summary = {
        "measured_steps": len(measured),
        "warmup_steps": len(steps) - len(measured),
        "step": step,
        "loading": loading,
        "forward": forward,
        "backward": backward,
        "communication": step - (loading + forward + backward),
    }
    # What the timed run saw around each call: includes any communication overlapped with it.
    for phase in ("forward_wall", "backward_wall", "update_wall"):
        summary[phase] = mean(s.get(phase, 0.0) for s in measured)
    return summary
