"""Counter-based random numbers: draws that are pure functions of (seed, counter).

The package's samplers need random numbers that do not depend on *where* or
*how often* a step runs: an SG-MCMC run resumed from a checkpoint must draw the
noise of an uninterrupted run, every replica of a distributed run must draw the
same Langevin noise (mirrored weights stay identical), and the TLASGR-MCMC
augmentation must give the same latent counts whatever the split of the global
batch across replicas. Every draw is therefore a hash of a key and a counter,
not the state of a generator. This module is the one place where such draws are
made, in `keras.ops` only: the same bits on every Keras backend (TensorFlow,
JAX), in 32-bit unsigned arithmetic (no 64-bit integers, so JAX runs it without
``jax_enable_x64``).

The generator is **Threefry-2x32 with 20 rounds** (Salmon, Moraes, Dror & Shaw,
"Parallel random numbers: as easy as 1, 2, 3", SC 2011; the Random123
``threefry2x32_20``, also JAX's ``jax.random`` default): a 64-bit key
(k0, k1) and a 64-bit counter (c0, c1) give two 32-bit words by 20 rounds of
add / rotate / xor with the key injected every 4 rounds. It needs no integer
multiplication (Philox-2x32 would need 32x32 -> 64-bit products).
`tests/library/test_tlasgr.py` checks it against Random123's known-answer vectors.

* `random_key(seed, step, stream)`: the key (a uint32 [2] tensor) of one use,
  itself a Threefry hash of (seed) at counter (step, stream).
* `counter_uniform(key, counters)`: one U(0, 1) draw per counter (the TLASGR
  augmentation samplers, `tfktopic.bayes.augmentation`); a counter is one
  uint32-valued tensor or a pair of them (two words).
* `stateless_standard_normal(shape, seed, stream, step=...)`: Box-Muller
  normals (the Langevin noise of `tfktopic.bayes.sgmcmc` and of the TLASGR
  simplex update, `tfktopic.bayes.tlasgr`).

On TensorFlow the Threefry rounds of the noise run as one XLA-compiled kernel
(`counter_words`, the backend hook; measured 3x faster than as ~100 separate TF ops).
The integer bits are identical on every backend and with or without XLA;
floating-point results (the uniforms' (k + 1/2) 2^-w are exact, the normals
go through log / cos / sin) may differ in the last ulp.

Example:
>>> from keras import ops
>>> key = random_key(seed=0, step=3, stream=1)
>>> u = counter_uniform(key, ops.arange(5))                   # 5 draws in (0, 1)
>>> bool(ops.all(u == counter_uniform(key, ops.arange(5))))
True
>>> tuple(stateless_standard_normal((2, 3), seed=0, stream=7).shape)
(2, 3)
"""

import math
import numbers

import numpy as np
from keras import ops

__all__ = ["NOISE_BITS", "random_key", "counter_uniform", "counter_words",
           "stateless_standard_normal", "threefry2x32"]

#: Threefry-2x32 rotation constants (Salmon et al. 2011, Table 4; Random123 R_32x2).
_ROTATIONS = (13, 15, 26, 6, 17, 29, 16, 24)
#: Threefish's key-schedule parity constant for 32-bit words.
_PARITY = 0x1BD11BDA
_ROUNDS = 20
_MASK32 = 0xFFFFFFFF


def _u32(value):
    """`value` as uint32 (Python ints and integer tensors taken modulo 2^32)."""
    if isinstance(value, numbers.Integral):
        return ops.convert_to_tensor(np.uint32(int(value) & _MASK32))
    value = ops.convert_to_tensor(value)
    if value.dtype == "uint32":
        return value
    if "int" not in str(value.dtype):
        raise TypeError(f"counters and seeds must be integers, got dtype {value.dtype}")
    return ops.cast(value, "uint32")


def _rotl(x, r):
    return ops.bitwise_or(ops.left_shift(x, r), ops.right_shift(x, 32 - r))


def threefry2x32(key, counter):
    """Threefry-2x32-20 of `counter` under `key`, elementwise (Salmon et al. 2011).

    Args:
        key: (k0, k1) uint32-valued scalars (or a uint32 [2] tensor).
        counter: (c0, c1) uint32-valued tensors of one (broadcastable) shape.

    Returns:
        (y0, y1): uint32 tensors, the two output words.
    """
    k0, k1 = _u32(key[0]), _u32(key[1])
    ks = (k0, k1, ops.bitwise_xor(ops.bitwise_xor(k0, k1), _u32(_PARITY)))
    x0 = ops.add(_u32(counter[0]), ks[0])
    x1 = ops.add(_u32(counter[1]), ks[1])
    for r in range(_ROUNDS):
        x0 = ops.add(x0, x1)
        x1 = ops.bitwise_xor(_rotl(x1, _ROTATIONS[r % 8]), x0)
        if r % 4 == 3:   # key injection s = 1..5
            s = r // 4 + 1
            x0 = ops.add(x0, ks[s % 3])
            x1 = ops.add(ops.add(x1, ks[(s + 1) % 3]), _u32(s))
    return x0, x1


def _split_seed(seed):
    if isinstance(seed, numbers.Integral):
        return _u32(int(seed) & _MASK32), _u32((int(seed) >> 32) & _MASK32)
    return _u32(seed), _u32(0)


def random_key(seed, step=0, stream=0):
    """The key of the counter-based generator for (seed, step, stream).

    Args:
        seed: int (or integer tensor) seed; Python ints up to 64 bits are used
            whole, tensors modulo 2^32.
        step: int or integer tensor, e.g. the MCMC step counter (mod 2^32).
        stream: int or integer tensor distinguishing independent uses (mod 2^32).

    Returns:
        uint32 tensor of shape [2]: Threefry-2x32 of counter (step, stream)
        under the key (seed mod 2^32, seed div 2^32).
    """
    y0, y1 = threefry2x32(_split_seed(seed), (step, stream))
    return ops.stack([y0, y1])


def _as_key(key):
    if isinstance(key, numbers.Integral):
        return random_key(key)
    key = ops.convert_to_tensor(key)
    if tuple(key.shape) == (2,):
        return _u32(key)
    if len(key.shape) == 0:
        return random_key(key)
    raise ValueError(f"a key must be an int or a uint32 [2] tensor from random_key, got "
                     f"shape {tuple(key.shape)}")


def _uniform_from_bits(bits, shift, width):
    """(k + 1/2)·2^-width in (0, 1) from the `width` bits of uint32 `bits` that start at `shift`.

    Exact in float32 for width <= 23 (k + 1/2 has at most 24 significant bits).
    """
    field = ops.right_shift(bits, shift) if shift else bits
    if shift + width < 32:   # other bits above the field
        field = ops.bitwise_and(field, _u32(2**width - 1))
    return (ops.cast(field, "float32") + 0.5) * (2.0 ** -width)


def counter_uniform(key, counters):
    """U(0, 1) draws that are a pure function of (key, counter), elementwise.

    Threefry-2x32 of the counter (c0, c1) under `key`; the top 24 bits of the
    first output word k give (k + 1/2) 2^-24. Distinct counters give
    (statistically) independent draws.

    Args:
        key: uint32 [2] tensor from `random_key` (or an int, hashed by `random_key`).
        counters: integer tensor (the words (counters, 0)) or a pair
            (c0, c1) of broadcastable integer tensors, taken modulo 2^32.

    Returns:
        float32 tensor of the counters' shape with values (k + 1/2) 2^-24 in (0, 1).
    """
    key = _as_key(key)
    if isinstance(counters, (tuple, list)):
        c0, c1 = counters
    else:
        c0, c1 = counters, 0
    y0, _ = threefry2x32((key[0], key[1]), (c0, c1))
    return _uniform_from_bits(y0, 8, 24)


def _words(k0, k1, count):
    return threefry2x32((k0, k1), (ops.arange(count, dtype="int32"), 0))


#: Compiled `_words` of the TensorFlow backend (built on first use).
_COMPILED_WORDS = []


def counter_words(key, count, compiled=None):
    """The Threefry-2x32 words at counters (i, 0), i = 0 .. count - 1, under `key`.

    The bits of `stateless_standard_normal`. Backend hook: on TensorFlow the 20
    rounds run as one XLA-compiled kernel (unless ``TFKTOPIC_XLA_LOOPS=0``,
    `tfktopic.xla`); as plain TF ops each of their ~100 elementwise ops is a pass
    over the words (measured for 800k 16-bit normals on one CPU thread: 10.6 ms plain,
    5.0 ms with the words compiled, 50.7 ms with Box-Muller compiled too -- XLA's
    CPU log / cos / sin -- and 10.6 ms for TF's own Philox normals). JAX compiles
    the whole step anyway. The words are the same on every path.

    Args:
        key: uint32 [2] tensor from `random_key`.
        count: number of counters (a Python int).
        compiled: force (True) or forbid (False) the compiled TensorFlow kernel;
            None: `tfktopic.xla.xla_loops()` under TensorFlow.

    Returns:
        (w0, w1): uint32 [count] tensors.

    Example:
    >>> w0, w1 = counter_words(random_key(0), 4)
    >>> ops.convert_to_numpy(w0).shape, ops.convert_to_numpy(w0).dtype
    ((4,), dtype('uint32'))
    """
    from tfktopic.backend import is_tensorflow

    key = _as_key(key)
    if compiled is None:
        from tfktopic.xla import xla_loops
        compiled = is_tensorflow() and xla_loops()
    if not (compiled and is_tensorflow()):
        return _words(key[0], key[1], int(count))
    if not _COMPILED_WORDS:
        import tensorflow as tf
        _COMPILED_WORDS.append(tf.function(_words, jit_compile=True, autograph=False))
    return _COMPILED_WORDS[0](key[0], key[1], int(count))


#: Uniform resolutions of `stateless_standard_normal`: bits per uniform -> uniforms per
#: 32-bit word.
NOISE_BITS = {23: 1, 16: 2}


def stateless_standard_normal(shape, seed, stream, dtype="float32", bits=23, step=0):
    """Standard normal noise that is a pure function of (seed, step, stream).

    Draws Threefry-2x32 words at counters (i, 0), i = 0, 1, ..., under the key
    `random_key(seed, step, stream)`, turns each pair of uniforms (u1, u2) into
    two normals by Box-Muller, sqrt(-2 log u1) (cos 2 pi u2, sin 2 pi u2), and
    casts to `dtype`. The same integer bits on every backend, with or without
    XLA; only the last-ulp rounding of log / cos / sin may differ.

    Resolution (`bits`): each uniform is (k + 1/2)·2^-bits. With ``bits=23``
    every uniform takes one 32-bit word (its top 23 bits), so |xi| <= 5.77.
    With ``bits=16`` one word gives two uniforms (its two halves): half the
    hashing, and xi takes 2^32 values (a 65,536 x 65,536 grid in (u1, u2)) with
    |xi| <= 4.86, truncating a mass of 1.2e-6 of N(0, 1)'s tails; its mean is
    exactly 0 (the angle grid is symmetric) and its variance 1 - 5e-6
    (`tests/library/test_sgmcmc.py` checks both, the grid, and a Kolmogorov-Smirnov test).

    Args:
        shape: the output shape, a tuple of Python ints (static).
        seed: int or integer tensor (see `random_key`).
        stream: int or integer scalar tensor, e.g. a variable's index.
        dtype: output dtype.
        bits: 23 or 16 (`NOISE_BITS`), the resolution of the uniforms.
        step: int or integer scalar tensor, e.g. the optimizer's iterations.

    Returns:
        A `shape` tensor of N(0, 1) draws.
    """
    if bits not in NOISE_BITS:
        raise ValueError(f"`bits` must be one of {sorted(NOISE_BITS)}; received bits={bits!r}")
    try:
        shape = tuple(int(d) for d in shape)
    except TypeError:
        raise ValueError(f"`shape` must be static (Python ints), got {shape!r}") from None
    size = math.prod(shape)
    key = random_key(seed, step, stream)
    pairs = (size + 1) // 2
    if bits == 23:
        w0, w1 = counter_words(key, pairs)
        u1, u2 = _uniform_from_bits(w0, 9, 23), _uniform_from_bits(w1, 9, 23)
    else:
        w0, w1 = counter_words(key, (pairs + 1) // 2)
        u1 = ops.concatenate([_uniform_from_bits(w0, 16, 16), _uniform_from_bits(w1, 16, 16)])
        u2 = ops.concatenate([_uniform_from_bits(w0, 0, 16), _uniform_from_bits(w1, 0, 16)])
    # Both Box-Muller outputs (cos and sin) are used: half the bits and logs.
    radius = ops.sqrt(-2.0 * ops.log(u1))
    angle = (2.0 * np.pi) * u2
    normal = ops.concatenate([radius * ops.cos(angle), radius * ops.sin(angle)], 0)[:size]
    return ops.cast(ops.reshape(normal, shape), dtype)
