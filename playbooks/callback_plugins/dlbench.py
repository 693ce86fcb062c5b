"""Ansible's default screen output, less the lines that cry wolf.

The framework envs are built in the background (async) and waited for with async_status
under `until`, and Ansible's default output prints "FAILED - RETRYING" for every poll that
finds a build still running: nothing failed. Here a poll says what is being waited for and
for how long, at most every PROGRESS_EVERY seconds per build, and a finished build says its
time. Everything else is the default callback's.
"""
from __future__ import annotations

import time

from ansible.plugins.callback.default import CallbackModule as DefaultCallback

DOCUMENTATION = """
    name: dlbench
    type: stdout
    short_description: the default output, with background builds polled quietly
    description:
        - Ansible's default callback, except that a retry of a task under `until` prints a
          "waiting" line with the time spent instead of "FAILED - RETRYING".
    extends_documentation_fragment:
      - default_callback
      - result_format_callback
    requirements:
      - set as stdout in configuration
"""

PROGRESS_EVERY = 20  # seconds between two "still building" lines of one build


class CallbackModule(DefaultCallback):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "stdout"
    CALLBACK_NAME = "dlbench"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._started = {}  # async job id -> (time started, what it builds)
        self._waiting = {}  # (host, task, item) -> (time first polled, time last said)

    def v2_runner_item_on_ok(self, result):
        job, label = result.result.get("ansible_job_id"), self._get_item_label(result.result)
        host = self.host_label(result)
        super().v2_runner_item_on_ok(result)
        if job and _started_in_background(result.task) and job not in self._started:
            self._started[job] = (time.monotonic(), label)
            self._display.display("[%s] building %s in the background" % (host, label))
        if job in self._started and result.result.get("finished"):
            began, what = self._started.pop(job)
            self._display.display("[%s] built %s in %.0f s" % (host, what,
                                                               time.monotonic() - began))

    def v2_runner_retry(self, result):
        if self._last_task_banner != result.task._uuid:
            self._print_task_banner(result.task)
        now = time.monotonic()
        job = result.result.get("ansible_job_id")
        began, what = self._started.get(job, (None, None))
        # a retry's result may not carry its loop item: a build is told apart by its job
        key = (self.host_label(result), result.task._uuid,
               job or str(self._get_item_label(result.result)))
        first, said = self._waiting.get(key, (now, None))
        if said is not None and now - said < PROGRESS_EVERY:
            return
        self._waiting[key] = (first, now)
        if what is not None:
            self._display.display("[%s] still building %s: %.0f s so far"
                                  % (key[0], what, now - began))
        else:
            self._display.display("[%s] waiting: %s: %.0f s so far"
                                  % (key[0], result.task_name or result.task, now - first))


def _started_in_background(task):
    """Whether the task starts a job and leaves it running (async with poll 0), as opposed to
    async_status, whose results carry the job's id too (its cleanup's with finished unset)."""
    return bool(getattr(task, "async_val", 0)) and getattr(task, "poll", None) == 0
