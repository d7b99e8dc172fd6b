"""`tfktopic.runs.parameter_counts`: what a model learned by gradient, what it sampled, and
which weights are state (not parameters) -- the study table's "parameters" column."""

import numpy as np
import pytest
import tensorflow as tf

from tfktopic.models.lstm.document_lstm import DocumentLSTMLanguageModel
from tfktopic.models.lstm.lda_lstm import LDALSTMLanguageModel
from tfktopic.models.lstm.lstm_lm import LSTMLanguageModel
from tfktopic.models.rgbn import RGBNRNN
from tfktopic.runs import parameter_counts

V, VC, B, J, T = 40, 15, 4, 3, 6
E, H = 8, 16
RNG = np.random.default_rng(0)


def _sentences():
    tokens = RNG.integers(1, V, size=(B, T)).astype(np.int32)
    return {"tokens": tokens, "targets": np.roll(tokens, -1, -1),
            "mask": np.ones((B, T), np.float32),
            "context_bow": RNG.poisson(0.5, size=(B, VC)).astype(np.float32)}


def _chunks():
    tokens = RNG.integers(1, V, size=(B, J, T)).astype(np.int32)
    return {"tokens": tokens, "targets": np.roll(tokens, -1, -1),
            "mask": np.ones((B, J, T), np.float32),
            "context_bow": RNG.poisson(0.5, size=(B, J, VC)).astype(np.float32)}


def _lstm_weights(inputs, units):
    return 4 * units * (inputs + units + 1)


def test_an_lstm_lm_counts_its_closed_form_and_nothing_else():
    model = LSTMLanguageModel(V, embedding_dim=E, hidden_dim=H)
    model(_sentences())
    counts = parameter_counts(model)
    # embedding + LSTM (kernel, recurrent kernel, bias) + softmax (weights and bias)
    assert counts == {"gradient": V * E + _lstm_weights(E, H) + H * V + V, "sampled": 0,
                      "total": V * E + _lstm_weights(E, H) + H * V + V, "state": 0}


def test_the_streamed_lstm_s_carried_states_are_state_not_parameters():
    model = DocumentLSTMLanguageModel(V, embedding_dim=E, hidden_dim=H, max_streams=B)
    model({"tokens": tf.constant(_sentences()["tokens"]), "reset": tf.ones([B], tf.bool)},
          training=False)
    counts = parameter_counts(model)
    assert counts["gradient"] == V * E + _lstm_weights(E, H) + H * V + V
    assert counts["sampled"] == 0 and counts["total"] == counts["gradient"]
    # h and c of every stream, one set for training and one for evaluation
    assert counts["state"] == sum(int(np.prod(v.shape)) for v in model.non_trainable_weights)
    assert counts["state"] >= 2 * B * H


def test_lda_lstm_s_topics_are_sampled_parameters():
    K = 4
    lda = {"topic_word": RNG.gamma(1.0, 1.0, size=(K, VC)), "alpha": np.full(K, 1.0 / K)}
    model = LDALSTMLanguageModel(V, VC, num_topics=K, lda=lda, embedding_dim=E, hidden_dim=H)
    model(_sentences())
    counts = parameter_counts(model)
    assert counts["sampled"] == K * VC + K           # beta and alpha, fitted by gensim
    assert counts["gradient"] == sum(int(np.prod(v.shape)) for v in model.trainable_weights)
    assert counts["total"] == counts["gradient"] + counts["sampled"] and counts["state"] == 0


@pytest.mark.parametrize("recurrent", [True, False])
def test_rgbn_s_phi_and_pi_are_sampled_and_its_preconditioners_are_state(recurrent):
    sizes = (6, 4)
    model = RGBNRNN(V, VC, num_documents=50, num_layers=2, hidden_sizes=(16, 12),
                    topic_sizes=sizes, encoder_units=(16, 12), embedding_dim=E,
                    recurrent=recurrent, seed=3)
    model(_chunks(), training=False)
    counts = parameter_counts(model)
    phi = VC * sizes[0] + sizes[0] * sizes[1]
    pi = sizes[0] ** 2 + sizes[1] ** 2 if recurrent else 0     # rGBN-RNN only
    assert counts["sampled"] == phi + pi
    assert counts["gradient"] == sum(int(np.prod(v.shape)) for v in model.trainable_weights)
    # a preconditioner per topic of each sampled matrix, and the step counter
    assert counts["state"] == (2 if recurrent else 1) * sum(sizes) + 1
