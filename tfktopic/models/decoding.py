"""Generation pieces shared by every model's `generate`.

Greedy, temperature sampling and top-k sampling (DESIGN.md §3) written once:
`choose_tokens`, TensorFlow ops for the compiled loop of
`TopicLanguageModel.generate`, which bans ids 0 (``<pad>``) and 1 (``<bos>``)
(and ``<unk>`` with ``allow_unk=False``) by setting their scores to -inf first.
`stacked_cell_step` steps stacked recurrent cells; `simplex_topics` gives the
topic proportions a sentence is generated from, for the models whose softmax
takes proportions on the simplex (TCNLM, LDA+LSTM).
"""

import numbers

import numpy as np

__all__ = ["GENERATION_METHODS", "choose_tokens", "simplex_topics", "stacked_cell_step"]

GENERATION_METHODS = ("greedy", "sample", "top_k")


def choose_tokens(scores, method, temperature, top_k, seed):
    """Choose one next token per row, in TensorFlow ops (the compiled generation loop).

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
    import tensorflow as tf
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


def stacked_cell_step(cells, x, state):
    """One step of stacked recurrent cells (generation): (top output, the new state).

    Args:
        cells: Keras RNN cells, bottom first.
        x: [N, D] the step's input.
        state: one list of state tensors per cell.
    """
    new_state = []
    for cell, layer_state in zip(cells, state):
        x, layer_state = cell(x, layer_state, training=False)
        new_state.append(list(layer_state) if isinstance(layer_state, (list, tuple))
                         else [layer_state])
    return x, new_state


def simplex_topics(num_sentences, num_topics, topic_vocab_size, posterior, prior, topic=None,
                   context_bow=None):
    """Topic proportions t [N, K] on the simplex for each generated sentence.

    Args:
        num_sentences: N.
        num_topics: K.
        topic_vocab_size: D, the width of a context bag of words.
        posterior: bow float32 [n, D] -> t [n, K] (the model's inference of a context).
        prior: N -> t [N, K], draws from the model's prior.
        topic: None (`prior`), an int k (a single topic: t = e_k), or nonnegative
            weights [K] / [N, K] of a mixture of topics (normalised to sum to 1).
        context_bow: instead of `topic`, a bag of words [D] or [N, D]; t = `posterior`.

    Returns:
        float32 numpy [N, K].

    Raises:
        ValueError: both `topic` and `context_bow`, or a bad index, shape or weight
            (named).
    """
    if topic is not None and context_bow is not None:
        raise ValueError("give at most one of topic and context_bow")
    K = num_topics
    if context_bow is not None:
        bow = np.asarray(context_bow, np.float32)
        bow = bow[None] if bow.ndim == 1 else bow
        if bow.ndim != 2 or bow.shape[1] != topic_vocab_size or \
                bow.shape[0] not in (1, num_sentences):
            raise ValueError(f"context_bow must have shape [topic_vocab_size="
                             f"{topic_vocab_size}] or [num_sentences, topic_vocab_size], "
                             f"got {bow.shape}")
        t = np.asarray(posterior(bow))
    elif topic is None:
        t = np.asarray(prior(num_sentences))
    elif isinstance(topic, numbers.Integral) and not isinstance(topic, bool):
        if not 0 <= topic < K:
            raise ValueError(f"topic must be in [0, num_topics={K}), got {topic}")
        t = np.eye(K, dtype=np.float32)[[int(topic)]]
    else:
        t = np.asarray(topic, np.float32)
        t = t[None] if t.ndim == 1 else t
        if t.ndim != 2 or t.shape[1] != K or t.shape[0] not in (1, num_sentences):
            raise ValueError(f"topic must be an int, or weights of shape [num_topics={K}] "
                             f"or [num_sentences, num_topics], got shape {t.shape}")
        if not np.all(np.isfinite(t)) or np.any(t < 0) or np.any(t.sum(axis=1) <= 0):
            raise ValueError("topic weights must be finite, nonnegative and not all zero")
        t = t / t.sum(axis=1, keepdims=True)
    return np.broadcast_to(t, (num_sentences, K)).astype(np.float32)
