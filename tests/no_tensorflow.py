"""Simulate an environment without TensorFlow (issue 49's TF-free install).

`block()` installs a `sys.meta_path` finder, ahead of every other, that makes
``import tensorflow`` (and ``tensorflow_probability``, ``tf_keras`` and their
submodules) raise ImportError, as they would where the wheels are absent. Call it
before the first ``import keras`` of a process that runs ``KERAS_BACKEND=jax``.

Example (a fresh process)::

    python -c "import tests.no_tensorflow as n; n.block(); import tfktopic"
"""

import importlib.abc
import sys

#: The top-level packages a TensorFlow-free install does not have.
BLOCKED = ("tensorflow", "tensorflow_probability", "tf_keras")


class _Blocker(importlib.abc.MetaPathFinder):
    """Refuses every module under `BLOCKED` (ImportError, as if not installed)."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".")[0] in BLOCKED:
            raise ImportError(f"No module named {fullname!r} (blocked: simulated "
                              f"environment without TensorFlow)", name=fullname)
        return None


def block():
    """Make TensorFlow unimportable in this process; refuse if it is already imported."""
    loaded = sorted(name for name in sys.modules if name.split(".")[0] in BLOCKED)
    if loaded:
        raise RuntimeError(f"too late to block TensorFlow: already imported {loaded[:3]}")
    if not any(isinstance(finder, _Blocker) for finder in sys.meta_path):
        sys.meta_path.insert(0, _Blocker())


def call(function, **kwargs):
    """Block TensorFlow, then call ``function`` (``"module:function"``) with `kwargs`.

    For `tests.backends.run_in_backend("jax", "tests.no_tensorflow:call", function=...)`:
    the blocker is in place before `function`'s module (and Keras) is imported.
    """
    import importlib
    block()
    module, name = function.split(":")
    return getattr(importlib.import_module(module), name)(**kwargs)


def main():
    """``python -m tests.no_tensorflow MODULE [ARGS...]``: run MODULE's ``__main__``
    (e.g. ``tfktopic``) with TensorFlow blocked."""
    import runpy
    block()
    module, sys.argv = sys.argv[1], sys.argv[1:]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
