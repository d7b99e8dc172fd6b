"""How tfktopic starts TensorFlow: CPU memory reused, and a quiet ``tfktopic`` command.

CPU memory (`reuse_cpu_memory`, for library and command alike): TensorFlow's default CPU
allocator hands each large tensor back to the system when it is freed, so the next step
asks for fresh pages and the kernel faults and zeroes each of them again. A training
step of the small models frees and re-asks for tens of megabytes (the softmax's
logits and their gradient), and on the 2-core VMs here the page faults took 30-50 % of
the CPU; TensorFlow's BFC allocator on the CPU (``TF_CPU_ALLOCATOR_USE_BFC``) keeps and
reuses the memory at the same peak RSS and trains about twice as fast there
(``python -m benchmarks.cpu_allocator``; docs/install.md).

The quiet command: TensorFlow's native code writes start-up lines to file descriptor 2 while it
is imported and when it first looks for a GPU (``WARNING: All log messages
before absl::InitializeLog() ...``, ``I0000 ... Could not find cuda drivers``,
the ``cuInit`` error), some of them regardless of ``TF_CPP_MIN_LOG_LEVEL``.
`tfktopic/__init__.py` calls `quiet_command_line` before it imports
TensorFlow; it does something only when this process *is* the ``tfktopic``
command (the console script or ``python -m tfktopic``) without ``--verbose``
first: then ``TF_CPP_MIN_LOG_LEVEL=3``, descriptor 2 points to /dev/null, and
Python's ``sys.stderr`` (our one-line errors, tracebacks of real bugs) keeps
writing to the real stderr. Library users' stderr is never touched.
"""

import os
import sys

__all__ = ["is_command_line", "quiet_command_line", "reuse_cpu_memory",
           "silence_native_stderr"]

#: TensorFlow's switch to its BFC allocator on the CPU (``"false"`` keeps the default one).
CPU_ALLOCATOR_VARIABLE = "TF_CPU_ALLOCATOR_USE_BFC"


def reuse_cpu_memory():
    """Let TensorFlow's CPU allocator keep and reuse freed memory (module docstring).

    Sets ``TF_CPU_ALLOCATOR_USE_BFC=true`` unless it is already set: a user who sets it
    to ``false`` keeps TensorFlow's default allocator. TensorFlow reads it when it makes
    its first CPU tensor, so this works when tfktopic is imported before any tensor is.

    Returns:
        The variable's value in force.
    """
    return os.environ.setdefault(CPU_ALLOCATOR_VARIABLE, "true")


def is_command_line():
    """Whether this process runs the ``tfktopic`` command."""
    script = os.path.basename(sys.argv[0]) if sys.argv else ""
    orig = list(getattr(sys, "orig_argv", []))
    module = len(orig) >= 3 and orig[1] == "-m" and orig[2] in ("tfktopic", "tfktopic.cli")
    return script == "tfktopic" or module


def silence_native_stderr():
    """Point file descriptor 2 at /dev/null (native code's stderr).

    Returns:
        A new descriptor of the real stderr: the caller writes its own lines
        there and ``os.dup2``s it back to 2 to undo.

    Raises:
        OSError: the descriptors cannot be duplicated.
    """
    sys.stderr.flush()
    real = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    os.close(devnull)
    return real


def quiet_command_line():
    """Silence native stderr for the ``tfktopic`` command (see the module docstring).

    Returns:
        True when stderr was redirected.
    """
    if not is_command_line() or sys.argv[1:2] == ["--verbose"]:
        return False
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    try:
        real = silence_native_stderr()
        sys.stderr = os.fdopen(real, "w", buffering=1, encoding=sys.stderr.encoding,
                               errors="backslashreplace")
    except (OSError, AttributeError, ValueError):
        return False
    return True
