"""The one switch of the package's XLA fast paths (`xla_loops`).

Several fast paths compile a small program with XLA: the time loops of `HoistedLSTM` and
`factorized_recurrence`, the fused per-variable update of `SGLD` / `PSGLD`, and TLASGR's
simplex update. Each compiles once per new shape (about 0.3-1 s); that pays for a training
run, not for hundreds of tiny models. The environment variable ``TFKTOPIC_XLA_LOOPS=0``
runs all of them without XLA, with the same results up to float rounding (the test suite
sets it, except where it tests the XLA paths).

Example:
>>> xla_loops(), xla_loops(jit_compile=False)     # doctest: +SKIP
(True, False)
"""
import os

__all__ = ["XLA_LOOPS_VARIABLE", "xla_loops"]

#: The environment variable that turns the XLA compilation of the fast paths off.
XLA_LOOPS_VARIABLE = "TFKTOPIC_XLA_LOOPS"


def xla_loops(jit_compile=True):
    """Whether the fast paths are compiled by XLA: `jit_compile`, unless the environment
    variable ``TFKTOPIC_XLA_LOOPS`` is ``0``.

    Without XLA the time loops run as `tf.scan`s with the same hand-written gradients, and
    the optimizers' updates as plain TensorFlow graphs. Read when a function is traced.

    Args:
        jit_compile: the caller's setting.

    Returns:
        bool.
    """
    return bool(jit_compile) and os.environ.get(XLA_LOOPS_VARIABLE, "1") != "0"
