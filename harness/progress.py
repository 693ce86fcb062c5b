"""What the user sees while a cell runs: per node, steps done of total and the current phase.

On a terminal: a live table (rich). Elsewhere (CI, a log file): one line every LINE_SECONDS.
"""
import time

from rich.console import Console
from rich.live import Live
from rich.table import Table

LINE_SECONDS = 10


class CellProgress:
    def __init__(self, cell, processes, console=None):
        self.cell = cell
        self.processes = processes
        self.console = console or Console()
        if not self.console.is_terminal:
            self.console.width = 200  # log lines, not a screen: do not wrap them
        self.live = None
        self._last_line = 0.0

    def __enter__(self):
        self.console.print("[bold]%s[/bold]  %s on %d nodes, %d steps"
                           % (self.cell.id, self.cell.system, self.cell.nodes,
                              self.cell.total_steps))
        if self.console.is_terminal:
            self.live = Live(console=self.console, refresh_per_second=2, transient=False)
            self.live.__enter__()
        return self

    def __exit__(self, *exc):
        if self.live is not None:
            self.live.__exit__(*exc)
        return False

    def update(self, processes, elapsed):
        if self.live is not None:
            self.live.update(self._table(processes, elapsed))
        elif time.monotonic() - self._last_line >= LINE_SECONDS:
            self._last_line = time.monotonic()
            parts = ["%s %s %s" % (p.label, _steps(p), p.progress.get("phase", "starting"))
                     for p in processes]
            self.console.print("  [%4.0fs] %s" % (elapsed, " | ".join(parts)), highlight=False)

    def _table(self, processes, elapsed):
        table = Table(title="%s  elapsed %.0f s" % (self.cell.id, elapsed), title_justify="left")
        for column in ("node/role", "steps", "phase", "peak RSS MB", "pid"):
            table.add_column(column)
        for p in processes:
            table.add_row(p.label, _steps(p), p.progress.get("phase", "starting"),
                          str(p.progress.get("peak_rss_mb", "")), str(p.pid or ""))
        return table


def _steps(proc):
    return "%s/%s" % (proc.progress.get("step", 0), proc.progress.get("total", "?"))
