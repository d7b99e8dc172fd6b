"""Next-token choice (`tfktopic.models.decoding.choose_tokens`): each method's law."""

import numpy as np
import pytest
import tensorflow as tf

from tfktopic.models.decoding import choose_tokens

#: log-probabilities of a five-word vocabulary
SCORES = np.log(np.array([0.5, 0.25, 0.15, 0.07, 0.03]))
ROWS = 20_000


def _draws(method, temperature, top_k=5, seed=(1, 2)):
    scores = tf.constant(np.tile(SCORES, (ROWS, 1)), tf.float32)
    return np.asarray(choose_tokens(scores, method, tf.constant(temperature, tf.float32),
                                    tf.constant(top_k, tf.int32), tf.constant(seed, tf.int32)))


def _softmax(x):
    e = np.exp(x - x.max())
    return e / e.sum()


@pytest.mark.parametrize("temperature", [0.5, 2.0])
def test_sampling_draws_from_the_softmax_of_the_scores_over_the_temperature(temperature):
    """"sample" and "top_k" with k = V draw token i with probability softmax(s / T)_i; the
    frequencies of 20,000 draws are within 0.015 (over 4 binomial sd) of it."""
    expected = _softmax(SCORES / temperature)
    for method in ("sample", "top_k"):
        frequencies = np.bincount(_draws(method, temperature), minlength=5) / ROWS
        np.testing.assert_allclose(frequencies, expected, atol=0.015, err_msg=method)


def test_top_k_samples_the_k_best_renormalised_and_greedy_takes_the_lowest_best_id():
    frequencies = np.bincount(_draws("top_k", 2.0, top_k=2), minlength=5) / ROWS
    np.testing.assert_allclose(frequencies, [*_softmax(SCORES[:2] / 2.0), 0, 0, 0], atol=0.015)
    ties = tf.constant([[0.1, 0.7, 0.7], [0.9, 0.2, 0.9]], tf.float32)
    np.testing.assert_array_equal(choose_tokens(ties, "greedy", None, None, None), [1, 0])
    np.testing.assert_array_equal(
        choose_tokens(ties, "top_k", tf.constant(1.0), tf.constant(1), tf.constant([3, 4])),
        [1, 0])
