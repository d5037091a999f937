"""Writing files so that a crash, a kill or a full disk never leaves a half-written one.

    with atomic_open(path, "wb") as f:      # a temporary file beside `path` ...
        f.write(data)                       # ... renamed onto `path` only when the block succeeds
    atomic_write_text("...", path)
    atomic_save(obj, path)                  # torch.save, atomically
    describe_os_error(error)                # "cannot write runs/cpu/...: the disk is full" (one line)

The temporary file lives in the same folder (a rename within one file system is atomic) and is
removed if the block raises: `path` holds either its old content or the whole new one. A write that
fails because the disk is full or the folder is read-only raises OSError with that errno even where
the writer hides it (torch.save reports a full disk as "[enforce fail at inline_container.cc...]").
"""
import contextlib
import errno
import os
import tempfile
from pathlib import Path

_UMASK = os.umask(0o022)
os.umask(_UMASK)

_WHY = {errno.ENOSPC: "the disk is full", errno.EROFS: "the folder is on a read-only file system",
        errno.EACCES: "permission denied (a read-only folder?)", errno.EPERM: "operation not permitted",
        errno.EDQUOT: "the disk quota is exceeded", errno.EIO: "an input/output error of the disk"}


class _Recording:
    """A file object that remembers the first OSError of a write (torch.save turns it into a RuntimeError)."""

    def __init__(self, f):
        self._f, self.error = f, None

    def write(self, data):
        try:
            return self._f.write(data)
        except OSError as error:
            self.error = self.error or error
            raise

    def __getattr__(self, name):
        return getattr(self._f, name)


@contextlib.contextmanager
def atomic_open(path, mode="w", encoding=None):
    """Open a temporary file beside `path`; on success, flush it to disk and rename it onto `path`."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open writes whole files: mode must be 'w' or 'wb', got {mode!r}")
    path = Path(path)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
        os.chmod(tmp, 0o666 & ~_UMASK)        # mkstemp makes the file private (0600): give it the usual mode
        with os.fdopen(fd, mode, encoding=encoding or ("utf-8" if mode == "w" else None)) as f:
            recording = _Recording(f)
            try:
                yield recording
                f.flush()
                os.fsync(f.fileno())
            except RuntimeError as error:          # torch.save: the OSError of the write is inside
                if recording.error is not None:
                    raise recording.error from error
                raise
        os.replace(tmp, path)
    except OSError as error:
        if error.filename is None or Path(error.filename).name.startswith(f".{path.name}."):
            raise OSError(error.errno, error.strerror, str(path)) from error     # the file meant, not the temporary
        raise
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)


def atomic_write_text(text, path):
    with atomic_open(path, "w") as f:
        f.write(text)


def atomic_save(obj, path):
    """torch.save(obj) to `path`, atomically."""
    import torch

    with atomic_open(path, "wb") as f:
        torch.save(obj, f)


def describe_os_error(error):
    """One line for an OSError of a file: which file and why (a full disk, a read-only folder, ...)."""
    why = _WHY.get(error.errno, error.strerror or str(error))
    where = error.filename or "a file"
    if error.errno not in _WHY:
        return f"{where}: {why}"
    return (f"cannot write {where}: {why} (errno {error.errno}); the files written before are kept (the last "
            "checkpoint among them): make room, or give another --out")
