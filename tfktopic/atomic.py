"""Atomic writes: a file of a run directory is either its old or its new version.

Every writer puts the new content in a temporary file in the same directory,
flushes and fsyncs it, renames it over the target (`os.replace`, atomic on
POSIX) and fsyncs the directory, so a kill or a full disk at any moment
leaves the previous good version in place and no truncated or empty file::

    with atomic_path("runs/x/model.keras") as tmp:
        model.save(tmp)               # tmp: runs/x/.model.keras.<pid>.tmp.keras
    write_json("runs/x/run.json", {"model": "tcnlm"})
"""

import contextlib
import json
import os
import pathlib

from tfktopic.errors import TfktopicError

__all__ = ["atomic_directory", "atomic_path", "fsync_directory", "remove_temporaries",
           "write_bytes", "write_json", "write_text"]


_TMP = ".tmp"


def remove_temporaries(directory, recursive=True):
    """Delete the temporary files a killed writer left in `directory` (and below).

    Only call it while holding the directory's lock (no writer is active).

    Args:
        directory: a directory written with `atomic_path`.
        recursive: also clean its subdirectories.

    Returns:
        The removed paths.
    """
    directory = pathlib.Path(directory)
    if not directory.is_dir():
        return []
    pattern = f".*.*{_TMP}*"
    found = directory.rglob(pattern) if recursive else directory.glob(pattern)
    removed = [path for path in found if path.is_file()]
    for path in removed:
        _remove(path)
    return removed


def fsync_directory(directory):
    """fsync a directory, so that a rename inside it survives a crash (no-op where unsupported).

    Args:
        directory: the directory path.
    """
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _fsync_file(path):
    with open(path, "rb+") as handle:
        handle.flush()
        os.fsync(handle.fileno())


def _write_error(path, error):
    reason = error.strerror or str(error) or type(error).__name__
    return TfktopicError(f"{path}: cannot write ({reason}); the previous version, if any, is "
                         "kept")


@contextlib.contextmanager
def atomic_path(path):
    """A temporary path next to `path` that replaces `path` when the block succeeds.

    The temporary name keeps the suffix of `path` (Keras needs ``.keras`` /
    ``.weights.h5``). On success the file is fsynced, renamed over `path` and
    the directory fsynced; on any error the temporary file is removed and
    `path` is untouched.

    Args:
        path: the target file.

    Yields:
        The temporary `pathlib.Path` to write.

    Raises:
        TfktopicError: an `OSError` while writing (full disk, read-only
            directory, ...), naming `path`.
    """
    path = pathlib.Path(path)
    suffix = "".join(path.suffixes[-2:]) if path.name.endswith(".weights.h5") else path.suffix
    tmp = path.with_name(f".{path.name}.{os.getpid()}{_TMP}{suffix}")
    try:
        yield tmp
        _fsync_file(tmp)
        os.replace(tmp, path)
    except OSError as error:
        _remove(tmp)
        raise _write_error(path, error) from None
    except TfktopicError as error:
        _remove(tmp)
        if isinstance(error.__context__, OSError):   # a nested atomic write (a .keras
            raise _write_error(path, error.__context__) from None   # file's assets) failed
        raise
    except BaseException:
        _remove(tmp)
        raise
    fsync_directory(path.parent)


@contextlib.contextmanager
def atomic_directory(path):
    """A temporary sibling directory that becomes `path` when the block succeeds.

    For writers of whole directories (a SavedModel): the block writes into
    ``.NAME.<pid>.tmp.d`` next to `path`; on success an existing `path` (an empty
    folder or an earlier version) is renamed aside, the new directory renamed to
    `path` and the old one deleted; on any error the temporary directory is
    deleted and `path` is untouched -- a full disk leaves no partial directory.

    Args:
        path: the target directory.

    Yields:
        The temporary `pathlib.Path` (not yet created) to write.

    Raises:
        TfktopicError: an `OSError` while writing or renaming, naming `path`.
    """
    import shutil

    path = pathlib.Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}{_TMP}.d")
    old = path.with_name(f".{path.name}.{os.getpid()}{_TMP}.old")
    for leftover in (tmp, old):
        shutil.rmtree(leftover, ignore_errors=True)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        yield tmp
        if path.exists():
            os.replace(path, old)
        try:
            os.replace(tmp, path)
        except OSError:
            if old.exists():
                os.replace(old, path)
            raise
    except OSError as error:
        shutil.rmtree(tmp, ignore_errors=True)
        raise _write_error(path, error) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    shutil.rmtree(old, ignore_errors=True)
    fsync_directory(path.parent)


def _remove(path):
    try:
        os.unlink(path)
    except OSError:
        pass


def write_bytes(path, data):
    """Write `data` (bytes) to `path` atomically (see `atomic_path`)."""
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as handle:
            handle.write(data)


def write_text(path, text):
    """Write `text` (UTF-8) to `path` atomically (see `atomic_path`)."""
    write_bytes(path, text.encode("utf-8"))


def write_json(path, payload):
    """Write `payload` as indented JSON to `path` atomically (see `atomic_path`)."""
    write_text(path, json.dumps(payload, indent=1, ensure_ascii=False))
