"""Data-augmentation samplers of the (recurrent) gamma belief network, as TF ops.

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

Every sampler expands its counts to one draw per unit (token / customer) with
a ragged range, so the shapes are dynamic (no XLA) but no dense [..., max m]
grid is ever built. Each unit's uniform is `counter_uniform` at a counter made
of the *global* flat index of its count entry (this replica's rows shifted by
`offset`) and its occurrence index: the draws are a pure function of the
global batch, whatever its split across replicas (see `tfktopic.bayes.tlasgr`).

Example:
>>> tables = crt(tf.constant([[0., 1., 5.]]), concentration=0.5, key=0)
>>> [int(t) for t in tables[0][:2]]          # no customer: 0 tables; one: 1 table
[0, 1]
"""

import tensorflow as tf

from tfktopic.bayes.counter_random import counter_uniform

__all__ = ["crt", "binomial", "multinomial_split"]

# A count entry may hold at most 2**24 tokens/customers (the occurrence index
# takes the low 24 bits of the draw counter).
_OCCURRENCE_BITS = 24
# Weight added to every multinomial weight so that an all-zero row (theta
# underflow, reference §8.6) gives a uniform draw instead of "all on topic 0".
_TINY_WEIGHT = 1e-30

# Plain TF ops with explicit control flow: autograph's source transformation
# would only cost tracing time.
_no_autograph = tf.autograph.experimental.do_not_convert


@_no_autograph
def _integer_counts(counts):
    """Round non-negative counts to int64 (negative counts count as 0, ref. §8.7)."""
    counts = tf.convert_to_tensor(counts)
    if counts.dtype.is_integer:
        return tf.maximum(tf.cast(counts, tf.int64), 0)
    return tf.cast(tf.round(tf.maximum(counts, 0.0)), tf.int64)


@_no_autograph
def _expand(counts, key, offset):
    """One uniform draw per unit of a count tensor.

    Args:
        counts: integer-valued tensor [N, ...] (N = documents of this replica).
        key: generator key.
        offset: global index of this replica's first document.

    Returns:
        (entries, unit_entry, occurrence, u): the flat indices of the non-zero
        entries of `counts` [E] (int64, ascending), and for every unit the
        position of its entry in `entries`, its index 0..count-1 within the
        entry (both int64 [T]) and its uniform draw [T], keyed on the entry's
        *global* flat index and the occurrence.
    """
    n = tf.reshape(_integer_counts(counts), [-1])
    inner = tf.reduce_prod(tf.shape(counts, out_type=tf.int64)[1:])
    entries = tf.where(n > 0)[:, 0]
    repeats = tf.gather(n, entries)
    # One ragged row 0..count-1 per non-zero entry: the occurrence indices come
    # out flat and each unit's entry is the row whose end it precedes (rows are
    # non-empty, so `splits` is strictly increasing). Two kernels instead of
    # `tf.repeat` + `cumsum` + gathers (~60 graph nodes; this runs up to
    # 3 (J - 1) L + L times per update, inside the sentence loop).
    splits, occurrence = tf.raw_ops.RaggedRange(
        starts=tf.zeros_like(repeats), limits=repeats, deltas=tf.ones_like(repeats))
    unit_entry = tf.searchsorted(splits[1:], tf.range(tf.size(occurrence, out_type=tf.int64)),
                                 side="right", out_type=tf.int64)
    global_entry = tf.gather(entries, unit_entry) + tf.cast(offset, tf.int64) * inner
    counter = global_entry * (2 ** _OCCURRENCE_BITS) + occurrence
    return entries, unit_entry, occurrence, counter_uniform(key, counter)


@_no_autograph
def crt(counts, concentration, key=0, offset=0):
    """Chinese-restaurant-table counts l ~ CRT(m, r), elementwise.

    l = sum_{i=0}^{m-1} b_i with b_i ~ Bernoulli(r / (r + i)) (Zhou & Carin
    2015; the released ``Crt_Sample``, reference §4.1). The first customer
    always opens a table, so l >= 1 whenever m >= 1 (also for r = 0), and
    E[l] = sum_{i<m} r / (r + i). The Bernoulli grid is ragged: one draw per
    customer of the non-zero entries (no dense [..., max m] grid).

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
    counts = tf.convert_to_tensor(counts)
    concentration = tf.cast(concentration, tf.float32)
    entries, unit_entry, customer, u = _expand(counts, key, offset)
    entry = tf.gather(entries, unit_entry)
    r = tf.gather(tf.reshape(tf.broadcast_to(concentration, tf.shape(counts)), [-1]), entry)
    i = tf.cast(customer, tf.float32)
    new_table = tf.where(customer == 0, True, u * (r + i) < r)
    tables = tf.math.unsorted_segment_sum(tf.cast(new_table, tf.float32), entry,
                                          tf.size(counts, out_type=tf.int64))
    return tf.reshape(tables, tf.shape(counts))


@_no_autograph
def binomial(counts, probs, key=0, offset=0):
    """Binomial(counts, probs) draws, elementwise, as sums of Bernoulli trials.

    Args:
        counts: non-negative integer-valued tensor [N, ...].
        probs: float tensor in [0, 1] broadcastable to `counts`.
        key: generator key or int seed.
        offset: global index of the first row of `counts` (see `crt`).

    Returns:
        float32 tensor of successes, the shape of `counts`.
    """
    counts = tf.convert_to_tensor(counts)
    probs = tf.cast(probs, tf.float32)
    entries, unit_entry, _, u = _expand(counts, key, offset)
    entry = tf.gather(entries, unit_entry)
    p = tf.gather(tf.reshape(tf.broadcast_to(probs, tf.shape(counts)), [-1]), entry)
    successes = tf.math.unsorted_segment_sum(tf.cast(u < p, tf.float32), entry,
                                             tf.size(counts, out_type=tf.int64))
    return tf.reshape(successes, tf.shape(counts))


@_no_autograph
def multinomial_split(counts, phi, theta, key=0, offset=0):
    """Split counts over topics: each unit of X[n, j, v] picks topic k ∝ Phi[v, k] theta[n, j, k].

    The PGBN/rGBN multinomial augmentation (the released ``Multi_Sample``,
    reference §4.1-4.2 (a)): given the Poisson factorisation
    X[n, j, :] ~ Pois(Phi theta[n, j]), the latent counts
    x[n, j, v, k] ~ Mult(X[n, j, v], Phi[v, :] ⊙ theta[n, j, :] / sum). The
    draw is an inverse-CDF lookup with one uniform per unit. Each theta row is
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
    counts = tf.convert_to_tensor(counts)
    phi = tf.cast(phi, tf.float32)
    theta = tf.cast(theta, tf.float32)
    shape = tf.shape(counts, out_type=tf.int64)
    num_rows = shape[2]
    num_topics = tf.shape(phi, out_type=tf.int64)[1]
    entries, unit_to_entry, _, u = _expand(counts, key, offset)
    # Cumulative weights once per non-zero entry, then looked up per unit.
    rows = entries % num_rows
    docs = entries // num_rows  # n * J + j
    theta = tf.reshape(theta, [-1, num_topics])
    theta = theta / tf.maximum(tf.reduce_max(theta, axis=1, keepdims=True), 1e-37)
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
    topic_counts = tf.math.unsorted_segment_sum(
        ones, tf.gather(docs, unit_to_entry) * num_topics + topic,
        shape[0] * shape[1] * num_topics)
    return (tf.reshape(phi_counts, tf.stack([num_rows, num_topics])),
            tf.reshape(topic_counts, tf.stack([shape[0], shape[1], num_topics])))
