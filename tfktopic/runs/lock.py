"""An exclusive lock on a run directory, held for a command's life.

`run_lock` takes an OS lock on ``DIR/.lock`` through the `filelock` package
(``flock`` on POSIX, ``msvcrt.locking`` on Windows; the PID of the holder is
written into it for the error message). The OS releases the lock when its
process exits, however it exits -- SIGKILL included -- so a lock file left by
a killed process is simply taken over; nothing has to be cleaned up::

    with run_lock("runs/lee-tcnlm"):
        ...   # a second `tfktopic train --out runs/lee-tcnlm` fails at once
"""

import contextlib
import os
import pathlib

import filelock

from tfktopic.atomic import remove_temporaries
from tfktopic.errors import TfktopicError

__all__ = ["RunLockedError", "locked", "run_lock", "LOCK_NAME"]

LOCK_NAME = ".lock"


class RunLockedError(TfktopicError):
    """Another process holds the lock of a run directory."""


def _holder(path):
    try:
        text = pathlib.Path(path).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None


@contextlib.contextmanager
def run_lock(directory, what="--out"):
    """Hold an exclusive lock on `directory` (created if missing) for the block.

    Args:
        directory: the run directory.
        what: how the directory was given (for the error message).

    Yields:
        The lock file's `pathlib.Path`.

    Raises:
        RunLockedError: another live process holds the lock (naming its PID).
        TfktopicError: the directory or the lock file cannot be created.

    Example:
    >>> with run_lock("runs/x"):                       # doctest: +SKIP
    ...     train()
    """
    directory = pathlib.Path(directory)
    created = not directory.exists()
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise TfktopicError(f"{directory}: cannot create the run directory ({what}): "
                            f"{error.strerror or error}") from None
    path = directory / LOCK_NAME
    while True:
        lock = filelock.FileLock(str(path), timeout=0, thread_local=False)
        try:
            lock.acquire()
        except filelock.Timeout:
            pid = _holder(path)
            holder = f"process {pid}" if pid else "another process"
            raise RunLockedError(f"{directory}: in use by {holder} (lock {path}); wait for it "
                                 f"to finish or use another {what}") from None
        except OSError as error:
            raise TfktopicError(f"{path}: cannot lock {directory} ({what}): "
                                f"{error.strerror or error}") from None
        # The previous holder may have removed the file between our open and lock:
        # then we hold a lock on a dead inode and must start again.
        if _locks_the_file_at(lock, path):
            break
        lock.release()
    try:
        _write_pid(path)
        remove_temporaries(directory)  # left by a killed writer; we are the only one now
        yield path
    finally:
        try:
            if created and sorted(p.name for p in directory.iterdir()) == [LOCK_NAME]:
                # A command that failed before writing anything leaves no empty directory
                # (POSIX: unlinked while held; Windows refuses, and the folder stays).
                _unlink(path)
        finally:
            lock.release()
        if created:
            try:
                directory.rmdir()
            except OSError:
                pass


def _locks_the_file_at(lock, path):
    """Whether the descriptor `lock` holds is the file now at `path` (not an unlinked one).

    `filelock` does not publish its descriptor; where its private field moved, the
    check is skipped (the race needs the holder to unlink ``.lock`` at that moment).
    """
    fd = getattr(getattr(lock, "_context", None), "lock_file_fd", None)
    if not isinstance(fd, int):
        return path.exists()
    try:
        return os.fstat(fd).st_ino == os.stat(path).st_ino
    except FileNotFoundError:
        return False


def _write_pid(path):
    """Write this process's PID into the held lock file (for a contender's message)."""
    try:
        with open(path, "r+", encoding="ascii") as handle:
            handle.truncate(0)
            handle.write(str(os.getpid()))
    except OSError:
        pass  # the message then says "another process"


def _unlink(path):
    try:
        os.unlink(path)
    except OSError:
        pass


def locked(argument="out", what="--out"):
    """Decorator: hold `run_lock` on the function's `argument` for the call.

    Args:
        argument: name of the parameter that holds the run directory.
        what: how that directory is named on the command line.

    Example:
    >>> @locked("out")
    ... def train_run(model_name, out, ...): ...      # doctest: +SKIP
    """
    import functools
    import inspect

    def decorate(function):
        signature = inspect.signature(function)

        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            directory = signature.bind(*args, **kwargs).arguments[argument]
            with run_lock(directory, what):
                return function(*args, **kwargs)

        return wrapper

    return decorate
