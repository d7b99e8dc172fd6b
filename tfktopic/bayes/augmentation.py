"""Data-augmentation samplers of the (recurrent) gamma belief network, in keras.ops.

The augmentation step of TLASGR-MCMC (Guo, Chen, Lu, Zhou, ICML 2020,
Algorithm 1; implementation reference `rgbn_rnn.md` §4.1-4.2) turns the
Poisson / negative-binomial counts of a mini-batch into latent counts whose
sums are the sufficient statistics of Phi and Pi:

* `multinomial_split`: every count of row v in sentence j of document n picks
  a topic k with probability ∝ Phi[v, k] theta[n, j, k] (the released
  ``Multi_Sample``);
* `crt`: Chinese-restaurant-table counts l ~ CRT(m, r), i.e.
  l = sum_{i<m} Bernoulli(r / (r + i)) (the released ``Crt_Sample``);
* `binomial`: Binomial(m, p) draws (the split of a layer's tables between its
  temporal and hierarchical parents).

Every unit (token / customer) i of a count entry draws one uniform,
`counter_uniform(key, (e, i))`, keyed on the *global* flat index e of its
entry (this replica's rows shifted by `offset`) and its occurrence index i:
the draws are a pure function of the global batch, whatever its split across
replicas (see `tfktopic.bayes.tlasgr`), and the same on every backend.

Two implementations draw exactly these uniforms and give the same counts:

* the **reference** (`keras.ops`, every backend, the one JAX runs): a loop over
  the occurrence index i = 0 .. max m - 1 (`ops.fori_loop`), each iteration
  drawing one uniform per count entry and masking the entries with m <= i. Its
  cost is (max count) x (entries), and the multinomial keeps a dense
  [N J R, K] table of cumulative weights: fine for the test sizes and moderate
  vocabularies, a memory limit for large V x K under JAX.
* on TensorFlow, a **ragged** kernel (`tfktopic.backend.is_tensorflow`): the
  non-zero entries expand to one draw per unit (dynamic shapes, no XLA), so no
  dense grid is ever built. `tests/library/test_bayes_backends.py` checks that it
  equals the reference.

Example:
>>> tables = crt([[0., 1., 5.]], concentration=0.5, key=0)
>>> [int(t) for t in tables[0][:2]]          # no customer: 0 tables; one: 1 table
[0, 1]
"""

import math

from keras import ops

from tfktopic import backend
from tfktopic.bayes.counter_random import counter_uniform

__all__ = ["crt", "binomial", "multinomial_split"]

# Weight added to every multinomial weight so that an all-zero row (theta
# underflow, reference §8.6) gives a uniform draw instead of "all on topic 0".
_TINY_WEIGHT = 1e-30


def _ragged():
    """Whether the ragged TensorFlow kernel runs (else the keras.ops reference)."""
    return backend.is_tensorflow()


def _integer_counts(counts):
    """Round non-negative counts to int32 (negative counts count as 0, ref. §8.7)."""
    counts = ops.convert_to_tensor(counts)
    if "int" in str(counts.dtype):
        return ops.maximum(ops.cast(counts, "int32"), 0)
    return ops.cast(ops.round(ops.maximum(ops.cast(counts, "float32"), 0.0)), "int32")


def _layout(counts, offset):
    """(flat int32 counts [S], their global flat entry indices [S] (int32), shape)."""
    counts = ops.convert_to_tensor(counts)
    shape = ops.shape(counts)
    n = ops.reshape(_integer_counts(counts), [-1])
    inner = math.prod(shape[1:]) if len(shape) > 1 else 1
    global_entry = (ops.arange(ops.shape(n)[0], dtype="int32")
                    + ops.cast(offset, "int32") * ops.cast(inner, "int32"))
    return n, global_entry, shape


def _flat_broadcast(values, shape):
    return ops.reshape(ops.broadcast_to(ops.cast(values, "float32"), shape), [-1])


# -----------------------------------------------------------------------------
# The keras.ops reference: a loop over the occurrence index
# -----------------------------------------------------------------------------
def _loop_over_occurrences(n, key, global_entry, increment, init):
    """sum over i < max n of increment(i, u_i, active_i), u_i = counter_uniform(key, (e, i))."""
    top = ops.max(ops.concatenate([n, ops.zeros((1,), "int32")]))

    def body(i, total):
        u = counter_uniform(key, (global_entry, i))
        return total + increment(i, u, ops.less(i, n))

    return ops.fori_loop(0, top, body, init)


def _crt_reference(n, r, key, global_entry):
    def tables(i, u, active):
        new = ops.logical_or(ops.equal(i, 0), u * (r + ops.cast(i, "float32")) < r)
        return ops.cast(ops.logical_and(active, new), "float32")

    return _loop_over_occurrences(n, key, global_entry, tables, ops.zeros_like(r))


def _binomial_reference(n, p, key, global_entry):
    def successes(i, u, active):
        return ops.cast(ops.logical_and(active, u < p), "float32")

    return _loop_over_occurrences(n, key, global_entry, successes, ops.zeros_like(p))


def _multinomial_reference(n, cumulative, key, global_entry):
    """[S, K] topic counts of every entry; `cumulative` [S, K] its cumulative weights."""
    num_topics = ops.shape(cumulative)[1]
    total = cumulative[:, -1:]

    def picks(i, u, active):
        # #{k : cumulative[k] < target}: the index of the ragged kernel's searchsorted.
        below = ops.sum(ops.cast(cumulative < u[:, None] * total, "int32"), axis=1)
        topic = ops.minimum(below, num_topics - 1)
        return ops.one_hot(topic, num_topics) * ops.cast(active, "float32")[:, None]

    return _loop_over_occurrences(n, key, global_entry, picks, ops.zeros_like(cumulative))


# -----------------------------------------------------------------------------
# The ragged TensorFlow kernel: one draw per unit of the non-zero entries
# -----------------------------------------------------------------------------
def _ragged_units(n, key, global_entry):
    """(entries [E] int64, unit_entry [T], occurrence [T], u [T]) of the non-zero entries."""
    import tensorflow as tf   # the TensorFlow backend runs (`_ragged`)

    entries = tf.where(n > 0)[:, 0]
    repeats = tf.cast(tf.gather(n, entries), tf.int64)
    # One ragged row 0..count-1 per non-zero entry: the occurrence indices come
    # out flat and each unit's entry is the row whose end it precedes (rows are
    # non-empty, so `splits` is strictly increasing). Two kernels instead of
    # `tf.repeat` + `cumsum` + gathers (~60 graph nodes; this runs up to
    # 3 (J - 1) L + L times per update, inside the sentence loop).
    splits, occurrence = tf.raw_ops.RaggedRange(
        starts=tf.zeros_like(repeats), limits=repeats, deltas=tf.ones_like(repeats))
    unit_entry = tf.searchsorted(splits[1:], tf.range(tf.size(occurrence, out_type=tf.int64)),
                                 side="right", out_type=tf.int64)
    entry = tf.gather(entries, unit_entry)
    u = counter_uniform(key, (tf.gather(global_entry, entry), occurrence))
    return entries, unit_entry, occurrence, u


def _crt_ragged(n, r, key, global_entry):
    import tensorflow as tf

    entries, unit_entry, customer, u = _ragged_units(n, key, global_entry)
    entry = tf.gather(entries, unit_entry)
    r_unit = tf.gather(r, entry)
    new_table = tf.where(customer == 0, True,
                         u * (r_unit + tf.cast(customer, tf.float32)) < r_unit)
    return tf.math.unsorted_segment_sum(tf.cast(new_table, tf.float32), entry, tf.size(n))


def _binomial_ragged(n, p, key, global_entry):
    import tensorflow as tf

    entries, unit_entry, _, u = _ragged_units(n, key, global_entry)
    entry = tf.gather(entries, unit_entry)
    return tf.math.unsorted_segment_sum(tf.cast(u < tf.gather(p, entry), tf.float32), entry,
                                        tf.size(n))


# -----------------------------------------------------------------------------
# The samplers
# -----------------------------------------------------------------------------
def crt(counts, concentration, key=0, offset=0):
    """Chinese-restaurant-table counts l ~ CRT(m, r), elementwise.

    l = sum_{i=0}^{m-1} b_i with b_i ~ Bernoulli(r / (r + i)) (Zhou & Carin
    2015; the released ``Crt_Sample``, reference §4.1): customer i opens a new
    table iff i = 0 or u_i (r + i) < r. The first customer always opens a
    table, so l >= 1 whenever m >= 1 (also for r = 0), and
    E[l] = sum_{i<m} r / (r + i).

    Args:
        counts: non-negative integer-valued tensor m [N, ...] (rounded; negative
            entries count as 0).
        concentration: float tensor r >= 0 broadcastable to `counts`.
        key: generator key (`random_key`) or int seed.
        offset: global index of the first row of `counts` along axis 0 (for
            replica-independent draws, see the module docstring).

    Returns:
        float32 tensor of table counts, the shape of `counts`.
    """
    n, global_entry, shape = _layout(counts, offset)
    r = _flat_broadcast(concentration, shape)
    sample = _crt_ragged if _ragged() else _crt_reference
    return ops.reshape(sample(n, r, key, global_entry), shape)


def binomial(counts, probs, key=0, offset=0):
    """Binomial(counts, probs) draws, elementwise, as sums of Bernoulli trials u_i < p.

    Args:
        counts: non-negative integer-valued tensor [N, ...].
        probs: float tensor in [0, 1] broadcastable to `counts`.
        key: generator key or int seed.
        offset: global index of the first row of `counts` (see `crt`).

    Returns:
        float32 tensor of successes, the shape of `counts`.
    """
    n, global_entry, shape = _layout(counts, offset)
    p = _flat_broadcast(probs, shape)
    sample = _binomial_ragged if _ragged() else _binomial_reference
    return ops.reshape(sample(n, p, key, global_entry), shape)


def _scaled_theta(theta, num_topics):
    """theta rows [N J, K] rescaled by their maximum (the split is scale-invariant)."""
    theta = ops.reshape(ops.cast(theta, "float32"), [-1, num_topics])
    return theta / ops.maximum(ops.max(theta, axis=1, keepdims=True), 1e-37)


def multinomial_split(counts, phi, theta, key=0, offset=0):
    """Split counts over topics: each unit of X[n, j, v] picks topic k ∝ Phi[v, k] theta[n, j, k].

    The PGBN/rGBN multinomial augmentation (the released ``Multi_Sample``,
    reference §4.1-4.2 (a)): given the Poisson factorisation
    X[n, j, :] ~ Pois(Phi theta[n, j]), the latent counts
    x[n, j, v, k] ~ Mult(X[n, j, v], Phi[v, :] ⊙ theta[n, j, :] / sum). The
    draw is an inverse-CDF lookup with one uniform per unit: the topic is
    #{k : C_k < u C_K} for the cumulative weights C. Each theta row is
    rescaled by its maximum (the split is scale-invariant) and a 1e-30 weight
    is added, so an all-zero row draws uniformly (reference §8.6).

    Args:
        counts: non-negative integer-valued [N, J, R] (R rows of Phi: the
            vocabulary for layer 1, the K_{l-1} topics below for layer l, or
            the K_l "to" topics when splitting temporal tables through Pi).
        phi: [R, K] non-negative (columns on the simplex).
        theta: [N, J, K] non-negative topic weights.
        key: generator key or int seed.
        offset: global index of the first document (see `crt`).

    Returns:
        (phi_counts, topic_counts): float32 [R, K] = sum_{n,j} x[n, j, :, :]
        and float32 [N, J, K] = sum_v x[n, j, v, :].
    """
    n, global_entry, shape = _layout(counts, offset)
    phi = ops.cast(phi, "float32")
    num_rows, num_topics = ops.shape(phi)
    theta = _scaled_theta(theta, num_topics)
    if _ragged():
        return _multinomial_ragged(n, phi, theta, key, global_entry, shape)
    weights = phi[None, :, :] * theta[:, None, :] + _TINY_WEIGHT          # [N J, R, K]
    cumulative = ops.reshape(ops.cumsum(weights, axis=2), [-1, num_topics])
    x = ops.reshape(_multinomial_reference(n, cumulative, key, global_entry),
                    [-1, num_rows, num_topics])                          # [N J, R, K]
    return ops.sum(x, axis=0), ops.reshape(ops.sum(x, axis=1),
                                           [shape[0], shape[1], num_topics])


def _multinomial_ragged(n, phi, theta, key, global_entry, shape):
    import tensorflow as tf

    num_rows = tf.shape(phi, out_type=tf.int64)[0]
    num_topics = tf.shape(phi, out_type=tf.int64)[1]
    entries, unit_to_entry, _, u = _ragged_units(n, key, global_entry)
    # Cumulative weights once per non-zero entry, then looked up per unit.
    rows = entries % num_rows
    docs = entries // num_rows  # n * J + j
    weights = tf.gather(phi, rows) * tf.gather(theta, docs) + _TINY_WEIGHT
    cumulative = tf.gather(tf.cumsum(weights, axis=1), unit_to_entry)
    target = u[:, None] * cumulative[:, -1:]
    # #{k : cumulative[k] < target} by binary search (`cumulative` is
    # non-decreasing): the same index as a dense compare-and-count over K.
    topic = tf.minimum(tf.searchsorted(cumulative, target, side="left", out_type=tf.int64)[:, 0],
                       num_topics - 1)
    ones = tf.ones_like(u)
    phi_counts = tf.math.unsorted_segment_sum(
        ones, tf.gather(rows, unit_to_entry) * num_topics + topic, num_rows * num_topics)
    docs_total = tf.cast(shape[0], tf.int64) * tf.cast(shape[1], tf.int64)
    topic_counts = tf.math.unsorted_segment_sum(
        ones, tf.gather(docs, unit_to_entry) * num_topics + topic, docs_total * num_topics)
    return (tf.reshape(phi_counts, tf.stack([num_rows, num_topics])),
            tf.reshape(topic_counts, tf.stack([tf.cast(shape[0], tf.int64),
                                               tf.cast(shape[1], tf.int64), num_topics])))
