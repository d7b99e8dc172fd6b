"""Run a function under another Keras backend and bring its numpy results back.

The backend is fixed when Keras is first imported, so the equivalence tests run
the reference side in a fresh subprocess (``KERAS_BACKEND=<backend>``) and the
other side in the test's own process. The function is named by
``"module:function"`` and called with numpy / plain-Python keyword arguments; it
must return a dict of numpy arrays (or nested lists / numbers).

Example (in a test)::

    theirs = run_in_backend("jax", "tests.backend_cases:weibull_kl", k=k, lam=lam)
    ours = backend_cases.weibull_kl(k=k, lam=lam)
    np.testing.assert_allclose(ours["kl"], theirs["kl"], rtol=1e-6)

Several cases share one subprocess with `run_many_in_backend` (an interpreter start with
Keras and a backend costs about 5 s).
"""

import os
import pathlib
import pickle
import subprocess
import sys
import tempfile

import pytest

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent

_RUNNER = """
import importlib, os, pickle, sys
with open(sys.argv[1], "rb") as f:
    target, kwargs = pickle.load(f)
module, function = target.split(":")
result = getattr(importlib.import_module(module), function)(**kwargs)
import numpy as np
def to_numpy(value):
    if isinstance(value, dict):
        return {k: to_numpy(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(to_numpy(v) for v in value)
    try:
        return np.asarray(value)
    except Exception:
        return value
with open(sys.argv[2], "wb") as f:
    pickle.dump(to_numpy(result), f)
"""


def backend_available(backend):
    """True if `backend`'s framework is importable in this environment."""
    module = {"tensorflow": "tensorflow", "jax": "jax", "torch": "torch"}[backend]
    try:
        __import__(module)
    except ImportError:
        return False
    return True


def run_in_backend(backend, target, timeout=600, env=None, **kwargs):
    """Call ``target`` (``"module:function"``) with `kwargs` under Keras `backend`.

    Skips the calling test when the backend's framework is not installed.

    Returns:
        The function's result with tensors converted to numpy arrays.
    """
    if not backend_available(backend):
        pytest.skip(f"the {backend} backend is not installed here")
    with tempfile.TemporaryDirectory() as tmp:
        args, out = pathlib.Path(tmp, "args.pkl"), pathlib.Path(tmp, "out.pkl")
        args.write_bytes(pickle.dumps((target, kwargs)))
        environment = {**os.environ, **(env or {}), "KERAS_BACKEND": backend,
                       "PYTHONPATH": os.pathsep.join(
                           [str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
        done = subprocess.run([sys.executable, "-c", _RUNNER, str(args), str(out)],
                              env=environment, capture_output=True, text=True,
                              timeout=timeout, cwd=REPO_ROOT)
        if done.returncode != 0:
            raise AssertionError(f"{target} under {backend} failed:\n{done.stderr[-4000:]}")
        return pickle.loads(out.read_bytes())


def in_the_jax_job():
    """A marker for test modules that run their own ``KERAS_BACKEND=jax`` subprocesses:
    the same run whatever this process's backend, so only the JAX CI job runs them
    (README's test command: the suite, then ``-m backends`` under JAX)."""
    import os

    import pytest

    return pytest.mark.skipif(os.environ.get("KERAS_BACKEND", "tensorflow") != "jax",
                              reason="runs its own JAX subprocesses: the JAX job runs it")


def call_many(calls):
    """Call each ``name -> (target, kwargs)`` of `calls` in this process, in order.

    Returns:
        dict: name -> that call's result.
    """
    import importlib

    results = {}
    for name, (target, kwargs) in calls.items():
        module, function = target.split(":")
        results[name] = getattr(importlib.import_module(module), function)(**kwargs)
    return results


def run_many_in_backend(backend, calls, timeout=600):
    """`run_in_backend` for several calls in one subprocess (one interpreter start).

    Args:
        backend: the Keras backend of the subprocess.
        calls: name -> ``("module:function", kwargs)``.
        timeout: seconds for all of them.

    Returns:
        dict: name -> that call's result, tensors converted to numpy arrays.
    """
    return run_in_backend(backend, "tests.backends:call_many", timeout=timeout, calls=calls)
