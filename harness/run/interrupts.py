"""Ctrl-C and SIGTERM during a run: a flag that the watch loop acts on.

Raised from a signal handler, a KeyboardInterrupt lands wherever the main thread is, and that
is mostly inside a node command, where Invoke's runner catches it, forwards it to the command
and carries on: the run would go on as if nothing happened. So the handler only sets a flag, and
the loops that wait (watching a cell, starting the next) raise at a point where cleanup follows.
A second signal raises at once, for a user who means it.
"""
import signal
import threading

_requested = threading.Event()


def install():
    _requested.clear()
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, _on_signal)


def restore():
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _on_signal(number, frame):
    if _requested.is_set():
        raise KeyboardInterrupt("signal %d, again" % number)
    _requested.set()


def check():
    """Raise KeyboardInterrupt here if a signal came."""
    if _requested.is_set():
        raise KeyboardInterrupt("interrupted")
