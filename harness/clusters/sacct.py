"""Slurm's own account of the job steps that ran a run's roles (`--inventory slurm`): for each
cell, `sacct` for its steps goes to <cell>/sacct.txt, which the records read (elapsed, CPU
time and peak memory per process, as Slurm measured them, beside psutil's). A cluster without
accounting (no slurmdbd) is said so, not passed over."""
import re
import subprocess
import time
from pathlib import Path

from contract import nodefolder, runfolder

FIELDS = "JobID,JobName,NodeList,State,ExitCode,Elapsed,TotalCPU,MaxRSS"
FILE = runfolder.SACCT
STEP_FILE = nodefolder.SLURM_STEP  # in each role's folder: the job step that ran it
RUNNING = ("PENDING", "RUNNING", "REQUEUED", "RESIZING", "SUSPENDED", "COMPLETING")
WAIT_SECONDS = 20  # a step's figures reach slurmdbd a moment after it ends


def steps(cell_path):
    """{job step id: role folder} for the processes of one cell that Slurm ran."""
    found = {}
    for step_file in sorted(Path(cell_path).glob("*/*/%s" % STEP_FILE)):
        step = step_file.read_text().strip()
        if step:
            found[step] = step_file.parent
    return found


def keep(run_path, cells, wait=WAIT_SECONDS):
    """Write <cell>/sacct.txt for each cell whose roles were job steps; returns a line that
    says what was kept, or None where no cell ran through Slurm."""
    wanted = {c: steps(Path(run_path) / c) for c in cells}
    wanted = {c: s for c, s in wanted.items() if s}
    if not wanted:
        return None
    every = sorted(s for found in wanted.values() for s in found)
    rows, problem = final_rows(every, wait)
    if rows is None:
        return "sacct: %s; the records carry no Slurm figures" % problem
    for cell, found in wanted.items():
        lines = [FIELDS.replace(",", "|")] + [rows[s] for s in sorted(found) if s in rows]
        (Path(run_path) / cell / FILE).write_text("\n".join(lines) + "\n")
    missing = [s for s in every if s not in rows]
    return "sacct: %d job step(s) of %d cell(s) kept in <cell>/%s%s" % (
        len(every) - len(missing), len(wanted), FILE,
        "; Slurm had no record of %s" % ", ".join(missing) if missing else "")


def final_rows(step_ids, wait):
    """({step: its sacct line}, None) once no step is still running in Slurm's books (or
    `wait` s have passed); (None, why) where sacct cannot answer."""
    deadline = time.monotonic() + wait
    while True:
        try:
            done = subprocess.run(["sacct", "-n", "-P", "--format=%s" % FIELDS,
                                   "-j", ",".join(step_ids)], capture_output=True, text=True,
                                  timeout=30)
        except FileNotFoundError:
            return None, "sacct is not on PATH"
        except subprocess.TimeoutExpired:
            return None, "sacct did not answer within 30 s (slurmdbd down?)"
        if done.returncode != 0:
            return None, "Slurm's accounting does not answer (%s)" % (
                done.stderr.strip().splitlines() or ["exit %d" % done.returncode])[-1]
        rows = {line.split("|")[0]: line for line in done.stdout.splitlines() if line}
        rows = {s: rows[s] for s in step_ids if s in rows}
        if time.monotonic() >= deadline or not any(
                rows[s].split("|")[3] in RUNNING for s in rows):
            return rows, None
        time.sleep(1)


def kept(cell_path):
    """{job step id: its sacct line} from <cell>/sacct.txt ({} where there is none)."""
    path = Path(cell_path) / FILE
    lines = path.read_text().splitlines()[1:] if path.is_file() else []
    return {line.split("|")[0]: line for line in lines if line}


def records(row):
    """(the step's state, [(metric, value, unit)]) of one sacct line: Slurm's elapsed and CPU
    seconds, and its MaxRSS in MB (none where Slurm gathered no figures)."""
    values = dict(zip(FIELDS.split(","), row.split("|")))
    out = []
    for metric, text, parse, unit in (("slurm_elapsed_s", values["Elapsed"], seconds, "s"),
                                      ("slurm_cpu_s", values["TotalCPU"], seconds, "s"),
                                      ("slurm_max_rss_mb", values["MaxRSS"], megabytes, "MB")):
        value = parse(text)
        if value is not None:
            out.append((metric, value, unit))
    return values["State"], out


def seconds(text):
    """Slurm's [D-][HH:]MM:SS[.mmm] -> seconds."""
    match = re.match(r"^(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+(?:\.\d+)?)$", text.strip())
    if not match:
        return None
    days, hours, minutes, secs = match.groups()
    return (int(days or 0) * 86400 + int(hours or 0) * 3600 + int(minutes) * 60
            + float(secs))


def megabytes(text):
    """Slurm's 63884K / 512M / 1.5G -> MB of 2^20 bytes, as the sampler's peak_rss_mb."""
    match = re.match(r"^(\d+(?:\.\d+)?)([KMGT]?)$", text.strip())
    if not match:
        return None
    scale = {"": 1, "K": 1024, "M": 1024 ** 2, "G": 1024 ** 3, "T": 1024 ** 4}[match.group(2)]
    return float(match.group(1)) * scale / 1024 ** 2
