"""Multi30k loader (offline: COURSE_DATA_DIR, fake downloads, corrupted files) and bucketing."""
import gzip
import hashlib
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from course_utils.data import multi30k
from course_utils.data.bucketing import BucketBatchSampler, pad_sequences, padding_fraction, random_batches
from course_utils.data.multi30k import Multi30kError, load_multi30k

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "multi30k"
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason="needs ../shared/data/multi30k")


def no_leftovers(folder):
    return [p.name for p in Path(folder).iterdir() if p.name.startswith(".") or p.suffix == ".part"]


@needs_shared
def test_hash_constants_match_sha256sums():
    listed = dict(reversed(line.split()) for line in (SHARED / "SHA256SUMS").read_text().splitlines() if line)
    assert listed == multi30k.SHA256


@needs_shared
def test_loads_every_split_from_course_data_dir(monkeypatch):
    monkeypatch.setenv("COURSE_DATA_DIR", str(SHARED.parent))
    for split, n in multi30k.NUM_PAIRS.items():
        pairs = load_multi30k(split, allow_download=False)
        assert len(pairs) == n
        assert all(de and en for de, en in pairs[:100])
    train = load_multi30k("train", allow_download=False)
    assert train[0] == ("Zwei junge weiße Männer sind im Freien in der Nähe vieler Büsche.",
                        "Two young, White males are outside near many bushes.")
    english = [en for _, en in train]
    assert not any("&amp;" in s or "&quot;" in s or "&#" in s for s in english)   # unescaped
    assert any(" & " in s for s in english)
    assert len(load_multi30k("val", max_pairs=7)) == 7


def fake_fetch_from(folder, corrupt=None):
    """A fetch() that 'downloads' from a local folder; corrupt(bytes) -> bytes alters the payload."""
    def fetch(url, dest):
        data = (Path(folder) / url.rsplit("/", 1)[-1]).read_bytes()
        dest.write(corrupt(data) if corrupt else data)
    return fetch


@needs_shared
def test_downloads_into_cache_when_no_data_dir(tmp_path, monkeypatch):
    monkeypatch.delenv("COURSE_DATA_DIR", raising=False)
    monkeypatch.setenv("COURSE_CACHE_DIR", str(tmp_path))
    urls = []
    fetch = fake_fetch_from(SHARED)
    monkeypatch.setattr(multi30k, "fetch", lambda url, dest: (urls.append(url), fetch(url, dest)))
    pairs = load_multi30k("val")
    assert len(pairs) == 1014
    assert urls == [multi30k.URL.format(name=f"val.{lang}.gz") for lang in ("de", "en")]
    assert urls[0] == "https://github.com/multi30k/dataset/raw/master/data/task1/raw/val.de.gz"
    assert sorted(p.name for p in (tmp_path / "multi30k").iterdir()) == ["val.de.gz", "val.en.gz"]
    load_multi30k("val")                                   # second time: from the cache
    assert len(urls) == 2


@needs_shared
def test_download_from_file_url(tmp_path):
    url = (SHARED / "val.en.gz").as_uri()                  # file:// goes through urllib like https://
    path = multi30k.download("val.en.gz", tmp_path, url=url)
    assert multi30k.sha256(path) == multi30k.SHA256["val.en.gz"]
    assert no_leftovers(tmp_path) == []


@needs_shared
@pytest.mark.parametrize("corrupt", [lambda b: b[: len(b) // 2], lambda b: b[:100] + b"x" + b[101:]],
                         ids=["truncated", "flipped-byte"])
def test_bad_download_leaves_nothing(tmp_path, monkeypatch, corrupt):
    monkeypatch.setattr(multi30k, "fetch", fake_fetch_from(SHARED, corrupt))
    with pytest.raises(Multi30kError, match="SHA-256"):
        multi30k.ensure_file("val", "de", tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_failed_download_says_what_to_do(tmp_path, monkeypatch):
    def offline(url, dest):
        dest.write(b"partial")
        raise OSError("Network is unreachable")
    monkeypatch.setattr(multi30k, "fetch", offline)
    with pytest.raises(Multi30kError, match="could not download.*internet.*COURSE_DATA_DIR"):
        multi30k.ensure_file("train", "en", tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_missing_file_without_download(tmp_path):
    with pytest.raises(Multi30kError, match="missing.*copy"):
        multi30k.ensure_file("test_2016_flickr", "en", tmp_path, allow_download=False)


@needs_shared
def test_corrupted_file_on_disk(tmp_path):
    for name in ("val.de.gz", "val.en.gz"):
        shutil.copy(SHARED / name, tmp_path / name)
    data = (tmp_path / "val.en.gz").read_bytes()
    (tmp_path / "val.en.gz").write_bytes(data[:-10])       # truncated
    with pytest.raises(Multi30kError, match="truncated or corrupted.*Delete it"):
        load_multi30k("val", folder=tmp_path, allow_download=False)
    assert (tmp_path / "val.en.gz").read_bytes() == data[:-10]  # the loader does not delete your files


def test_bad_arguments():
    with pytest.raises(ValueError, match="split"):
        multi30k.file_name("test", "de")
    with pytest.raises(ValueError, match="lang"):
        multi30k.file_name("val", "fr")


def test_mismatched_files(tmp_path, monkeypatch):
    lines = {"val.de.gz": b"a\nb\n", "val.en.gz": b"a\n"}
    for name, text in lines.items():
        (tmp_path / name).write_bytes(gzip.compress(text))
    monkeypatch.setattr(multi30k, "SHA256", {**multi30k.SHA256, **{
        n: hashlib.sha256((tmp_path / n).read_bytes()).hexdigest() for n in lines}})
    with pytest.raises(Multi30kError, match="do not belong together"):
        load_multi30k("val", folder=tmp_path)


# ---- bucketing ---------------------------------------------------------------------------------
def test_bucketing_respects_budget_and_covers_everything():
    lengths = np.random.default_rng(0).integers(3, 40, size=2000)
    sampler = BucketBatchSampler(lengths, max_tokens=500, seed=1)
    batches = list(sampler)
    assert sorted(i for b in batches for i in b) == list(range(2000))
    assert all(len(b) * lengths[b].max() <= 500 for b in batches)
    assert padding_fraction(batches, lengths) < 0.1 < padding_fraction(random_batches(2000, 20), lengths)


def test_bucketing_epochs_and_replicas():
    lengths = np.random.default_rng(0).integers(3, 40, size=500)
    sampler = BucketBatchSampler(lengths, max_tokens=300, seed=1)
    first = list(sampler)
    assert list(sampler) == first                           # same epoch, same order (resumable)
    sampler.set_epoch(1)
    assert list(sampler) != first
    shards = [list(BucketBatchSampler(lengths, 300, seed=1, num_replicas=2, rank=r)) for r in (0, 1)]
    assert len(shards[0]) == len(shards[1]) == len(BucketBatchSampler(lengths, 300, seed=1, num_replicas=2))
    assert set(i for b in shards[0] + shards[1] for i in b) == set(range(500))
    with pytest.raises(ValueError, match="max_tokens"):
        BucketBatchSampler([5, 50], max_tokens=40)


def test_pad_sequences():
    out = pad_sequences([[5, 6, 7], [8]], pad_id=0)
    assert torch.equal(out, torch.tensor([[5, 6, 7], [8, 0, 0]]))
