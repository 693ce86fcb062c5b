"""Run-to-run variation measured elsewhere, for a run that could not measure its own (one
repeat per cell): the newest `invoke interval-check` beside the run, on the same CPU, that
measured the run's size on its benchmarks. Without one the report says plainly
that run-to-run variation was not measured."""
import json
from pathlib import Path

from contract import runfolder

SIZES = ("paper", "verdict")  # the sizes an interval check measures


def newest(run_path, size, cpus, steps):
    """{benchmark: {s, df, source}} from the newest interval check's folder beside the run (its
    name sorts by time; older names too) whose CPU models are the run's, for `size`, measured with the
    run's steps an epoch (steps: {benchmark: steps_per_epoch}); {} where none."""
    if size not in SIZES:
        return {}
    for folder in folders(Path(run_path).resolve().parent):
        found = _read(table(folder))
        if not found or sorted(found.get("cpu") or []) != sorted(cpus):
            continue
        measured = {b: dict(v, source="%s (%s size, %s steps an epoch, %d df)" % (
                        folder.name, size, steps.get(b), v["df"]))
                    for b, v in (found.get("variation") or {}).get(size, {}).items()
                    if v.get("s") is not None and v.get("df")
                    and _same_shape(size, v, steps.get(b))}
        if measured:
            return measured
    return {}


def folders(results):
    """The interval checks' folders in `results`, newest first (by the time in their names),
    those written under the check's older name among them."""
    found = [(p.name[len(prefix):], p)
             for prefix in (runfolder.INTERVAL_CHECK_FOLDER, runfolder.OLD_INTERVAL_CHECK_FOLDER)
             for p in results.glob(prefix + "*")]
    return [p for _, p in sorted(found, reverse=True)]


def table(folder):
    """An interval check's table in its folder, under either name."""
    new = folder / runfolder.INTERVAL_CHECK
    return new if new.is_file() else folder / runfolder.OLD_INTERVAL_CHECK


def _same_shape(size, measured, steps):
    """A variation applies to runs of its own steps an epoch: 2 x 64 steps vary less than 2 x
    16 (docs/methodology.md). Interval checks from before steps were recorded name none: the
    paper size's steps have never changed (Table IV), the verdict size's have."""
    if "steps_per_epoch" in measured:
        return measured["steps_per_epoch"] == steps
    return size == "paper"


def _read(path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def cpus_of(manifest):
    """The CPU models a run's processes read (the manifest's `cpu`, per node)."""
    return sorted({c.get("model") for c in (manifest.get("cpu") or {}).values()
                   if isinstance(c, dict) and c.get("model")})
