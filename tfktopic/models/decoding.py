"""Next-token choice for generation, shared by every model's `generate`.

Greedy, temperature sampling and top-k sampling (DESIGN.md §3) written once:
`choose_tokens`, TensorFlow ops for the compiled loop of
`TopicLanguageModel.generate`, which bans ids 0 (``<pad>``) and 1 (``<bos>``)
(and ``<unk>`` with ``allow_unk=False``) by setting their scores to -inf first.
"""

import tensorflow as tf

__all__ = ["GENERATION_METHODS", "choose_tokens", "stacked_cell_step"]

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
