"""What `invoke provision` shows while ansible-playbook runs.

On a terminal: one live table (rich) in place of Ansible's scroll: the task under way and how
many have run, the time so far, per node its tasks ok, changed and failed, and each env being
built with its time; what must stay on the screen (a failure and its message, a warning, each
build finished, the recap) is printed above it. Elsewhere (CI, Slurm, a log file): Ansible's
lines as they come. Either way every line goes to the log file, whole.
"""
import re
import time

from rich.console import Console
from rich.live import Live
from rich.table import Table

TASK = re.compile(r"^TASK \[(.+?)\] \**$")
RESULT = re.compile(r"^(ok|changed|skipping|fatal|failed|unreachable): \[([^\]]+)\]")
BUILDING = re.compile(r"^\[([^\]]+)\] building (.+) in the background$")
BUILT = re.compile(r"^\[([^\]]+)\] built (.+) in (\d+) s$")
# lines kept on the screen as they are, and what starts a block kept whole up to a blank line
KEPT = ("[WARNING]", "ERROR!", "PLAY RECAP")
BLOCK = ("fatal:", "failed:", "unreachable:", "PLAY RECAP")


class LiveOnTerminal:
    """A context manager holding one live table (rich) in place on its console's terminal,
    gone when it exits; none elsewhere (self.live stays None). Subclasses set self.console and
    call start_live() on entering."""
    live = None

    def start_live(self, first=None):
        if self.console.is_terminal:
            self.live = Live(first, console=self.console, refresh_per_second=2, transient=True)
            self.live.__enter__()

    def __exit__(self, *exc):
        if self.live is not None:
            self.live.__exit__(*exc)
        return False


class ProvisionScreen(LiveOnTerminal):
    """feed() each of ansible-playbook's lines; a context manager around the play."""

    def __init__(self, log, console=None, clock=time.monotonic):
        self.log = log  # an open text file: every line, whole
        self.console = console or Console()
        self.clock = clock
        self.began = clock()
        self.task, self.tasks = "", 0
        self.nodes = {}  # node -> {"ok": n, "changed": n, "failed": n}
        self.builds = {}  # (node, what) -> began, or the seconds it took as a str
        self.in_block = False

    def __enter__(self):
        self.start_live(self.table())
        return self

    def feed(self, line):
        self.log.write(line)
        text = line.rstrip("\n")
        if self.live is None:  # not a terminal: Ansible's own lines
            self.console.file.write(line)
            self.console.file.flush()
            return
        self._read(text)
        if self._kept(text):
            self.live.console.print(text, highlight=False, markup=False)
        self.live.update(self.table())

    def _read(self, text):
        task, result = TASK.match(text), RESULT.match(text)
        building, built = BUILDING.match(text), BUILT.match(text)
        if task:
            self.task, self.tasks = task.group(1), self.tasks + 1
        elif result:
            self._count(result.group(2), result.group(1))
        elif building:
            self.builds[building.groups()] = self.clock()
        elif built:
            self.builds[built.group(1), built.group(2)] = "%s s" % built.group(3)

    def _count(self, node, outcome):
        counts = self.nodes.setdefault(node, {"ok": 0, "changed": 0, "failed": 0})
        if outcome in ("ok", "changed"):
            counts[outcome] += 1
        elif outcome != "skipping":
            counts["failed"] += 1

    def _kept(self, text):
        """Whether the line stays on the screen: a failure's block (up to its blank line), a
        warning, a finished build, the recap."""
        if text.startswith(BLOCK):
            self.in_block = True
        elif not text.strip():
            self.in_block = False
        return self.in_block or text.startswith(KEPT) or bool(BUILT.match(text))

    def table(self):
        title = "provisioning: %d task(s) so far, %.0f s; now: %s" % (
            self.tasks, self.clock() - self.began, self.task or "starting")
        table = Table(title=title, title_justify="left")
        for column in ("node", "ok", "changed", "failed", "building"):
            table.add_column(column)
        for node in sorted(set(self.nodes) | {n for n, _ in self.builds}):
            counts = self.nodes.get(node, {"ok": 0, "changed": 0, "failed": 0})
            table.add_row(node, str(counts["ok"]), str(counts["changed"]),
                          str(counts["failed"]), self._building(node))
        return table

    def _building(self, node):
        return "; ".join(
            "%s %s" % (what, "built in " + took if isinstance(took, str)
                       else "%.0f s so far" % (self.clock() - took))
            for (host, what), took in sorted(self.builds.items()) if host == node)
