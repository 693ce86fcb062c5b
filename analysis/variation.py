"""Run-to-run variation measured elsewhere, for a run that could not measure its own (one
repeat per cell): the newest `invoke interval-check` beside the run, on the same CPU, that
measured the run's profile on its benchmarks (issue 54). Without one the report says plainly
that run-to-run variation was not measured."""
import json
from pathlib import Path

CALIBRATION_FILE = "calibration.json"
PROFILES = ("paper", "verdict")  # the profiles a calibration measures


def newest(run_path, profile, cpus):
    """{benchmark: {s, df, source}} from the newest calibration folder beside the run (its
    name sorts by time) whose CPU models are the run's, for `profile`; {} where none."""
    if profile not in PROFILES:
        return {}
    folders = sorted(Path(run_path).resolve().parent.glob("calibration-*"), reverse=True)
    for folder in folders:
        found = _read(folder / CALIBRATION_FILE)
        if not found or sorted(found.get("cpu") or []) != sorted(cpus):
            continue
        measured = {b: dict(v, source="%s (%s size, %d df)" % (folder.name, profile,
                                                                  v["df"]))
                    for b, v in (found.get("variation") or {}).get(profile, {}).items()
                    if v.get("s") is not None and v.get("df")}
        if measured:
            return measured
    return {}


def _read(path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def cpus_of(manifest):
    """The CPU models a run's processes read (the manifest's `cpu`, per node)."""
    return sorted({c.get("model") for c in (manifest.get("cpu") or {}).values()
                   if isinstance(c, dict) and c.get("model")})
