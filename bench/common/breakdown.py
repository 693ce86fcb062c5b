"""One breakdown for every framework (docs/methodology.md):

  loading        time blocked on the next batch, measured in the timed run
  forward        compute only: median forward time of the calibration (communication off)
  backward       compute only: median backward time of the calibration, plus the median local
                 weight update where the worker applies the update itself (all-reduce modes;
                 in parameter-server modes the servers update, and that is not worker compute)
  communication  step - (loading + forward + backward)

Warm-up steps are run, counted, and excluded from every mean.
"""
from .timer import mean, median


def summarise(steps, calibration, worker_updates):
    measured = [s for s in steps if not s.get("warmup")]
    step = mean(s["total"] for s in measured)
    loading = mean(s.get("loading", 0.0) for s in measured)
    forward = median(calibration["forward"])
    backward = median(calibration["backward"])
    if worker_updates and calibration.get("update"):
        backward += median(calibration["update"])
    summary = {
        "measured_steps": len(measured),
        "warmup_steps": len(steps) - len(measured),
        "step": step,
        "loading": loading,
        "forward": forward,
        "backward": backward,
        "communication": _rest(step, (loading, forward, backward)),
        "calibration_update": median(calibration.get("update") or []),
    }
    # Timers around each call in the timed run, where a framework's calls are synchronous:
    # they include any communication overlapped with the call.
    for phase in ("forward_wall", "backward_wall", "update_wall"):
        if any(phase in s for s in measured):
            summary[phase] = mean(s.get(phase, 0.0) for s in measured)
    return summary


def _rest(step, parts):
    """step - sum(parts); None when a part is unknown (an async worker whose few closures
    were all warm-up steps has no measured step)."""
    if step is None or any(p is None for p in parts):
        return None
    return step - sum(parts)
