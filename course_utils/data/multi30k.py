"""Multi30k (task 1), German -> English: the lesson-10 translation data.

    pairs = load_multi30k("train")        # [(german, english), ...], 29,000 pairs
    load_multi30k("val"), load_multi30k("test_2016_flickr")   # 1,014 and 1,000 pairs

Where the files come from:
  * COURSE_DATA_DIR set  -> read from $COURSE_DATA_DIR/multi30k/ (tests and CI: ../shared/data);
  * otherwise            -> a cache folder ($COURSE_CACHE_DIR or ~/.cache/course_utils, then
                            multi30k/), filled on first use by downloading the six raw `.gz` files
                            from the public Multi30k repository (URL below).
Every file is checked against its SHA-256 before use. A download goes to a temporary file in the
same folder and is renamed only once its hash is right, so nothing half-written is ever left behind.
A missing, truncated or corrupted file raises `Multi30kError` with what to do.

The raw English training text holds HTML entities (`&amp;`, `&quot;`); they are unescaped.
Terms of the data: non-commercial research and education; cite Elliott et al. (2016),
"Multi30K: Multilingual English-German Image Descriptions".
"""
import gzip
import hashlib
import html
import os
import tempfile
import urllib.request
from pathlib import Path

SPLITS = ("train", "val", "test_2016_flickr")
LANGS = ("de", "en")
URL = "https://github.com/multi30k/dataset/raw/master/data/task1/raw/{name}"

# SHA-256 of the raw files (shared/data/multi30k/SHA256SUMS; Multi30k master, commit a3d2e0d).
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


def data_dir():
    """The folder that holds (or will hold) the six files."""
    if os.environ.get("COURSE_DATA_DIR"):
        return Path(os.environ["COURSE_DATA_DIR"]).expanduser() / "multi30k"
    cache = os.environ.get("COURSE_CACHE_DIR") or Path.home() / ".cache" / "course_utils"
    return Path(cache).expanduser() / "multi30k"


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


def fetch(url, dest):
    """Download `url` into the open binary file `dest` (tests replace this function)."""
    with urllib.request.urlopen(url, timeout=60) as response:
        while block := response.read(1 << 16):
            dest.write(block)


def _where_to_fix(folder):
    return (f"Delete it and run again to download it afresh (needs internet), or copy the file from "
            f"{URL.format(name='')} into {folder}, or set COURSE_DATA_DIR to a folder whose multi30k/ "
            "holds the six files.")


def download(name, folder, url=None):
    """Download one file into `folder` atomically; raise Multi30kError on any failure."""
    folder = Path(folder)
    url = url or URL.format(name=name)
    target = folder / name
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = tempfile.NamedTemporaryFile(dir=folder, prefix=f".{name}.", suffix=".part", delete=False)
    except OSError as error:
        raise Multi30kError(f"cannot write into {folder} ({error}): set COURSE_CACHE_DIR (or "
                            "COURSE_DATA_DIR) to a folder you can write to.") from None
    try:
        with tmp:
            fetch(url, tmp)
        got = sha256(tmp.name)
        if got != SHA256[name]:
            raise Multi30kError(f"the download of {name} from {url} has SHA-256 {got[:12]}..., expected "
                                f"{SHA256[name][:12]}... (truncated or changed upstream). Run again; if it "
                                f"persists, copy a good {name} into {folder} by hand.")
        os.replace(tmp.name, target)
    except Multi30kError:
        raise
    except Exception as error:
        raise Multi30kError(f"could not download {name} from {url} ({type(error).__name__}: {error}). "
                            f"Check your internet connection, or copy the file into {folder}, or set "
                            "COURSE_DATA_DIR to a folder whose multi30k/ holds the six files.") from None
    finally:
        if os.path.exists(tmp.name):
            os.unlink(tmp.name)
    return target


_verified = {}  # path -> (size, mtime) of files whose hash was checked in this process


def ensure_file(split, lang, folder=None, allow_download=True):
    """Path of one verified file, downloading it first if it is missing."""
    name = file_name(split, lang)
    folder = Path(folder) if folder is not None else data_dir()
    path = folder / name
    if not path.exists():
        if not allow_download:
            raise Multi30kError(f"{path} is missing. Run with downloads allowed (needs internet), or copy "
                                f"{name} from {URL.format(name=name)} into {folder}.")
        return download(name, folder)
    stat = path.stat()
    if _verified.get(str(path)) != (stat.st_size, stat.st_mtime_ns):
        got = sha256(path)
        if got != SHA256[name]:
            raise Multi30kError(f"{path} is truncated or corrupted (SHA-256 {got[:12]}..., expected "
                                f"{SHA256[name][:12]}...). " + _where_to_fix(folder))
        _verified[str(path)] = (stat.st_size, stat.st_mtime_ns)
    return path


def read_lines(path):
    """The sentences of one gzipped file, stripped, with HTML entities unescaped."""
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [html.unescape(line.rstrip("\n").strip()) for line in f]


def load_multi30k(split, folder=None, allow_download=True, max_pairs=None):
    """(german, english) sentence pairs of `split` ('train', 'val' or 'test_2016_flickr')."""
    de = read_lines(ensure_file(split, "de", folder, allow_download))
    en = read_lines(ensure_file(split, "en", folder, allow_download))
    if len(de) != len(en):
        raise Multi30kError(f"{split}.de has {len(de)} lines but {split}.en has {len(en)}: the files do "
                            "not belong together. " + _where_to_fix(folder or data_dir()))
    pairs = list(zip(de, en))
    return pairs if max_pairs is None else pairs[:max_pairs]
