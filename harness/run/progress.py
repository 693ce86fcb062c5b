"""What the user sees while a cell runs: per node, steps done of total and the current phase,
and the ETA of the cell (from its steps so far) and of the run (plus the later cells' estimates,
harness/plan/estimate.py).

On a terminal: a live table (rich) in place, the run's place and counts in its title, gone
when the cell ends. Elsewhere (CI, a log file): one line every LINE_SECONDS.
"""
import time
from typing import NamedTuple, Optional

from rich.console import Console
from rich.table import Table

from ..nodes.screen import LiveOnTerminal

LINE_SECONDS = 10


class RunSoFar(NamedTuple):
    """Where the run stands as a cell starts: the expected seconds of the cells after it and
    how many of those have no estimate (the run's ETA), the cell's place among the run's,
    the cells done before it with how many were disturbed and failed, and when the run began
    (time.monotonic)."""
    seconds: float = 0.0
    unestimated: int = 0
    index: int = 0
    total: int = 0
    done: int = 0
    disturbed: int = 0
    failed: int = 0
    began: Optional[float] = None

    def text(self):
        """"cell 3/22; 2 done, 1 disturbed, 0 failed; 4min in" ("" outside a run)."""
        if not self.total:
            return ""
        since = "; %s in" % _short(time.monotonic() - self.began) if self.began else ""
        return "cell %d/%d; %d done, %d disturbed, %d failed%s" % (
            self.index, self.total, self.done, self.disturbed, self.failed, since)


class CellProgress(LiveOnTerminal):
    def __init__(self, cell, processes, console=None, after=RunSoFar()):
        self.cell = cell
        self.processes = processes
        self.run = RunSoFar(*after)
        self.console = console or Console()
        if not self.console.is_terminal:
            self.console.width = 200  # log lines, not a screen: do not wrap them
        self._last_line = 0.0

    def __enter__(self):
        self.console.print("[bold]%s[/bold]  %s on %d nodes, %d steps%s"
                           % (self.cell.id, self.cell.system, self.cell.nodes,
                              self.cell.total_steps,
                              ", stack %s" % self.cell.stack if self.cell.stack else ""))
        # one table at the foot of the screen, gone when the cell ends, where its outcome
        # line stays (no table per cell to scroll past)
        self.start_live()
        return self

    def update(self, processes, elapsed):
        if self.live is not None:
            self.live.update(self._table(processes, elapsed))
        elif time.monotonic() - self._last_line >= LINE_SECONDS:
            self._last_line = time.monotonic()
            parts = ["%s %s %s" % (p.label, _steps(p), _phase(p))
                     for p in processes]
            self.console.print("  [%4.0fs%s] %s" % (elapsed, self.eta(processes, elapsed),
                                                     " | ".join(parts)), highlight=False)

    def eta(self, processes, elapsed):
        """", cell ETA x, run ETA y" once steps are timed: the cell's remaining steps at its
        rate so far (start-up included: an upper bound early on), plus the later cells'; the
        run's ETA is a lower bound, and says so, where later cells have no estimate."""
        done = max([p.progress.get("step") or 0 for p in processes] + [0])
        total = self.cell.total_steps
        if not done or done >= total:
            return ""
        left = elapsed * (total - done) / float(done)
        run = _short(left + self.run.seconds)
        if self.run.unestimated:
            run = "%s + %d cell(s) not estimated" % (run, self.run.unestimated)
        return ", cell ETA %s, run ETA %s" % (_short(left), run)

    def _table(self, processes, elapsed):
        title = "%s  elapsed %.0f s%s" % (self.cell.id, elapsed, self.eta(processes, elapsed))
        if self.run.text():
            title = "%s\n%s" % (self.run.text(), title)
        table = Table(title=title, title_justify="left")
        for column in ("node/role", "steps", "phase", "peak RSS MB", "pid"):
            table.add_column(column)
        for p in processes:
            table.add_row(p.label, _steps(p), _phase(p),
                          str(p.progress.get("peak_rss_mb", "")), str(p.pid or ""))
        return table


def _phase(proc):
    """Its phase; "setup, in rendezvous" while it waits there for the cell's others."""
    phase = proc.progress.get("phase", "starting")
    return phase + ", in rendezvous" if "waiting" in proc.progress else phase


def _short(seconds):
    return "%.0fs" % seconds if seconds < 120 else "%.0fmin" % (seconds / 60)


def _steps(proc):
    return "%s/%s" % (proc.progress.get("step", 0), proc.progress.get("total", "?"))
