"""Multi30k loader (pinned URL, fake downloads, corrupted files, the cache, COURSE_DATA_DIR), the one rule
for tests that need the data (tests/multi30k_rule.py), and bucketing."""
import gzip
import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from course_utils.data import multi30k
from course_utils.data.batch import pad
from course_utils.data.multi30k import Multi30kError, load_multi30k
from course_utils.translation.batching import BucketBatchSampler, padding_fraction, random_batches
from tests import multi30k_rule

pytest_plugins = ["pytester"]
ALL_FILES = [multi30k.file_name(split, lang) for split in multi30k.SPLITS for lang in multi30k.LANGS]


@pytest.fixture
def real():
    """The folder holding the six real files: the multi30k rule has made sure they are there."""
    return multi30k.data_dir()


@pytest.fixture
def offline(monkeypatch):
    """No network: every download fails as it does on a machine without internet."""
    def fetch(url, dest, timeout=None):
        raise OSError("[Errno -2] Name or service not known")
    monkeypatch.setattr(multi30k, "fetch", fetch)


@pytest.fixture
def no_data_dir(monkeypatch, tmp_path):
    """Neither COURSE_DATA_DIR nor a filled cache: the cache is a fresh folder under tmp_path."""
    monkeypatch.delenv("COURSE_DATA_DIR", raising=False)
    monkeypatch.setenv("COURSE_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "multi30k"


def fake_fetch_from(folder, corrupt=None, calls=None):
    """A fetch() that 'downloads' from a local folder; corrupt(bytes) -> bytes alters the payload."""
    def fetch(url, dest, timeout=None):
        if calls is not None:
            calls.append(url)
        data = (Path(folder) / url.rsplit("/", 1)[-1]).read_bytes()
        dest.write(corrupt(data) if corrupt else data)
    return fetch


@pytest.fixture
def small_files(tmp_path, monkeypatch):
    """Six tiny valid files (and their hashes in place of the real ones): the loader's logic without the data."""
    folder = tmp_path / "small"
    folder.mkdir()
    for name in ALL_FILES:
        (folder / name).write_bytes(gzip.compress(f"{name} one\n{name} two\n".encode(), mtime=0))
    monkeypatch.setattr(multi30k, "SHA256", {n: multi30k.sha256(folder / n) for n in ALL_FILES})
    return folder


def test_url_is_pinned_to_the_commit_of_the_hashes():
    assert multi30k.URL.format(name="val.de.gz") == \
        f"https://github.com/multi30k/dataset/raw/{multi30k.COMMIT}/data/task1/raw/val.de.gz"
    assert "master" not in multi30k.URL and len(multi30k.COMMIT) >= 7
    assert sorted(multi30k.SHA256) == sorted(ALL_FILES)


@pytest.mark.multi30k
def test_every_file_has_its_pinned_hash(real):
    for name in ALL_FILES:
        assert multi30k.sha256(real / name) == multi30k.SHA256[name], name
    if (real / "SHA256SUMS").exists():      # the shared copy lists them too
        listed = dict(reversed(line.split()) for line in (real / "SHA256SUMS").read_text().splitlines() if line)
        assert listed == multi30k.SHA256


@pytest.mark.multi30k
def test_loads_every_split(real):
    for split, n in multi30k.NUM_PAIRS.items():
        pairs = load_multi30k(split)
        assert len(pairs) == n
        assert all(de and en for de, en in pairs[:100])
    train = load_multi30k("train")
    assert train[0] == ("Zwei junge weiße Männer sind im Freien in der Nähe vieler Büsche.",
                        "Two young, White males are outside near many bushes.")
    english = [en for _, en in train]
    assert not any("&amp;" in s or "&quot;" in s or "&#" in s for s in english)   # unescaped
    assert any(" & " in s for s in english)
    assert len(load_multi30k("val", max_pairs=7)) == 7


@pytest.mark.multi30k
def test_downloads_into_cache_when_no_data_dir(real, no_data_dir, monkeypatch):
    urls = []
    monkeypatch.setattr(multi30k, "fetch", fake_fetch_from(real, calls=urls))
    pairs = load_multi30k("val")
    assert len(pairs) == 1014
    assert urls == [multi30k.URL.format(name=f"val.{lang}.gz") for lang in ("de", "en")]
    assert sorted(p.name for p in no_data_dir.iterdir()) == ["val.de.gz", "val.en.gz"]
    load_multi30k("val")                                   # second time: from the cache
    assert len(urls) == 2


@pytest.mark.multi30k
def test_download_from_file_url(real, tmp_path):
    url = (real / "val.en.gz").as_uri()                    # file:// goes through urllib like https://
    path = multi30k.download("val.en.gz", tmp_path, url=url)
    assert multi30k.sha256(path) == multi30k.SHA256["val.en.gz"]
    assert [p.name for p in tmp_path.iterdir()] == ["val.en.gz"]     # no temporary file left


@pytest.mark.parametrize("corrupt", [lambda b: b[: len(b) // 2], lambda b: b[:10] + b"x" + b[11:]],
                         ids=["truncated", "flipped-byte"])
def test_bad_download_leaves_nothing(small_files, tmp_path, monkeypatch, corrupt):
    monkeypatch.setattr(multi30k, "fetch", fake_fetch_from(small_files, corrupt))
    with pytest.raises(Multi30kError, match="SHA-256"):
        multi30k.ensure_file("val", "de", tmp_path / "new")
    assert not (tmp_path / "new").exists(), "the folder the download created is removed again"


def test_failed_download_says_what_to_do_and_leaves_nothing(no_data_dir, tmp_path, monkeypatch):
    def cut_off(url, dest, timeout=None):
        dest.write(b"partial")
        raise OSError("Network is unreachable")
    monkeypatch.setattr(multi30k, "fetch", cut_off)
    with pytest.raises(Multi30kError, match="could not download.*internet.*COURSE_DATA_DIR"):
        load_multi30k("train")
    assert list(tmp_path.iterdir()) == [], "neither a partial file nor an empty cache folder is left"
    (tmp_path / "cache").mkdir()                           # a cache folder that was there stays
    with pytest.raises(Multi30kError):
        load_multi30k("train")
    assert [p.name for p in tmp_path.iterdir()] == ["cache"] and not list((tmp_path / "cache").iterdir())


def test_missing_file_without_download(tmp_path):
    with pytest.raises(Multi30kError, match="missing.*copy"):
        multi30k.ensure_file("test_2016_flickr", "en", tmp_path, allow_download=False)


def test_corrupted_file_in_the_cache_is_downloaded_again(small_files, no_data_dir, monkeypatch, capsys):
    no_data_dir.mkdir(parents=True)
    good = (small_files / "val.en.gz").read_bytes()
    (no_data_dir / "val.de.gz").write_bytes((small_files / "val.de.gz").read_bytes())
    (no_data_dir / "val.en.gz").write_bytes(good[:-10])              # truncated by an interrupted copy
    urls = []
    monkeypatch.setattr(multi30k, "fetch", fake_fetch_from(small_files, calls=urls))
    assert len(load_multi30k("val")) == 2
    assert urls == [multi30k.URL.format(name="val.en.gz")]
    assert (no_data_dir / "val.en.gz").read_bytes() == good
    notice = capsys.readouterr().err.strip()
    assert notice.count("\n") == 0 and "val.en.gz is truncated or corrupted" in notice and "again" in notice
    assert sorted(p.name for p in no_data_dir.iterdir()) == ["val.de.gz", "val.en.gz"]


def test_corrupted_file_in_the_cache_offline_is_one_clear_error(small_files, no_data_dir, offline):
    no_data_dir.mkdir(parents=True)
    (no_data_dir / "val.de.gz").write_bytes(b"garbage")
    with pytest.raises(Multi30kError, match="truncated or corrupted.*downloading it again failed.*internet"):
        load_multi30k("val")
    assert [p.name for p in no_data_dir.iterdir()] == ["val.de.gz"], "nothing half-written is left"


def test_course_data_dir_is_only_read(small_files, tmp_path, monkeypatch, offline):
    own = tmp_path / "own"
    shutil.copytree(small_files, own / "multi30k")
    monkeypatch.setenv("COURSE_DATA_DIR", str(own))
    assert multi30k.data_dir() == own / "multi30k"
    assert len(load_multi30k("test_2016_flickr")) == 2                # read without the network
    (own / "multi30k" / "val.en.gz").unlink()
    with pytest.raises(Multi30kError, match=r"\(COURSE_DATA_DIR\) is missing 1 of the six .*\(val.en.gz\).*unset"):
        load_multi30k("val")
    data = (small_files / "val.de.gz").read_bytes()
    (own / "multi30k" / "val.de.gz").write_bytes(data[:-10])
    with pytest.raises(Multi30kError, match="truncated or corrupted.*Put a good copy"):
        load_multi30k("val")
    assert (own / "multi30k" / "val.de.gz").read_bytes() == data[:-10], "your own copy is never written to"


def test_mismatched_files(tmp_path, monkeypatch):
    lines = {"val.de.gz": b"a\nb\n", "val.en.gz": b"a\n"}
    for name, text in lines.items():
        (tmp_path / name).write_bytes(gzip.compress(text))
    monkeypatch.setattr(multi30k, "SHA256", {**multi30k.SHA256, **{
        n: hashlib.sha256((tmp_path / n).read_bytes()).hexdigest() for n in lines}})
    with pytest.raises(Multi30kError, match="do not belong together"):
        load_multi30k("val", folder=tmp_path)


def test_bad_arguments():
    with pytest.raises(ValueError, match="split"):
        multi30k.file_name("test", "de")
    with pytest.raises(ValueError, match="lang"):
        multi30k.file_name("val", "fr")


# ---- is the data available? (no network when it is there; one quick attempt when it is not) --------
def test_available_without_network_when_the_files_are_there(small_files, no_data_dir, offline, monkeypatch):
    shutil.copytree(small_files, no_data_dir)              # a filled cache
    assert multi30k.why_unavailable() is None
    monkeypatch.setenv("COURSE_DATA_DIR", str(small_files.parent))
    small_files.rename(small_files.parent / "multi30k")    # or your own copy
    assert multi30k.why_unavailable() is None


def test_available_after_one_download(small_files, no_data_dir, monkeypatch):
    urls = []
    monkeypatch.setattr(multi30k, "fetch", fake_fetch_from(small_files, calls=urls))
    assert multi30k.why_unavailable() is None and len(urls) == 6
    assert multi30k.why_unavailable() is None and len(urls) == 6      # cached from now on


def test_unavailable_offline_says_why_and_how_quickly(no_data_dir, tmp_path, monkeypatch):
    timeouts = []
    def offline(url, dest, timeout=None):
        timeouts.append(timeout)
        raise OSError("[Errno -2] Name or service not known")
    monkeypatch.setattr(multi30k, "fetch", offline)
    reason = multi30k.why_unavailable()
    assert timeouts == [multi30k.QUICK_TIMEOUT], "one quick attempt, not one per file"
    assert "could not download train.de.gz" in reason and "Name or service not known" in reason
    assert "internet" in reason and "COURSE_DATA_DIR" in reason and "docs/data.md" in reason and "six" in reason
    assert list(tmp_path.iterdir()) == [], "the attempt leaves no empty cache folder"
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path / "nowhere"))
    assert "(COURSE_DATA_DIR) is missing 6 of the six Multi30k files (train.de.gz, train.en.gz, val.de.gz" in \
        multi30k.why_unavailable() and timeouts == [multi30k.QUICK_TIMEOUT]


def test_a_lesson_says_it_on_one_line(monkeypatch):
    """What lessons 10, 12 and 14 print once without the data: what they do instead, then why and how."""
    monkeypatch.setattr(multi30k, "why_unavailable", lambda: "x is missing 6 of the six files\n(a, b); docs/data.md.")
    assert multi30k.unavailable_notice("this notebook trains nothing") == ("Multi30k is not available, so this "
                                                                          "notebook trains nothing. x is missing 6 of "
                                                                          "the six files (a, b); docs/data.md.")
    monkeypatch.setattr(multi30k, "why_unavailable", lambda: None)
    assert multi30k.unavailable_notice("this notebook trains nothing") is None


# ---- the rule: run when the data is there; else skip with one reason, or fail when CI is set ------------
def test_verdict():
    assert multi30k_rule.verdict(None, ci=False) == ("run", None)
    assert multi30k_rule.verdict(None, ci=True) == ("run", None)
    action, reason = multi30k_rule.verdict("could not download x. Set COURSE_DATA_DIR", ci=False)
    assert action == "skip" and reason == "needs Multi30k, which is not available: could not download x. " \
                                          "Set COURSE_DATA_DIR"
    action, reason = multi30k_rule.verdict("could not download x", ci=True)
    assert action == "fail" and "CI is set" in reason and reason.endswith("could not download x")


NEEDS_DATA = """
import pytest

@pytest.mark.multi30k
def test_one():
    pass

@pytest.mark.multi30k
def test_two():
    pass

def test_without_data():
    pass
"""


def notebook_that_loads_multi30k(folder):
    cell = {"cell_type": "code", "execution_count": None, "id": "a", "metadata": {}, "outputs": [],
            "source": "from course_utils.data.multi30k import load_multi30k\ntrain = load_multi30k('train')"}
    (folder / "lesson.ipynb").write_text(json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4,
                                                     "nbformat_minor": 5}))


def run_rule(pytester, monkeypatch, problem, *args):
    """A pytest run of a folder with two marked tests, one unmarked and a notebook that loads Multi30k,
    where why_unavailable() returns `problem`; returns (result, how often the data was looked for)."""
    pytester.makepyfile(test_lesson=NEEDS_DATA)
    notebook_that_loads_multi30k(pytester.path)
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")          # only the plugins named here: faster
    asked = []
    monkeypatch.setattr(multi30k, "why_unavailable", lambda: asked.append(1) or problem)
    result = pytester.runpytest_inprocess("-p", "tests.multi30k_rule", "-p", "nbval", "--nbval-lax", "-rs", *args)
    return result, len(asked)


def test_rule_skips_with_one_reason_offline(pytester, monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    result, asked = run_rule(pytester, monkeypatch, "could not download train.de.gz")
    result.assert_outcomes(passed=1, skipped=3)            # 2 marked tests + the notebook's cell (no kernel started)
    result.stdout.fnmatch_lines(["SKIPPED [[]3[]] *needs Multi30k, which is not available: could not download*"])
    assert asked == 1, "the data is looked for once per session"


def test_rule_fails_offline_under_ci(pytester, monkeypatch):
    monkeypatch.setenv("CI", "true")
    result, asked = run_rule(pytester, monkeypatch, "could not download train.de.gz")
    result.assert_outcomes(passed=1, errors=3)
    assert result.stdout.str().count("CI is set, so this fails instead of skipping") >= 3 and asked == 1


def test_rule_runs_when_the_data_is_there(pytester, monkeypatch):
    monkeypatch.setenv("CI", "true")
    result, _ = run_rule(pytester, monkeypatch, None, "test_lesson.py")
    result.assert_outcomes(passed=3)
    result, asked = run_rule(pytester, monkeypatch, "offline", "-m", "not multi30k")
    result.assert_outcomes(passed=1, deselected=3)         # the notebook's cell carries the marker too
    assert asked == 0, "no look for the data when no test needs it"


@pytest.mark.parametrize("value, is_ci", [(None, False), ("", False), ("false", False), ("0", False),
                                          ("true", True), ("1", True), ("yes", True)])
def test_what_counts_as_ci(value, is_ci):
    assert multi30k_rule.ci_is_set({} if value is None else {"CI": value}) == is_ci


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


def test_pad():
    out = pad([[5, 6, 7], [8]], pad_id=0)
    assert torch.equal(out, torch.tensor([[5, 6, 7], [8, 0, 0]]))
