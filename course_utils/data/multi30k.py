"""Multi30k (task 1), German -> English: the lesson-10 translation data.

    pairs = load_multi30k("train")        # [(german, english), ...], 29,000 pairs
    load_multi30k("val"), load_multi30k("test_2016_flickr")   # 1,014 and 1,000 pairs
    why_unavailable()                     # None when the six files are there (or now downloaded), else why not
    unavailable_notice("this notebook trains nothing ...")   # None, or the ONE line a lesson prints without them

Where the files come from:
  * COURSE_DATA_DIR set  -> read from $COURSE_DATA_DIR/multi30k/, your own copy: never written to;
  * otherwise            -> a cache folder ($COURSE_CACHE_DIR or ~/.cache/course_utils, then
                            multi30k/), filled on first use by downloading the six raw `.gz` files
                            from the public Multi30k repository, pinned to one commit (URL below).
Every file is checked against its SHA-256 before use. A download is written through `atomic_open`
and renamed onto its name only once its hash is right, so nothing half-written is ever left behind,
and a failed download removes the folders it created. A truncated or corrupted file in the cache is
reported on one line and downloaded again; anywhere else it raises `Multi30kError` with what to do.

The raw English training text holds HTML entities (`&amp;`, `&quot;`); they are unescaped.
Terms of the data: non-commercial research and education; cite Elliott et al. (2016),
"Multi30K: Multilingual English-German Image Descriptions".
"""
import gzip
import hashlib
import html
import os
import sys
import urllib.request
from pathlib import Path

from ..files import atomic_open

SPLITS = ("train", "val", "test_2016_flickr")
LANGS = ("de", "en")
# The files of the commit whose hashes are below (github.com/multi30k/dataset, data/task1/raw/): pinned,
# so that a change upstream cannot break every download with a hash error.
COMMIT = "a3d2e0d"
URL = f"https://github.com/multi30k/dataset/raw/{COMMIT}/data/task1/raw/{{name}}"
TIMEOUT = 60        # seconds without an answer before a download gives up
QUICK_TIMEOUT = 10  # ... when only finding out whether the data can be had (why_unavailable)

SHA256 = {
    "train.de.gz": "726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6",
    "train.en.gz": "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f",
    "val.de.gz": "f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a",
    "val.en.gz": "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28",
    "test_2016_flickr.de.gz": "9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8",
    "test_2016_flickr.en.gz": "611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9",
}
NUM_PAIRS = {"train": 29000, "val": 1014, "test_2016_flickr": 1000}


class Multi30kError(RuntimeError):
    """A Multi30k file is missing, cannot be downloaded, or has the wrong content."""


HOW_TO = "see docs/data.md in the course's repository"


def _missing_in(folder):
    """'train.de.gz, ...': the files of the six that `folder` does not hold, named in one phrase."""
    missing = [name for name in SHA256 if not (Path(folder) / name).exists()]
    return f"{len(missing)} of the six Multi30k files ({', '.join(missing)})"


def own_copy():
    """The folder COURSE_DATA_DIR points to (read only), or None when the cache is used."""
    value = os.environ.get("COURSE_DATA_DIR")
    return Path(value).expanduser() / "multi30k" if value else None


def data_dir():
    """The folder that holds (or will hold) the six files."""
    cache = os.environ.get("COURSE_CACHE_DIR") or Path.home() / ".cache" / "course_utils"
    return own_copy() or Path(cache).expanduser() / "multi30k"


def file_name(split, lang):
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    if lang not in LANGS:
        raise ValueError(f"lang must be one of {LANGS}, got {lang!r}")
    return f"{split}.{lang}.gz"


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch(url, dest, timeout=TIMEOUT):
    """Download `url` into the binary file-like `dest` (tests replace this function)."""
    with urllib.request.urlopen(url, timeout=timeout) as response:
        while block := response.read(1 << 16):
            dest.write(block)


class _Hashed:
    """A binary file that hashes what is written through it."""

    def __init__(self, f):
        self.f, self.digest = f, hashlib.sha256()

    def write(self, data):
        self.digest.update(data)
        return self.f.write(data)


def _remove_empty(folders):
    """Remove the folders a failed download created (deepest first), if they are still empty."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:
            break


def download(name, folder, url=None, timeout=TIMEOUT):
    """Download one file into `folder` atomically, checked against its SHA-256; raise Multi30kError
    on any failure, leaving neither a partial file nor a folder it created."""
    folder = Path(folder)
    url = url or URL.format(name=name)
    created = [p for p in [folder, *folder.parents] if not p.exists()]  # deepest first
    try:
        with atomic_open(folder / name, "wb") as f:
            out = _Hashed(f)
            try:
                fetch(url, out, timeout=timeout)
            except Exception as error:
                raise Multi30kError(f"could not download {name} from {url} ({type(error).__name__}: {error}). "
                                    "Check your internet connection, or provide the six files without it (train, "
                                    "val and test_2016_flickr, each .de.gz and .en.gz): copy them into "
                                    f"{folder}, or set COURSE_DATA_DIR to a folder whose multi30k/ holds them; "
                                    f"{HOW_TO}.") from None
            got = out.digest.hexdigest()
            if got != SHA256[name]:
                raise Multi30kError(f"the download of {name} from {url} has SHA-256 {got[:12]}..., expected "
                                    f"{SHA256[name][:12]}... (truncated on the way?). Run again; if it persists, "
                                    f"copy a good {name} into {folder} by hand.")
    except Multi30kError:
        _remove_empty(created)
        raise
    except OSError as error:
        _remove_empty(created)
        raise Multi30kError(f"cannot write {name} into {folder} ({error}): set COURSE_CACHE_DIR (or "
                            "COURSE_DATA_DIR) to a folder you can write to.") from None
    return folder / name


_verified = {}  # path -> (size, mtime) of files whose hash was checked in this process


def _is_intact(path, name):
    """None when `path` holds the right bytes (checked once per process and version), else the problem."""
    stat = path.stat()
    if _verified.get(str(path)) == (stat.st_size, stat.st_mtime_ns):
        return None
    got = sha256(path)
    if got != SHA256[name]:
        return f"{path} is truncated or corrupted (SHA-256 {got[:12]}..., expected {SHA256[name][:12]}...)"
    _verified[str(path)] = (stat.st_size, stat.st_mtime_ns)
    return None


def ensure_file(split, lang, folder=None, allow_download=True, timeout=TIMEOUT):
    """Path of one verified file. A missing one is downloaded (when allowed); so is a corrupted one,
    after a one-line notice. Files in COURSE_DATA_DIR, your own copy, are only read."""
    name = file_name(split, lang)
    if folder is None and own_copy() is not None:
        folder, allow_download = own_copy(), False
        fix = (f"Put a good copy of {name} there (from {URL.format(name=name)}), or unset COURSE_DATA_DIR "
               f"to download the files into the cache; {HOW_TO}.")
    else:
        folder = Path(folder) if folder is not None else data_dir()
        fix = (f"Run with downloads allowed (needs internet), or copy {name} from {URL.format(name=name)} "
               f"into {folder}; {HOW_TO}.")
    path = folder / name
    if not path.exists():
        if not allow_download:
            where = " (COURSE_DATA_DIR)" if folder == own_copy() else ""
            raise Multi30kError(f"{folder}{where} is missing {_missing_in(folder)}: copy them there, or "
                                + ("unset COURSE_DATA_DIR to download them into the cache" if where else
                                   "run with downloads allowed (needs internet)") + f"; {HOW_TO}.")
        return download(name, folder, timeout=timeout)
    problem = _is_intact(path, name)
    if problem is None:
        return path
    if not allow_download:
        raise Multi30kError(f"{problem}. {fix}")
    print(f"Multi30k: {problem}; downloading it again.", file=sys.stderr)
    try:
        return download(name, folder, timeout=timeout)
    except Multi30kError as error:
        raise Multi30kError(f"{problem}, and downloading it again failed: {error}") from None


def why_unavailable(timeout=QUICK_TIMEOUT):
    """None when the six files are there and intact (no network needed), or could be downloaded now;
    else one sentence saying why not and how to provide them. Offline, it gives up at the first file."""
    try:
        for split in SPLITS:
            for lang in LANGS:
                ensure_file(split, lang, timeout=timeout)
    except Multi30kError as error:
        return str(error)
    return None


def unavailable_notice(instead):
    """None when the six files are there (or now downloaded: why_unavailable); else the one line a lesson prints,
    once, where it would load them: "Multi30k is not available, so <instead>. <why_unavailable's sentence: what is
    missing or failed, and how to provide the files (COURSE_DATA_DIR, docs/data.md)>". Lessons 10, 12 and 14."""
    why = why_unavailable()
    return None if why is None else " ".join(f"Multi30k is not available, so {instead}. {why}".splitlines())


def read_lines(path):
    """The sentences of one gzipped file, stripped, with HTML entities unescaped."""
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [html.unescape(line.rstrip("\n").strip()) for line in f]


def load_multi30k(split, folder=None, allow_download=True, max_pairs=None):
    """(german, english) sentence pairs of `split` ('train', 'val' or 'test_2016_flickr')."""
    de = read_lines(ensure_file(split, "de", folder, allow_download))
    en = read_lines(ensure_file(split, "en", folder, allow_download))
    if len(de) != len(en):
        raise Multi30kError(f"{split}.de has {len(de)} lines but {split}.en has {len(en)}: the files do not "
                            f"belong together (delete both from {folder or data_dir()} and run again).")
    pairs = list(zip(de, en))
    return pairs if max_pairs is None else pairs[:max_pairs]
