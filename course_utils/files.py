"""Writing files so that a crash, a kill or a full disk never leaves a half-written one.

    with atomic_open(path, "wb") as f:      # a temporary file beside `path` ...
        f.write(data)                       # ... renamed onto `path` only when the block succeeds
    atomic_write_text("...", path)
    atomic_save(obj, path)                  # torch.save, atomically

The temporary file lives in the same folder (a rename within one file system is atomic) and is
removed if the block raises: `path` holds either its old content or the whole new one.
"""
import contextlib
import os
import tempfile
from pathlib import Path

_UMASK = os.umask(0o022)
os.umask(_UMASK)


@contextlib.contextmanager
def atomic_open(path, mode="w", encoding=None):
    """Open a temporary file beside `path`; on success, flush it to disk and rename it onto `path`."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open writes whole files: mode must be 'w' or 'wb', got {mode!r}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    os.chmod(tmp, 0o666 & ~_UMASK)        # mkstemp makes the file private (0600): give it the usual mode
    try:
        with os.fdopen(fd, mode, encoding=encoding or ("utf-8" if mode == "w" else None)) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def atomic_write_text(text, path):
    with atomic_open(path, "w") as f:
        f.write(text)


def atomic_save(obj, path):
    """torch.save(obj) to `path`, atomically."""
    import torch

    with atomic_open(path, "wb") as f:
        torch.save(obj, f)
