"""CIFAR-10/100: the real archives (md5-checked) or a synthetic set in the exact binary format,
then one shard per worker in that same record format.

CIFAR-10 record: 1 label byte + 3072 pixel bytes (1024 R, 1024 G, 1024 B, row-major 32x32).
CIFAR-100 record: 1 coarse label byte + 1 fine label byte + 3072 pixel bytes.
"""
import hashlib
import json
import shutil
import tarfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from contract import nodefolder, paper
from contract.errors import UserError
from ..paths import cache_dir

PIXELS = 3072


@dataclass(frozen=True)
class Spec:
    name: str  # cifar10 | cifar100
    folder: str  # top folder inside the archive
    train_files: tuple
    test_files: tuple
    label_bytes: int
    classes: int
    url: str
    md5: str

    @property
    def record(self):
        return self.label_bytes + PIXELS


SPECS = {
    "cifar10": Spec("cifar10", "cifar-10-batches-bin",
                    tuple("data_batch_%d.bin" % i for i in range(1, 6)), ("test_batch.bin",),
                    1, 10, "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz",
                    "c32a1d4ab5d03f1284b67883e8d87530"),
    "cifar100": Spec("cifar100", "cifar-100-binary", ("train.bin",), ("test.bin",),
                     2, 100, "https://www.cs.toronto.edu/~kriz/cifar-100-binary.tar.gz",
                     "03b5dce01913d631647c71ecec9e9cb8"),
}
TRAIN_IMAGES = paper.TRAIN_IMAGES  # Table IV
TEST_IMAGES = 10000


def spec(name):
    if name not in SPECS:
        raise UserError("unknown dataset %r" % name, "use one of: %s" % ", ".join(SPECS))
    return SPECS[name]


# --- synthetic ------------------------------------------------------------------------------

def write_synthetic(name, out_dir, seed=0, train=TRAIN_IMAGES, test=TEST_IMAGES):
    """Write a seeded synthetic copy of the dataset's binary files under out_dir/<folder>."""
    s = spec(name)
    folder = Path(out_dir) / s.folder
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for files, total in ((s.train_files, train), (s.test_files, test)):
        per_file = _split_evenly(total, len(files))
        for filename, count in zip(files, per_file):
            records = synthetic_records(s, count, rng)
            (folder / filename).write_bytes(records.tobytes())
    return folder


def synthetic_records(s, count, rng):
    """`count` records as a (count, record) uint8 array that a network can learn from: each
    class has a template of 4x4 blocks of 8x8 pixels per channel (drawn once per set, from
    `rng`), and an image is the mean of its class's template and uniform noise. Same bytes
    per image and file layout as CIFAR, so only the pixels' values differ from the real set
    (the same-math check needs a loss that falls: methodology.md, "Data")."""
    templates = rng.integers(0, 256, size=(s.classes, 3, 4, 4), dtype=np.uint16)
    templates = templates.repeat(8, axis=2).repeat(8, axis=3).reshape(s.classes, PIXELS)
    records = np.empty((count, s.record), dtype=np.uint8)
    fine = rng.integers(0, s.classes, size=count, dtype=np.uint8)
    if s.label_bytes == 2:
        records[:, 0] = fine // 5  # CIFAR-100 has 20 superclasses of 5 classes each
    records[:, s.label_bytes - 1] = fine
    noise = rng.integers(0, 256, size=(count, PIXELS), dtype=np.uint16)
    records[:, s.label_bytes:] = (templates[fine] + noise) // 2
    return records


def _split_evenly(total, parts):
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


# --- reading --------------------------------------------------------------------------------

def read_records(path, s):
    """Records of one binary file as (count, record) uint8; rejects a truncated file."""
    raw = np.fromfile(str(path), dtype=np.uint8)
    if raw.size % s.record:
        raise UserError("%s: %d bytes is not a whole number of %d-byte %s records"
                        % (path, raw.size, s.record, s.name),
                        "the file is truncated or not %s: fetch it again" % s.name)
    return raw.reshape(-1, s.record)


def read_train(folder, s):
    return np.concatenate([read_records(Path(folder) / f, s) for f in s.train_files])


# --- real archives --------------------------------------------------------------------------

def md5sum(path, chunk=1 << 20):
    digest = hashlib.md5()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(chunk), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch_real(name, archive=None, expected_md5=None, progress=print):
    """Extract the official archive (downloading it if no path is given) after an md5 check."""
    s = spec(name)
    root = cache_dir() / "datasets" / "real" / name
    folder = root / s.folder
    if (root / "verified").is_file():
        return folder
    archive = Path(archive) if archive else _download(s, progress)
    if not archive.is_file():
        raise UserError("dataset archive %s does not exist" % archive,
                        "give the path of %s with --data-archive" % s.url.rsplit("/", 1)[-1])
    expected = expected_md5 or s.md5
    got = md5sum(archive)
    if got != expected:
        raise UserError("archive %s has md5 %s, expected %s for %s" % (archive, got, expected, name),
                        "the file is corrupt or not the official %s; download it again from %s"
                        % (s.url.rsplit("/", 1)[-1], s.url))
    _extract(archive, root, s)
    (root / "verified").write_text(got + "\n")
    return folder


def _download(s, progress):
    target = cache_dir() / "downloads" / s.url.rsplit("/", 1)[-1]
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".part")
    progress("downloading %s -> %s" % (s.url, target))
    try:
        with urllib.request.urlopen(s.url, timeout=60) as response, open(partial, "wb") as out:
            shutil.copyfileobj(response, out, 1 << 20)
    except OSError as exc:
        raise UserError("could not download %s: %s" % (s.url, exc),
                        "download it by hand and pass it with --data-archive PATH")
    partial.rename(target)
    return target


def _plain_members(tar):
    """The archive's members if every one is a plain file or folder inside the target (what
    tarfile's "data" filter allows of an archive like CIFAR's): an absolute path, a '..', a
    link or a device is refused, as the filter refuses it."""
    members = tar.getmembers()
    for member in members:
        parts = Path(member.name).parts
        if member.name.startswith(("/", "\\")) or ".." in parts or not (
                member.isfile() or member.isdir()):
            raise tarfile.TarError("member %r is not a plain file or folder inside the "
                                   "archive's folder" % member.name)
    return members


def _extract(archive, root, s):
    try:
        with tarfile.open(archive, "r:gz") as tar:
            if hasattr(tarfile, "data_filter"):  # Python 3.11.4 and later
                tar.extractall(root, filter="data")
            else:  # Debian 12's 3.11.2: the same refusals, by hand
                tar.extractall(root, members=_plain_members(tar))
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise UserError("archive %s could not be extracted: %s" % (archive, exc),
                        "download it again")
    for filename in s.train_files + s.test_files:
        if not (root / s.folder / filename).is_file():
            raise UserError("archive %s has no %s/%s" % (archive, s.folder, filename),
                            "this is not the binary-format %s archive (%s)" % (s.name, s.url))


# --- shards ---------------------------------------------------------------------------------

def dataset_id(name, source, seed=0):
    # "learnable": the synthetic set's pixels depend on the label (an id of its own, so that
    # shards of an earlier, unlearnable set are never taken for it)
    return "%s-%s" % (name, "synthetic-learnable-seed%d" % seed if source == "synthetic"
                      else "real")


INDEX = nodefolder.SHARDS_INDEX


def index_of(folder):
    """The index of the split in `folder` (what prepare returned)."""
    return json.loads((folder / INDEX).read_text())


def prepare(name, source, workers, seed=0, archive=None, progress=print):
    """Shards for `workers` workers, cached; returns the folder holding their INDEX."""
    ds_id = dataset_id(name, source, seed)
    out = cache_dir() / "datasets" / "shards" / ds_id / ("%d-workers" % workers)
    index = out / INDEX
    if index.is_file() and (out / full_name(workers)).is_file():
        return out
    if source == "synthetic":
        folder = cache_dir() / "datasets" / "synthetic" / ds_id
        if not (folder / spec(name).folder / spec(name).test_files[0]).is_file():
            progress("generating synthetic %s (seed %d)" % (name, seed))
            write_synthetic(name, folder, seed=seed)
        folder = folder / spec(name).folder
    elif source == "real":
        folder = fetch_real(name, archive, progress=progress)
    else:
        raise UserError("unknown data source %r" % source, "use `synthetic` or `real`")
    write_shards(read_train(folder, spec(name)), spec(name), workers, out, seed, ds_id)
    return out


def full_name(workers):
    """Every shard of a `workers`-way split, concatenated in rank order."""
    return "full-of-%d.bin" % workers



def shard_name(rank, workers):
    return "shard-%d-of-%d.bin" % (rank, workers)


def split(records, workers, seed):
    """Shuffle once (seeded), then equal contiguous shards of the 50,000 images (Table IV);
    dropping the remainder so that every worker runs the same number of steps is the package's
    choice (50,000 / 3 -> 16,666 each)."""
    order = np.random.default_rng(seed).permutation(len(records))
    per = len(records) // workers
    return [records[order[r * per:(r + 1) * per]] for r in range(workers)]


def write_shards(records, s, workers, out, seed, ds_id):
    out.mkdir(parents=True, exist_ok=True)
    entries = []
    shards = split(records, workers, seed)
    for rank, shard in enumerate(shards):
        path = out / shard_name(rank, workers)
        path.write_bytes(shard.tobytes())
        entries.append({"rank": rank, "file": path.name, "images": len(shard),
                        "md5": md5sum(path)})
    # Asynchronous TensorFlow workers each read the whole training set (paper, section III-A)
    full = out / full_name(workers)
    full.write_bytes(b"".join(shard.tobytes() for shard in shards))
    meta = {"dataset": s.name, "id": ds_id, "workers": workers, "label_bytes": s.label_bytes,
            "classes": s.classes, "record_bytes": s.record, "shards": entries,
            "full": {"file": full_name(workers), "images": sum(len(x) for x in shards), "md5": md5sum(full)}}
    tmp = out / (INDEX + ".tmp")
    tmp.write_text(json.dumps(meta, indent=1))
    tmp.rename(out / INDEX)  # written last: its presence means the shards are complete
