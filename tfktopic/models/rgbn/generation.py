"""Sentence generation of rGBN-RNN / GBN-RNN: the LM's topic input and the decoding loop.

Given one theta per sentence and layer (from the encoder, the prior chain of
`tfktopic.models.rgbn.prior` or a chosen topic), `decode` runs the
topic-gated LSTM stack token by token (Guo et al. 2020, eq. 4; reference
rgbn_rnn.md §6.3) with the shared weights of the trained model.

Example:
>>> thetas = prior_chain(model.topic_model, 4, 1, rng)[0]            # doctest: +SKIP
>>> ids = decode(model, thetas, 30, "sample", 0.75, 10, rng)          # doctest: +SKIP
"""

import numpy as np
from keras import ops

from tfktopic.models.decoding import GENERATION_METHODS, next_tokens
from tfktopic.models.rgbn.prior import REAL_MIN

__all__ = ["normalize_theta", "decode", "check_decoding"]


def normalize_theta(theta):
    """theta / max_k theta, the LM's topic input (reference rgbn_rnn.md §2.4).

    Args:
        theta: float [..., K].

    Returns:
        float [..., K] with largest entry 1 (0 stays 0).
    """
    return theta / ops.maximum(ops.max(theta, axis=-1, keepdims=True), REAL_MIN)


def decode(model, thetas, max_len, method, temperature, top_k, rng):
    """Step-by-step decoding of an `RGBNRNN` with its stack's cells (shared weights).

    Every sentence runs from zero LSTM states, starting at ``<bos>`` (id 1) and
    stopping at ``<eos>`` (id 2) or `max_len` tokens; the LM input of layer l is
    `normalize_theta` of its theta (eq. 4).

    Args:
        model: an `RGBNRNN` (its ``embedding``, ``stack`` and ``softmax``).
        thetas: list over layers of float [N, K_l], one theta per sentence.
        max_len: maximum tokens per sentence.
        method, temperature, top_k: as in `tfktopic.models.decoding.next_tokens`.
        rng: numpy Generator of the token draws.

    Returns:
        int32 [N, max_len] LM ids; each row ends at its ``<eos>`` (kept),
        followed by ``<pad>`` = 0.
    """
    cells = model.stack.cells()
    num = thetas[0].shape[0]
    normalized = [normalize_theta(ops.convert_to_tensor(t, "float32")) for t in thetas]
    states = [cell.get_initial_state(num) for cell in cells]
    token = np.full((num,), 1, np.int32)  # <bos>
    output = np.zeros((num, int(max_len)), np.int32)
    done = np.zeros(num, bool)
    for t in range(int(max_len)):
        x = model.embedding(ops.convert_to_tensor(token))
        gated = []
        for l, cell in enumerate(cells):
            x, states[l] = cell(ops.concatenate([x, normalized[l]], axis=-1), states[l])
            gated.append(x)
        logits = np.asarray(model.softmax(ops.concatenate(gated, axis=-1)), np.float64)
        token = next_tokens(logits, method, temperature, top_k, rng)
        token[done] = 0
        output[:, t] = token
        done |= token == 2  # <eos>
        if done.all():
            break
    return output


def check_decoding(num_sentences, max_len, method, temperature, top_k):
    """Raise `ValueError` naming the first bad decoding argument of `generate`."""
    if int(num_sentences) < 1:
        raise ValueError(f"num_sentences must be >= 1, got {num_sentences}")
    if int(max_len) < 1:
        raise ValueError(f"max_len must be >= 1, got {max_len}")
    if method not in GENERATION_METHODS:
        raise ValueError(f"method must be one of {GENERATION_METHODS}, got {method!r}")
    if not float(temperature) > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    if int(top_k) < 1:
        raise ValueError(f"top_k must be >= 1, got {top_k}")
