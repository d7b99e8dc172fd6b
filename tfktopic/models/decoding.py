"""Next-token choice for generation, shared by every model's `generate`.

Greedy, temperature sampling and top-k sampling (DESIGN.md §3) written once:
`choose_tokens` in TensorFlow ops for the compiled loop of
`TopicLanguageModel.generate`, `next_tokens` in numpy (rGBN-RNN's decoder).
Ids 0 (``<pad>``) and 1 (``<bos>``) are never chosen; callers can ban more
(e.g. ``<unk>``) by setting their scores to -inf first.
"""

import numpy as np
import tensorflow as tf

__all__ = ["GENERATION_METHODS", "next_tokens", "choose_tokens"]

GENERATION_METHODS = ("greedy", "sample", "top_k")
_NEVER = (0, 1)  # <pad>, <bos>


def next_tokens(scores, method="greedy", temperature=1.0, top_k=10, rng=None):
    """Choose one next token per row.

    Args:
        scores: float [N, V] logits or log-probabilities (banned ids at -inf).
        method: "greedy" (arg-max), "sample" (softmax of scores/temperature)
            or "top_k" (the same, restricted to the `top_k` best ids).
        temperature: > 0; divides the scores before sampling.
        top_k: candidates kept by "top_k".
        rng: a `numpy.random.Generator` (sampling methods).

    Returns:
        int32 [N] token ids.

    Example:
    >>> next_tokens(np.log([[0.1, 0.1, 0.2, 0.6]]))
    array([3], dtype=int32)
    """
    if method not in GENERATION_METHODS:
        raise ValueError(f"method must be one of {GENERATION_METHODS}, got {method!r}")
    scores = np.array(scores, np.float64)
    scores[:, list(_NEVER)] = -np.inf
    if method == "greedy":
        return scores.argmax(axis=-1).astype(np.int32)
    scores = scores / float(temperature)
    if method == "top_k":
        k = max(1, min(int(top_k), scores.shape[-1] - len(_NEVER)))
        keep = np.argpartition(-scores, k - 1, axis=-1)[:, :k]
        masked = np.full_like(scores, -np.inf)
        np.put_along_axis(masked, keep, np.take_along_axis(scores, keep, -1), -1)
        scores = masked
    probs = np.exp(scores - scores.max(axis=-1, keepdims=True))
    probs /= probs.sum(axis=-1, keepdims=True)
    cumulative = probs.cumsum(axis=-1)
    draws = rng.random((len(probs), 1)) * cumulative[:, -1:]
    chosen = np.minimum((cumulative < draws).sum(axis=-1), probs.shape[1] - 1)
    # Float round-off may land on a zero-probability tail token: take the mode.
    ok = probs[np.arange(len(probs)), chosen] > 0
    return np.where(ok, chosen, probs.argmax(-1)).astype(np.int32)


def choose_tokens(scores, method, temperature, top_k, seed):
    """`next_tokens` as TensorFlow ops, for the compiled generation loop.

    Args:
        scores: float32 [N, V] log-probabilities (banned ids already at -inf).
        method: "greedy", "sample" or "top_k" (a Python string: one trace each).
        temperature: float32 scalar > 0 (sampling methods).
        top_k: int32 scalar >= 1, candidates kept by "top_k".
        seed: int32 [2] stateless seed of this step (`tf.random.stateless_categorical`).

    Returns:
        int32 [N] token ids ("greedy" and "top_k" with k = 1: the arg-max,
        lowest id first on ties).
    """
    if method == "greedy":
        return tf.argmax(scores, axis=-1, output_type=tf.int32)
    if method == "top_k":
        # The k best by the model's own scores (before the temperature division,
        # whose rounding could reorder near-ties), then sampled among them.
        k = tf.minimum(top_k, tf.shape(scores)[-1])
        values, indices = tf.math.top_k(scores, k=k)
        picks = tf.random.stateless_categorical(values / temperature, 1, seed,
                                                dtype=tf.int32)[:, 0]
        return tf.gather(indices, picks, batch_dims=1)
    return tf.random.stateless_categorical(scores / temperature, 1, seed, dtype=tf.int32)[:, 0]
