"""The `initialization` option of the sentence-level models (`tfktopic.layers.initialization`):
the PyTorch scheme of Zheng et al.'s recipe on the LSTM LM, LDA+LSTM, TopicRNN, TCNLM and
rGBN-RNN / GBN-RNN, Keras' defaults untouched. (The streamed document models' option is
tested in test_document_lstm.py.)"""

import keras
import numpy as np
import pytest

from tfktopic.models.lstm.lstm_lm import LSTMLanguageModel
from tfktopic.models.topicrnn.model import TopicRNN
from tfktopic.runs.checks import check_setting_keys

H = 64
LIMIT = 1 / 8                                                   # 1 / sqrt(H)


def _built(model, shape=(2, 5)):
    model(np.ones(shape, "int32"))
    return model


def _lm(**kwargs):
    keras.utils.set_random_seed(0)
    return _built(LSTMLanguageModel(500, **{"embedding_dim": 16, "hidden_dim": H, **kwargs}))


def _max(variable):
    return float(np.abs(np.asarray(variable)).max())


@pytest.mark.parametrize("cell", ["lstm", "gru", "rnn"])
def test_torch_initialization_of_the_sentence_lm_draws_pytorch_ranges_for_every_cell(cell):
    """"torch": embedding and softmax kernel U(±0.1), every recurrent weight and bias and the
    softmax bias U(±1/sqrt(H)) (PyTorch's nn.LSTM / nn.GRU / nn.RNN and nn.Linear)."""
    model = _lm(cell=cell, num_layers=2, initialization="torch")
    assert 0.095 < _max(model.embedding.embeddings) <= 0.1
    assert 0.095 < _max(model.softmax.kernel) <= 0.1
    assert 0.9 * LIMIT < _max(model.softmax.bias) <= LIMIT
    for layer in model.lstms:
        for weight in (layer.cell.kernel, layer.cell.recurrent_kernel, layer.cell.bias):
            assert 0.9 * LIMIT < _max(weight) <= LIMIT, (layer.name, weight.path)


def test_keras_initialization_stays_the_default_of_the_sentence_lm():
    """The default draws Keras' own: embedding U(±0.05), forget-gate bias 1, zero softmax
    bias, Glorot softmax kernel (whose limit sqrt(6 / (H + V)) is not 0.1)."""
    model = _lm()
    assert model.get_config()["initialization"] == "keras"
    assert 0.045 < _max(model.embedding.embeddings) <= 0.05
    np.testing.assert_array_equal(np.asarray(model.lstms[0].cell.bias)[H:2 * H], 1.0)
    np.testing.assert_array_equal(np.asarray(model.softmax.bias), 0.0)
    glorot = np.sqrt(6 / (H + 500))
    assert 0.9 * glorot < _max(model.softmax.kernel) <= glorot
    explicit = _lm(initialization="keras")
    for a, b in zip(model.weights, explicit.weights):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_lstm_part_alone_leaves_the_sentence_lms_embedding_and_softmax_at_keras():
    model = _lm(initialization={"lstm": "torch"})
    assert _max(model.embedding.embeddings) <= 0.05
    np.testing.assert_array_equal(np.asarray(model.softmax.bias), 0.0)
    assert _max(model.lstms[0].cell.bias) <= LIMIT                 # no forget-gate offset of 1


def test_lda_lstm_passes_its_initialization_to_its_language_model():
    from tfktopic.models.lstm.lda_lstm import LDALSTMLanguageModel

    keras.utils.set_random_seed(0)
    model = LDALSTMLanguageModel(500, 40, num_topics=3, embedding_dim=16, hidden_dim=H,
                                 initialization="torch")
    model({"tokens": np.ones((2, 5), "int32"), "context_bow": np.ones((2, 40), "float32")})
    assert model.get_config()["initialization"] == "torch"
    assert 0.095 < _max(model.embedding.embeddings) <= 0.1
    assert 0.095 < _max(model.softmax.kernel) <= 0.1
    assert _max(model.lstms[0].cell.bias) <= LIMIT


def test_sentence_lm_initialization_round_trips_through_keras_file(tmp_path):
    model = _lm(initialization={"embedding": "torch", "softmax": "torch"})
    path = tmp_path / "lm.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.get_config()["initialization"] == {"embedding": "torch", "softmax": "torch"}
    np.testing.assert_array_equal(np.asarray(loaded.softmax.bias), np.asarray(model.softmax.bias))


def test_bad_initialization_of_the_sentence_models_names_the_argument():
    with pytest.raises(ValueError, match="initialization must be one of keras, torch, got 'tf'"):
        LSTMLanguageModel(10, initialization="tf")
    with pytest.raises(ValueError, match="initialization: unknown part 'topics'"):
        TopicRNN(10, np.maximum(np.arange(10) - 3, -1), initialization={"topics": "torch"})


def _topicrnn(**kwargs):
    keras.utils.set_random_seed(0)
    lm_to_topic = np.where(np.arange(300) < 20, -1, np.arange(300) - 20)   # 20 stop words
    return TopicRNN(300, lm_to_topic, num_topics=4, hidden_dim=H, embedding_dim=16,
                    cell="lstm", encoder_units=(8,), **kwargs)


def test_sentence_topicrnn_torch_initialization_covers_its_language_model_and_round_trips(
        tmp_path):
    """TopicRNN's "torch" reaches its embedding, RNN and vocabulary softmax V; the topic
    matrix B keeps Glorot, and the choice survives a .keras round trip."""
    model = _topicrnn(initialization="torch")
    keras_model = _topicrnn()
    assert 0.095 < _max(model.embedding.embeddings) <= 0.1
    assert 0.095 < _max(model.gate.projection.kernel) <= 0.1
    assert 0 < _max(model.gate.projection.bias) <= LIMIT
    assert _max(model.rnns[0].cell.bias) <= LIMIT
    np.testing.assert_array_equal(np.asarray(keras_model.gate.projection.bias), 0.0)
    np.testing.assert_array_equal(np.asarray(keras_model.rnns[0].cell.bias)[H:2 * H], 1.0)
    assert _max(model.gate.topic_word) == pytest.approx(_max(keras_model.gate.topic_word),
                                                        rel=0.2)
    path = tmp_path / "topicrnn.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.get_config()["initialization"] == "torch"
    np.testing.assert_array_equal(np.asarray(loaded.gate.projection.kernel),
                                  np.asarray(model.gate.projection.kernel))


def test_each_weight_of_a_torch_initialised_layer_is_its_own_draw():
    """A Keras initializer instance repeats its values at every call: kernel, recurrent kernel
    and bias (and every layer) must each get their own."""
    model = _lm(num_layers=2, initialization="torch", embedding_dim=H)
    first, second = model.lstms
    kernel = np.asarray(first.cell.kernel)
    assert not np.allclose(kernel, np.asarray(first.cell.recurrent_kernel))
    assert not np.allclose(kernel, np.asarray(second.cell.kernel))
    assert not np.allclose(kernel[0], np.asarray(first.cell.bias))


def _tcnlm(**kwargs):
    from tfktopic.models.tcnlm.model import TCNLM

    keras.utils.set_random_seed(0)
    return TCNLM(500, 40, num_topics=4, embedding_dim=16, hidden_dim=H, factor_dim=32,
                 ntm_units=(8,), **kwargs)


@pytest.mark.parametrize("mixture", ["factorized", "moe"])
def test_tcnlm_torch_initialization_draws_every_cell_weight_from_pytorchs_range(mixture,
                                                                                tmp_path):
    """TCNLM's "torch": embedding and softmax U(±0.1); every factor, topic and recurrent
    weight and the gate biases of its cells U(±1/sqrt(H)), each its own draw, no forget-gate
    offset; "keras" keeps SCN-LSTM's U(±0.05) factors and the forget bias 1."""
    model = _tcnlm(mixture=mixture, initialization="torch")
    keras_model = _tcnlm(mixture=mixture)
    assert 0.095 < _max(model.embedding.embeddings) <= 0.1
    assert 0.095 < _max(model.softmax.kernel) <= 0.1
    cell = model.rnns[0].cell if mixture == "factorized" else model.rnns[0]
    weights = [w for w in cell.weights]
    assert len(weights) == (7 if mixture == "factorized" else 3)
    for weight in weights:
        assert 0.9 * LIMIT < _max(weight) <= LIMIT, weight.path
    values = [np.asarray(w).ravel()[:16] for w in weights]
    assert len({v.tobytes() for v in values}) == len(values)        # independent draws
    keras_bias = np.asarray((keras_model.rnns[0].cell if mixture == "factorized"
                             else keras_model.rnns[0]).bias)
    assert keras_bias.max() == 1.0 and _max(cell.bias) <= LIMIT
    if mixture == "factorized":
        assert _max(keras_model.rnns[0].cell.input_factor_kernel) <= 0.05
    path = tmp_path / "tcnlm.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.get_config()["initialization"] == "torch"


def test_rgbn_torch_initialization_covers_its_lstms_embedding_and_softmax_not_its_gates():
    from tfktopic.models.rgbn import RGBNRNN

    keras.utils.set_random_seed(0)
    kwargs = dict(num_documents=10, num_layers=2, hidden_sizes=(H, 36), topic_sizes=(6, 4),
                  embedding_dim=16)
    model = RGBNRNN(500, 40, initialization="torch", **kwargs)
    keras_model = RGBNRNN(500, 40, **kwargs)
    assert 0.095 < _max(model.embedding.embeddings) <= 0.1
    assert 0.095 < _max(model.softmax.kernel) <= 0.1
    assert 0.9 / 10 < _max(model.softmax.bias) <= 1 / 10           # fan-in 64 + 36
    for lstm, units in zip(model.stack.lstms, (H, 36)):
        for weight in (lstm.cell.kernel, lstm.cell.recurrent_kernel, lstm.cell.bias):
            assert 0.9 / np.sqrt(units) < _max(weight) <= 1 / np.sqrt(units), weight.path
    assert np.asarray(keras_model.stack.lstms[0].cell.bias).max() == 1.0
    for gate in model.stack.gates:
        assert _max(gate.hidden_kernel) <= 0.05
    assert model.get_config()["initialization"] == "torch"
    assert model.stack.get_config()["initialization"] == "torch"


@pytest.mark.parametrize("model", ["lstm", "lda_lstm", "topicrnn", "doc_lstm", "doc_topicrnn",
                                   "tcnlm", "rgbn_rnn", "gbn_rnn"])
def test_initialization_is_a_set_key_of_the_models_that_have_it(model):
    """``--set initialization=...`` reaches these models (the CLI checks keys by signature)."""
    settings = {"model": {"initialization": "torch"}, "data": {}, "training": {}}
    check_setting_keys(model, ["initialization"], settings)
