"""`invoke bench --inventory slurm` from outside an allocation:

- `--partition P` asks Slurm for the allocation itself (salloc --no-shell), with the nodes and
  a time limit derived from the plan, shows the queue state while it waits, runs the plan in
  it and releases it (scancel) at the end, also on Ctrl-C or a failure;
- `--sbatch` writes one batch script that runs the plan inside one allocation and resumes by
  run id (run it again, or resubmit it, and only the unfinished cells run); `--submit` also
  submits it. For clusters that allow no interactive allocation.
"""
import math
import os
import re
import shlex
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from contract.errors import UserError
from ..paths import REPO
from contract import runfolder

QUEUE_POLL_SECONDS = 5.0
# the allocation's time limit: the plan's expected time x this, plus a margin for start-up
LIMIT_FACTOR, LIMIT_MARGIN_MINUTES = 1.5, 10


def time_limit_minutes(rows):
    """rows: estimate.plan_seconds's (cell, expected seconds or None, basis); a cell with no
    estimate counts its timeout, the longest it may take."""
    seconds = sum(s if s is not None else cell.default_timeout() for cell, s, _ in rows)
    return int(math.ceil(seconds * LIMIT_FACTOR / 60.0)) + LIMIT_MARGIN_MINUTES


def slurm_time(minutes):
    """Slurm's days-hours:minutes:seconds."""
    days, rest = divmod(int(minutes), 24 * 60)
    return "%d-%02d:%02d:00" % (days, rest // 60, rest % 60)


@contextmanager
def allocated(partition, nodes, minutes, name="dlbench"):
    """Hold an allocation of `nodes` nodes for the block (SLURM_JOB_ID set in it); the queue
    state is printed while the request waits; the allocation is released on every way out."""
    command = ["salloc", "--no-shell", "--nodes=%d" % nodes, "--time=%s" % slurm_time(minutes),
               "--job-name=%s" % name]
    if partition:
        command.append("--partition=%s" % partition)
    print("asking Slurm for %d node(s) for up to %s: %s"
          % (nodes, slurm_time(minutes), " ".join(shlex.quote(c) for c in command)), flush=True)
    request = _Request(command)
    try:
        job = request.wait()
        print("allocation %s granted: %s" % (job, _squeue(job, "%N") or "?"), flush=True)
        previous = os.environ.get("SLURM_JOB_ID")
        os.environ["SLURM_JOB_ID"] = job
        try:
            yield job
        finally:
            _restore("SLURM_JOB_ID", previous)
    finally:
        request.release()


class _Request:
    """A running `salloc --no-shell`: its job id once Slurm names it, its queue state while it
    is pending."""

    def __init__(self, command):
        self.job, self.lines = None, []
        try:
            self.process = subprocess.Popen(command, stdout=subprocess.PIPE,
                                            stderr=subprocess.STDOUT, text=True,
                                            stdin=subprocess.DEVNULL)
        except FileNotFoundError:
            raise UserError("--partition: salloc is not on PATH",
                            "run on a login node of the Slurm cluster") from None
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.process.stdout:
            self.lines.append(line.rstrip())
            found = re.search(r"job allocation (\d+)", line)
            if found:
                self.job = found.group(1)

    def wait(self):
        shown = None
        while self.process.poll() is None:
            state = _squeue(self.job, "%T %r") if self.job else None
            if state and state != shown:
                print("  job %s: %s" % (self.job, state.lower()), flush=True)
                shown = state
            time.sleep(QUEUE_POLL_SECONDS if self.job else 0.2)
        self.reader.join(timeout=5)
        if self.process.returncode != 0 or not self.job:
            raise UserError("Slurm gave no allocation: %s" % ("; ".join(self.lines[-3:])
                                                              or "salloc exited with %d"
                                                              % self.process.returncode),
                            "check the partition (`sinfo`) and `scontrol ping`")
        return self.job

    def release(self):
        if self.process.poll() is None:  # still pending (Ctrl-C, an error): withdraw it
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
        if self.job:
            subprocess.run(["scancel", self.job], capture_output=True, timeout=30)
            print("allocation %s released" % self.job, flush=True)


def _squeue(job, fields):
    try:
        out = subprocess.run(["squeue", "-h", "-j", str(job), "-o", fields],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


def _restore(name, value):
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


# --- batch mode -----------------------------------------------------------------------------

def batch_script(run_id, nodes, minutes, partition, first_args, resume_args, results):
    """The text of a batch script that runs `invoke bench FIRST_ARGS --run RUN_ID` in one
    allocation, or, once the run exists, resumes it (RESUME_ARGS: without the options that
    choose cells, which come from the run's manifest then). Its output goes beside the run
    folder."""
    invoke = Path(sys.executable).parent / "invoke"
    lines = ["#!/bin/bash",
             "#SBATCH --job-name=dlbench-%s" % run_id,
             "#SBATCH --nodes=%d" % nodes,
             "#SBATCH --time=%s" % slurm_time(minutes),
             "#SBATCH --open-mode=append",  # a resubmission adds to the log
             "#SBATCH --output=%s" % (Path(results).resolve() / ("%s.sbatch.log" % run_id))]
    if partition:
        lines.append("#SBATCH --partition=%s" % partition)
    lines += ["# Written by `invoke bench --sbatch`. Submitting it again resumes run %s: only"
              % run_id,
              "# its unfinished cells run. `invoke collect --run %s` reads the results." % run_id,
              "set -eu",
              "cd %s" % shlex.quote(str(REPO)),
              "if [ -f %s ]; then" % shlex.quote(str(Path(results).resolve() / run_id
                                                    / runfolder.MANIFEST)),
              "  exec %s" % _bench_line(invoke, resume_args, run_id),
              "fi",
              "exec %s" % _bench_line(invoke, first_args, run_id)]
    return "\n".join(lines) + "\n"


def _bench_line(invoke, args, run_id):
    return "%s bench %s --run %s" % (shlex.quote(str(invoke)),
                                     " ".join(shlex.quote(a) for a in args), shlex.quote(run_id))


def submit(script):
    try:
        out = subprocess.run(["sbatch", str(script)], capture_output=True, text=True,
                             timeout=60)
    except FileNotFoundError:
        raise UserError("--submit: sbatch is not on PATH",
                        "run on a login node of the Slurm cluster") from None
    found = re.search(r"Submitted batch job (\d+)", out.stdout)
    if out.returncode != 0 or not found:
        raise UserError("sbatch refused %s: %s" % (script, out.stderr.strip()),
                        "check the partition and the time limit (`sinfo`), then "
                        "`sbatch %s`" % script)
    return found.group(1)
