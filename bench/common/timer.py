"""Per-step phase timing with perf_counter: one dict of seconds per step."""
import time


class StepTimer(object):
    def __init__(self):
        self.steps = []
        self._current = None
        self._mark = None

    def start_step(self):
        self._current = {}
        self._mark = time.perf_counter()
        self._step_start = self._mark

    def lap(self, phase):
        """Charge the time since the previous lap (or step start) to `phase`."""
        now = time.perf_counter()
        self._current[phase] = self._current.get(phase, 0.0) + (now - self._mark)
        self._mark = now

    def end_step(self, **extra):
        self._current["total"] = time.perf_counter() - self._step_start
        self._current.update(extra)
        self.steps.append(self._current)
        return self._current


def mean(values):
    values = list(values)
    return sum(values) / len(values) if values else None


def median(values):
    values = sorted(values)
    if not values:
        return None
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2.0
