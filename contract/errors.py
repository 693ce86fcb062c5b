"""Errors the user can act on, printed without a traceback, and the exit codes every command
keeps (README, `invoke --help bench`):

  0  done: every cell of the run measured and usable
  1  a bug: a traceback (please report it)
  2  refused: bad input, or a problem found before anything ran (pre-flight, --max-hours);
     the message names the cause and the fix
  3  incomplete: the run ended with cells failed, disturbed (kept out of the verdicts) or left
     pending; everything measured is kept, and `invoke bench --run <id>` resumes it
  130  interrupted (Ctrl-C, SIGTERM): the running cell stopped on every node, data kept
"""

EXIT_REFUSED = 2
EXIT_INCOMPLETE = 3
EXIT_INTERRUPTED = 130


class UserError(Exception):
    """A problem with input or environment, with its cause and the fix."""
    exit_code = EXIT_REFUSED

    def __init__(self, cause, fix=None):
        self.cause = cause
        self.fix = fix
        super().__init__(cause if not fix else "%s\n  fix: %s" % (cause, fix))


class RunIncomplete(UserError):
    """The run started and stopped before its end (nodes taken away, an allocation over)."""
    exit_code = EXIT_INCOMPLETE


def incomplete_cells(statuses):
    """'<n> failed, <n> disturbed, <n> pending' for the cells of a run not measured and usable,
    or '' when there are none. statuses: CellStatus-like mappings (status, disturbed)."""
    counts = {"failed": 0, "disturbed": 0, "pending": 0}
    for status in statuses:
        state = status.get("status")
        if state == "succeeded":
            counts["disturbed"] += bool(status.get("disturbed"))
        else:
            counts["failed" if state == "failed" else "pending"] += 1
    return ", ".join("%d %s" % (n, word) for word, n in counts.items() if n)
