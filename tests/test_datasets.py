"""Synthetic CIFAR in the exact binary format, md5-checked archives, and sharding."""
import hashlib
import io
import tarfile

import numpy as np
import pytest

from bench.common.cifar import read_shard
from harness.nodes import datasets
from contract.errors import UserError


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DLBENCH_CACHE", str(tmp_path / "cache"))


def parse_by_hand(raw, label_bytes):
    """An independent reader: walk the bytes record by record, as the CIFAR page describes."""
    record = label_bytes + 3072
    assert len(raw) % record == 0
    out = []
    for offset in range(0, len(raw), record):
        labels = tuple(raw[offset:offset + label_bytes])
        red = raw[offset + label_bytes:offset + label_bytes + 1024]
        green = raw[offset + label_bytes + 1024:offset + label_bytes + 2048]
        blue = raw[offset + label_bytes + 2048:offset + record]
        out.append((labels, red, green, blue))
    return out


def test_cifar10_files_layout_and_bytes(tmp_path):
    folder = datasets.write_synthetic("cifar10", tmp_path, seed=3, train=50, test=7)
    names = sorted(p.name for p in folder.iterdir())
    assert names == ["data_batch_%d.bin" % i for i in range(1, 6)] + ["test_batch.bin"]
    assert (folder / "data_batch_1.bin").stat().st_size == 10 * 3073
    assert (folder / "test_batch.bin").stat().st_size == 7 * 3073
    # byte-exact: the same seed regenerates the same records in the same order
    rng = np.random.default_rng(3)
    expected = datasets.synthetic_records(datasets.spec("cifar10"), 10, rng).tobytes()
    raw = (folder / "data_batch_1.bin").read_bytes()
    assert raw == expected
    records = parse_by_hand(raw, 1)
    assert all(0 <= labels[0] < 10 for labels, *_ in records)
    labels, images = read_shard(str(folder / "data_batch_1.bin"), 1)
    assert images.shape == (10, 3, 32, 32)
    first = records[0]
    assert bytes(images[0, 0].ravel()) == first[1]  # channel 0 is the red plane
    assert bytes(images[0, 2].ravel()) == first[3]
    assert labels[0] == first[0][0]


def test_cifar100_has_coarse_and_fine_labels(tmp_path):
    folder = datasets.write_synthetic("cifar100", tmp_path, seed=1, train=40, test=10)
    raw = (folder / "train.bin").read_bytes()
    assert len(raw) == 40 * 3074
    records = parse_by_hand(raw, 2)
    assert all(coarse == fine // 5 and fine < 100 for (coarse, fine), *_ in records)
    labels, _ = read_shard(str(folder / "train.bin"), 2)
    assert [int(x) for x in labels] == [fine for (_, fine), *_ in records]


def test_seed_decides_content(tmp_path):
    a = datasets.write_synthetic("cifar10", tmp_path / "a", seed=0, train=5, test=5)
    b = datasets.write_synthetic("cifar10", tmp_path / "b", seed=0, train=5, test=5)
    c = datasets.write_synthetic("cifar10", tmp_path / "c", seed=1, train=5, test=5)
    same = (a / "test_batch.bin").read_bytes() == (b / "test_batch.bin").read_bytes()
    differ = (a / "test_batch.bin").read_bytes() != (c / "test_batch.bin").read_bytes()
    assert same and differ


def test_truncated_file_is_rejected(tmp_path):
    path = tmp_path / "short.bin"
    path.write_bytes(b"\0" * 3000)
    with pytest.raises(UserError, match="not a whole number of 3073-byte"):
        datasets.read_records(path, datasets.spec("cifar10"))


def test_split_is_disjoint_equal_and_seeded():
    records = np.arange(50000 * 2, dtype=np.uint8).reshape(50000, 2)
    records[:, 0] = np.arange(50000) % 251
    records = np.concatenate([np.arange(50000).reshape(-1, 1).astype(np.uint32).view(np.uint8),
                              records], axis=1)  # a unique id in the first 4 bytes
    shards = datasets.split(records, 3, seed=0)
    assert [len(s) for s in shards] == [16666, 16666, 16666]  # as in the paper
    ids = [set(s[:, :4].copy().view(np.uint32).ravel()) for s in shards]
    assert not (ids[0] & ids[1]) and not (ids[1] & ids[2]) and not (ids[0] & ids[2])
    again = datasets.split(records, 3, seed=0)
    assert all((x == y).all() for x, y in zip(shards, again))


def test_prepare_writes_shards_with_checksums():
    folder = datasets.prepare("cifar10", "synthetic", 3)
    meta = __import__("json").loads((folder / "shards.json").read_text())
    assert meta["workers"] == 3 and meta["record_bytes"] == 3073
    for entry in meta["shards"]:
        path = folder / entry["file"]
        assert entry["images"] == 16666
        assert hashlib.md5(path.read_bytes()).hexdigest() == entry["md5"]
        labels, images = read_shard(str(path), 1)
        assert len(labels) == 16666 and images.shape[1:] == (3, 32, 32)
    # the whole set for asynchronous TensorFlow workers: every shard, in rank order
    full = (folder / meta["full"]["file"]).read_bytes()
    assert meta["full"]["images"] == 3 * 16666
    assert hashlib.md5(full).hexdigest() == meta["full"]["md5"]
    assert full == b"".join((folder / e["file"]).read_bytes() for e in meta["shards"])


def make_archive(path, folder, files):
    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo("%s/%s" % (folder, name))
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_real_archive_wrong_md5_names_both(tmp_path):
    archive = make_archive(tmp_path / "cifar-10-binary.tar.gz", "cifar-10-batches-bin",
                           {"data_batch_1.bin": b"x"})
    with pytest.raises(UserError) as caught:
        datasets.fetch_real("cifar10", archive)
    message = str(caught.value)
    assert datasets.md5sum(archive) in message
    assert "c32a1d4ab5d03f1284b67883e8d87530" in message


def extracts_after_md5_check(tmp_path):
    """A CIFAR-10 archive of 4 images a file, fetched: the folder it gave."""
    s = datasets.spec("cifar10")
    payload = datasets.synthetic_records(s, 4, np.random.default_rng(0)).tobytes()
    archive = make_archive(tmp_path / "c.tar.gz", s.folder,
                           {f: payload for f in s.train_files + s.test_files})
    folder = datasets.fetch_real("cifar10", archive, expected_md5=datasets.md5sum(archive))
    assert (folder / "data_batch_3.bin").read_bytes() == payload
    return folder


def test_real_archive_extracts_after_md5_check(tmp_path):
    extracts_after_md5_check(tmp_path)


def test_a_python_without_tarfiles_data_filter_extracts_and_refuses_alike(tmp_path,
                                                                          monkeypatch):
    """Debian 12's Python 3.11.2 has no filter="data" (3.11.4 added it): the archive still
    extracts, and a member that climbs out of the folder is still refused."""
    import tarfile
    monkeypatch.delattr(tarfile, "data_filter", raising=False)
    folder = extracts_after_md5_check(tmp_path)
    (folder.parent / "verified").unlink()  # as if this archive had not been taken yet
    hostile = make_archive(tmp_path / "h.tar.gz", "..", {"escaped": b"x"})
    with pytest.raises(UserError, match="not a plain file or folder inside"):
        datasets.fetch_real("cifar10", hostile, expected_md5=datasets.md5sum(hostile))
    assert not (tmp_path / "escaped").exists()


def test_corrupt_archive_with_matching_md5_fails_clearly(tmp_path):
    archive = tmp_path / "bad.tar.gz"
    archive.write_bytes(b"\x1f\x8b" + b"garbage" * 100)
    with pytest.raises(UserError, match="could not be extracted"):
        datasets.fetch_real("cifar10", archive, expected_md5=datasets.md5sum(archive))


def test_archive_missing_files_is_not_accepted(tmp_path):
    archive = make_archive(tmp_path / "c.tar.gz", "cifar-10-batches-bin", {"readme": b"hi"})
    with pytest.raises(UserError, match="has no cifar-10-batches-bin/data_batch_1.bin"):
        datasets.fetch_real("cifar10", archive, expected_md5=datasets.md5sum(archive))


def test_synthetic_labels_can_be_learned_from_the_pixels():
    """The synthetic set's labels depend on its pixels: the class means of 2,000 images
    classify 500 others far above chance (10%), for CIFAR-10 and CIFAR-100 alike."""
    for name, least in (("cifar10", 0.95), ("cifar100", 0.5)):
        s = datasets.spec(name)
        records = datasets.synthetic_records(s, 2500, np.random.default_rng(0))
        labels = records[:, s.label_bytes - 1].astype(int)
        pixels = records[:, s.label_bytes:].astype(np.float32)
        train, test = slice(0, 2000), slice(2000, 2500)
        means = np.stack([pixels[train][labels[train] == c].mean(axis=0)
                          for c in range(s.classes)])
        guess = np.argmin(((pixels[test, None, :] - means[None]) ** 2).sum(axis=2), axis=1)
        assert (guess == labels[test]).mean() >= least, name


def test_the_whole_training_set_goes_only_where_a_framework_provisioned_reads_it(tmp_path,
                                                                               monkeypatch):
    """Only asynchronous TensorFlow reads the whole set on every node: provisioning MXNet
    alone (the VM test) pushes each node's shard and not the set 3x its size."""
    from harness.nodes import provision
    (tmp_path / "shards.json").write_text('{"id": "cifar10-synthetic-seed0"}')
    monkeypatch.setattr(datasets, "prepare", lambda *a, **k: tmp_path)
    found = provision.needed_datasets("smoke", 3, progress=None)
    assert [d["id"] for d in found] == ["cifar10-synthetic-seed0"]
    whole_set = provision.whole_set_needed
    assert whole_set(["mxnet"]) is False and whole_set(["pytorch", "mxnet"]) is False
    assert whole_set(["tensorflow"]) is True and whole_set(None) is True
