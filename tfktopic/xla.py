"""The one switch of the package's XLA fast paths (`xla_loops`).

Several fast paths compile a small program with XLA: the time loops of `HoistedLSTM` and
`factorized_recurrence`, the softmax cross-entropy of the training objectives
(`tfktopic.evaluation.cross_entropy`), the fused per-variable update of `SGLD` / `PSGLD`,
and TLASGR's simplex update. Each compiles once per new shape (about 0.3-1 s); that pays for a training
run, not for hundreds of tiny models. The environment variable ``TFKTOPIC_XLA_LOOPS=0``
runs all of them without XLA, with the same results up to float rounding (the test suite
sets it, except where it tests the XLA paths).

The time loops are compiled only in float32 (and float64; the cross-entropy reads any
logits in float32 and stays compiled): under a mixed-precision policy
their products are bfloat16 or float16, and XLA's CPU backend runs those without oneDNN's
AMX kernels. Measured on an AMX CPU (a 256-unit LSTM over 64 x 30 steps, forward and
hand-written backward, `benchmarks.kernels`, `benchmarks/results/medium/kernels_amx.json`):
XLA loops 36.9 ms in float32 and 62.9 ms in bfloat16; plain TensorFlow loops 39.5 ms in
float32 and 25.9 ms in bfloat16.

Example:
>>> xla_loops(), xla_loops(jit_compile=False)     # doctest: +SKIP
(True, False)
>>> xla_loops(dtype="bfloat16")                    # doctest: +SKIP
False
"""
import os

__all__ = ["HALF_PRECISION", "XLA_LOOPS_VARIABLE", "xla_loops"]

#: The environment variable that turns the XLA compilation of the fast paths off.
XLA_LOOPS_VARIABLE = "TFKTOPIC_XLA_LOOPS"


#: Compute dtypes whose fast paths run without XLA (see the module docstring).
HALF_PRECISION = ("bfloat16", "float16")


def xla_loops(jit_compile=True, dtype=None):
    """Whether the fast paths are compiled by XLA: `jit_compile`, unless the environment
    variable ``TFKTOPIC_XLA_LOOPS`` is ``0`` or `dtype` is a half-precision float.

    Without XLA the time loops run as `tf.scan`s with the same hand-written gradients, and
    the optimizers' updates as plain TensorFlow graphs. Read when a function is traced.

    Args:
        jit_compile: the caller's setting.
        dtype: the compute dtype of the loop (a `tf.DType` or its name), or None.

    Returns:
        bool.
    """
    if dtype is not None and getattr(dtype, "name", str(dtype)) in HALF_PRECISION:
        return False
    return bool(jit_compile) and os.environ.get(XLA_LOOPS_VARIABLE, "1") != "0"
