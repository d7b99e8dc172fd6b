"""Counter-based random numbers: draws that are pure functions of (seed, counter).

The package's samplers need random numbers that do not depend on *where* or
*how often* a step runs: an SG-MCMC run resumed from a checkpoint must draw the
noise of an uninterrupted run, every replica of a `tf.distribute` strategy must
draw the same Langevin noise (mirrored weights stay identical), and the
TLASGR-MCMC augmentation must give the same latent counts whatever the split of
the global batch across replicas. Every draw is therefore a hash of a key and a
counter, not the state of a generator. This module is the one place where such
draws are made:

* `random_key`, `counter_uniform`: splitmix64 (Steele, Lea & Flood, OOPSLA
  2014) evaluated at arbitrary int64 positions, with the finaliser constants of
  Stafford's "Mix13" as in Vigna's reference splitmix64; one U(0, 1) draw per
  counter (used by the TLASGR augmentation samplers,
  `tfktopic.bayes.augmentation`).
* `stateless_standard_normal`: Philox-4x32 bits and Box-Muller, keyed on
  (seed, stream) (the Langevin noise of `tfktopic.bayes.sgmcmc` and of the
  TLASGR simplex update, `tfktopic.bayes.tlasgr`).

Example:
>>> key = random_key(seed=0, step=3, stream=1)
>>> u = counter_uniform(key, tf.range(5, dtype=tf.int64))     # 5 draws in (0, 1)
>>> bool(tf.reduce_all(u == counter_uniform(key, tf.range(5, dtype=tf.int64))))
True
>>> stateless_standard_normal([2, 3], seed=0, stream=tf.constant(7, tf.int64)).shape
TensorShape([2, 3])
"""

import numpy as np
import tensorflow as tf

__all__ = ["NOISE_BITS", "random_key", "counter_uniform", "stateless_standard_normal"]

# splitmix64: the golden-ratio increment and Stafford's "Mix13" multipliers.
_GOLDEN = 0x9E3779B97F4A7C15
_MIX1 = 0xBF58476D1CE4E5B9
_MIX2 = 0x94D049BB133111EB

# Plain TF ops: autograph's source transformation would only cost tracing time.
_no_autograph = tf.autograph.experimental.do_not_convert


# -----------------------------------------------------------------------------
# splitmix64
# -----------------------------------------------------------------------------
@_no_autograph
def _u64(value):
    """`value` as a uint64 tensor (int64 bits reinterpreted, not converted)."""
    value = tf.convert_to_tensor(value)
    if value.dtype == tf.uint64:
        return value
    return tf.bitcast(tf.cast(value, tf.int64), tf.uint64)


@_no_autograph
def _mix64(z):
    """The splitmix64 output function: a bijective 64-bit avalanche mix."""
    z = tf.bitwise.bitwise_xor(z, tf.bitwise.right_shift(z, tf.constant(30, tf.uint64)))
    z = z * tf.constant(_MIX1, tf.uint64)
    z = tf.bitwise.bitwise_xor(z, tf.bitwise.right_shift(z, tf.constant(27, tf.uint64)))
    z = z * tf.constant(_MIX2, tf.uint64)
    return tf.bitwise.bitwise_xor(z, tf.bitwise.right_shift(z, tf.constant(31, tf.uint64)))


@_no_autograph
def random_key(seed, step=0, stream=0):
    """A 64-bit key of the counter-based generator for (seed, step, stream).

    Args:
        seed: int (or int tensor) seed.
        step: int or int64 tensor, e.g. the MCMC step counter.
        stream: int or int tensor distinguishing independent uses.

    Returns:
        uint64 scalar tensor.
    """
    golden = tf.constant(_GOLDEN, tf.uint64)
    z = _mix64(_u64(seed) * golden + golden)
    z = _mix64(z + _u64(step) * golden)
    return _mix64(z + _u64(stream) * golden)


@_no_autograph
def _as_key(key):
    if isinstance(key, (tf.Tensor, tf.Variable)) and key.dtype == tf.uint64:
        return key
    return random_key(key)


@_no_autograph
def counter_uniform(key, counter):
    """U(0, 1) draws that are a pure function of (key, counter), elementwise.

    This is the splitmix64 generator evaluated at positions `counter` of the
    stream that starts at `key`: distinct counters give (statistically)
    independent draws.

    Args:
        key: uint64 scalar from `random_key` (or an int, hashed by `random_key`).
        counter: int64 tensor of draw indices.

    Returns:
        float32 tensor of `counter`'s shape with values (i + 1/2) 2^-24 in (0, 1).
    """
    key = _as_key(key)
    z = _mix64(key + _u64(counter) * tf.constant(_GOLDEN, tf.uint64))
    top = tf.bitwise.right_shift(z, tf.constant(40, tf.uint64))
    return (tf.cast(top, tf.float32) + 0.5) * (2.0 ** -24)


# -----------------------------------------------------------------------------
# Philox normals
# -----------------------------------------------------------------------------
#: Uniform resolutions of `stateless_standard_normal`: bits per uniform -> uniforms per
#: 32-bit Philox word.
NOISE_BITS = {23: 1, 16: 2}


def _uniform_from_bits(bits, shift, width):
    """(k + 1/2)·2^-width in (0, 1) from the `width` bits of `bits` that start at bit `shift`.

    Computed as the float 1 + k·2^-width (k written into the top of 1.0's mantissa) minus
    (1 − 2^-(width+1)), which is exact (Sterbenz) and bit-identical to (k + 1/2)·2^-width:
    for the top 23 bits 3 passes over the bits (shift, or, subtract) instead of 4 (shift,
    cast, add, multiply); a 16-bit half adds a mask or a shift.
    """
    field = tf.bitwise.right_shift(bits, shift) if shift else bits
    if shift + width < 32:   # other bits above the field
        field = tf.bitwise.bitwise_and(field, tf.constant(2**width - 1, tf.uint32))
    if width < 23:
        field = tf.bitwise.left_shift(field, 23 - width)
    mantissa = tf.bitwise.bitwise_or(field, tf.constant(0x3F800000, tf.uint32))
    return tf.bitcast(mantissa, tf.float32) - (1.0 - 2.0 ** -(width + 1))


def stateless_standard_normal(shape, seed, stream, dtype="float32", bits=23):
    """Standard normal noise that is a pure function of (seed, stream).

    Draws Philox-4x32 random bits with key `seed` and 128-bit counter
    (0, `stream`), turns each pair of uniforms into two normals by Box-Muller
    (cos and sin), and casts to `dtype`. Unlike `tf.random.stateless_normal`,
    this gives the same values with and without XLA (TF's XLA kernels derive
    the key/counter from a runtime seed, and convert bits to normals,
    differently from the CPU/GPU kernels); only the last-ulp rounding of
    log/cos may differ. Distinct `stream` values give non-overlapping Philox
    streams.

    Resolution (`bits`): each uniform is (k + 1/2)·2^-bits, k taken from the
    Philox bits. With ``bits=23`` every uniform takes one 32-bit word (its top
    23 bits), so |ξ| ≤ 5.77. With ``bits=16`` one word gives two uniforms (its
    two halves): half the Philox bits, which are most of the draw's time,
    and ξ takes 2^32 values (a 65,536 × 65,536 grid in (u₁, u₂)) with
    |ξ| ≤ 4.86, truncating a mass of 1.2·10⁻⁶ of N(0, 1)'s tails; its mean is
    exactly 0 (the angle grid is symmetric) and its variance 1 − 5·10⁻⁶
    (`tests/test_sgmcmc.py` checks both, the grid, and a Kolmogorov-Smirnov test).

    Args:
        shape: 1-D int tensor, the output shape.
        seed: Python int (the key).
        stream: int64 scalar tensor (e.g. step · n_vars + variable index).
        dtype: output dtype.
        bits: 23 or 16 (`NOISE_BITS`), the resolution of the uniforms.

    Returns:
        A `shape` tensor of N(0, 1) draws.
    """
    if bits not in NOISE_BITS:
        raise ValueError(f"`bits` must be one of {sorted(NOISE_BITS)}; received bits={bits!r}")
    key = tf.reshape(tf.bitcast(tf.constant(seed, tf.int64), tf.uint64), [1])
    counter = tf.stack(
        [tf.constant(0, tf.uint64), tf.bitcast(tf.cast(stream, tf.int64), tf.uint64)])
    shape = tf.cast(shape, tf.int32)
    size = tf.reduce_prod(shape)
    pairs = (size + 1) // 2
    if bits == 23:
        words = tf.raw_ops.StatelessRandomUniformFullIntV2(
            shape=tf.stack([2, pairs]), key=key, counter=counter, alg=1,
            dtype=tf.uint32)  # alg 1 = Philox
        u1, u2 = _uniform_from_bits(words[0], 9, 23), _uniform_from_bits(words[1], 9, 23)
    else:
        words = tf.raw_ops.StatelessRandomUniformFullIntV2(
            shape=tf.reshape(pairs, [1]), key=key, counter=counter, alg=1, dtype=tf.uint32)
        u1, u2 = _uniform_from_bits(words, 16, 16), _uniform_from_bits(words, 0, 16)
    # Both Box-Muller outputs (cos and sin) are used: half the bits and logs.
    radius = tf.sqrt(-2.0 * tf.math.log(u1))
    angle = (2.0 * np.pi) * u2
    normal = tf.concat([radius * tf.cos(angle), radius * tf.sin(angle)], 0)[:size]
    return tf.cast(tf.reshape(normal, shape), dtype)
