"""A run's folder, results/<run-id>/, and what the analysis writes beside it:

    manifest.json  records.jsonl  .attempts/  explain.json
    <cell-id>/status.json  <cell-id>/sacct.txt  <cell-id>/<node>/<role>-<rank>/ (nodefolder)
    analysis/report.md  analysis/report.html  analysis/...
    interval-check-<time>/interval_check.json (an interval check)

This module is the only one that names those files (tests/test_contract_names.py holds every
other module to that); harness/results/ fetches (fetch.py) and makes the records (run_records.py), the run's lifecycle and
resume.py say what changed, and this writes it."""
import json
import shutil
from pathlib import Path

from contract import manifest as manifests
from contract.errors import UserError

MANIFEST, STATUS, RECORDS, ATTEMPTS = "manifest.json", "status.json", "records.jsonl", ".attempts"
EXPLAIN = "explain.json"  # an invoke explain result attached to the run (invoke explain --run)
SACCT = "sacct.txt"  # Slurm's accounting of a cell's job steps
ANALYSIS, REPORT, REPORT_HTML = "analysis", "report.md", "report.html"
# an interval check's folder and table (invoke interval-check); "calibration" is the trainers'
# timed passes alone, and the check's folders from before it was named apart read as its
INTERVAL_CHECK_FOLDER, INTERVAL_CHECK = "interval-check-", "interval_check.json"
INTERVAL_CHECK_REPORT = "interval_check.md"
OLD_INTERVAL_CHECK_FOLDER, OLD_INTERVAL_CHECK = "calibration-", "calibration.json"
STATES = ("pending", "running", "succeeded", "failed")


def read_json(path, default=None):
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return default


def write_json(path, data):
    """Whole or not at all: written beside, then renamed over."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True, default=str))
    tmp.replace(path)


# status.json's keys and their defaults (a callable makes a fresh list or dict for each cell)
STATUS_KEYS = (
    ("status", "pending"),
    ("reason", ""),
    ("warning", ""),  # a cell that succeeded with a part missing (its operator profile)
    ("settings", None),
    ("started", None),
    ("detected", None),   # when the end or the fault was seen; cleanup follows
    ("ended", None),
    ("seconds", None),
    ("updated", None),
    ("processes", list),  # node, role, rank, pid, out_dir of each
    ("killed_hard", dict),
    ("unreachable", list),
    ("log_tails", dict),
    ("fetched_files", 0),
    # what else ran on each node while the cell did (harness/run/disturbance.py): node ->
    # others' CPU, steal, pressure, run-queue wait, and the share judged against the bound;
    # and why the cell counts as disturbed
    ("interference", dict),
    ("disturbed", ""),
)


class CellStatus(object):
    """One cell's status.json. Item access (status["reason"]) works as on the dict it was;
    a key that is not one of STATUS_KEYS is an error, so a misspelt key cannot pass unseen."""

    def __init__(self, cell_id, **given):
        unknown = sorted(set(given) - self.names())
        if unknown:
            raise TypeError("status.json has no key %s" % ", ".join(map(repr, unknown)))
        self.cell_id = cell_id
        for key, default in STATUS_KEYS:
            setattr(self, key, given[key] if key in given else
                    default() if callable(default) else default)
        if self.status not in STATES:
            raise ValueError("cell %s: status %r is not one of %s"
                             % (self.cell_id, self.status, ", ".join(STATES)))

    def __getitem__(self, key):
        self._known(key)
        return getattr(self, key)

    def __setitem__(self, key, value):
        self._known(key)
        setattr(self, key, value)

    def __eq__(self, other):
        return isinstance(other, CellStatus) and self.to_dict() == other.to_dict()

    def __repr__(self):
        return "CellStatus(%s)" % ", ".join("%s=%r" % kv for kv in self.to_dict().items())

    def get(self, key, default=None):
        value = getattr(self, key, None)
        return default if value is None else value

    def update(self, **changes):
        for key, value in changes.items():
            self[key] = value

    def _known(self, key):
        if key not in self.names() | {"cell_id"}:
            raise KeyError("status.json has no key %r" % key)

    @classmethod
    def names(cls):
        return {key for key, _ in STATUS_KEYS}

    @classmethod
    def from_dict(cls, data):
        return cls(data["cell_id"], **{k: v for k, v in data.items() if k in cls.names()})

    def to_dict(self):
        return dict([("cell_id", self.cell_id)] +
                    [(key, getattr(self, key)) for key, _ in STATUS_KEYS])


class RunFolder:
    def __init__(self, path):
        self.path = Path(path)
        self.name = self.path.name

    # --- manifest ---
    @property
    def manifest_path(self):
        return self.path / MANIFEST

    def exists(self):
        return self.manifest_path.is_file()

    def manifest(self):
        """The manifest in this format's shape, whichever readable format wrote it."""
        return manifests.upgraded(read_json(self.manifest_path, {}))

    def wall_seconds(self):
        """From the run's start to its end, as its manifest records them."""
        manifest = self.manifest()
        return (manifest.get("ended") or 0) - (manifest.get("started") or 0)

    def write_manifest(self, manifest):
        self.path.mkdir(parents=True, exist_ok=True)
        write_json(self.manifest_path, manifests.check(manifest, str(self.manifest_path)))

    # --- cells ---
    def status(self, cell_id):
        data = read_json(self.path / cell_id / STATUS)
        return CellStatus.from_dict(dict(data, cell_id=cell_id)) if data else CellStatus(cell_id)

    def save_status(self, status, now):
        folder = self.path / status.cell_id
        folder.mkdir(parents=True, exist_ok=True)
        status.updated = now
        write_json(folder / STATUS, status.to_dict())

    def statuses(self):
        """Every cell folder's status, in cell-id order."""
        return [self.status(p.parent.name) for p in sorted(self.path.glob("*/" + STATUS))]

    def set_aside_statuses(self):
        """The status of every attempt set aside in .attempts/."""
        return [read_json(p, {}) or {} for p in sorted(self.path.glob(
            "%s/*/%s" % (ATTEMPTS, STATUS)))]

    def set_aside(self, cell_id):
        """Move an earlier attempt of the cell to .attempts/<cell-id>.<n> (never overwritten)
        and leave a fresh folder marked pending."""
        folder = self.path / cell_id
        if self.status(cell_id).status != "pending" and folder.is_dir():
            shutil.move(str(folder), str(self._attempt_folder(cell_id)))
        folder.mkdir(parents=True, exist_ok=True)
        write_json(folder / STATUS, CellStatus(cell_id).to_dict())

    def attempts(self, cell_id):
        """How many earlier attempts of the cell were set aside."""
        return len(list((self.path / ATTEMPTS).glob("%s.*" % cell_id)))

    def _attempt_folder(self, cell_id):
        attempts = self.path / ATTEMPTS
        attempts.mkdir(exist_ok=True)
        number = 1
        while (attempts / ("%s.%d" % (cell_id, number))).exists():
            number += 1
        return attempts / ("%s.%d" % (cell_id, number))

    # --- records ---
    @property
    def records_path(self):
        return self.path / RECORDS

    def write_records(self, records):
        tmp = self.records_path.with_name(RECORDS + ".tmp")
        tmp.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in records))
        tmp.replace(self.records_path)

    def records(self):
        """Each record of records.jsonl, in order (none where it is missing)."""
        if not self.records_path.is_file():
            return
        for line in self.records_path.read_text().splitlines():
            if line.strip():
                yield json.loads(line)

    def require_records(self):
        if not self.records_path.is_file():
            raise UserError("%s has no %s" % (self.path, RECORDS),
                            "run `invoke collect --run %s` first" % self.name)
        return self.records_path


def find(results, run_id=None):
    """results/<run-id>; without an id, the newest run by its manifest's start time."""
    root = Path(results)
    if run_id:
        run = RunFolder(root / run_id)
        if not run.exists():
            raise UserError("no run %r in %s" % (run_id, root),
                            "list runs with `ls %s`, or omit --run for the latest" % root)
        return run.path
    runs = every_run(root)
    if not runs:
        raise UserError("no runs in %s" % root, "run `invoke bench` first")
    return max(runs, key=lambda r: (r.manifest().get("started") or 0, r.name)).path


def every_run(results):
    root = Path(results)
    return [RunFolder(p.parent) for p in sorted(root.glob("*/" + MANIFEST))] if root.is_dir() \
        else []
