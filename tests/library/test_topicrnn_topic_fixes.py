"""TopicRNN's topic-quality options (issue 14): KL annealing and an LDA-initialised B."""

import keras
import numpy as np
import pytest

from tfktopic.layers.topic_decoder import lda_logits
from tfktopic.models.schedules import after_warmup, annealing_weight, check_steps
from tfktopic.models.topicrnn.model import TopicRNN

LM_TO_TOPIC = np.array([-1, -1, -1, -1, 0, -1, 1, 2, -1, 3], np.int32)  # C = 10, V_c = 4


def _tiny(**kwargs):
    keras.utils.set_random_seed(0)
    args = dict(num_topics=3, hidden_dim=8, embedding_dim=8, encoder_units=(8,), seed=1,
                tokens_per_document=20.0)
    return TopicRNN(10, LM_TO_TOPIC, **{**args, **kwargs})


def _batch(seed=0):
    rng = np.random.default_rng(seed)
    tokens = rng.integers(1, 10, size=(3, 6)).astype(np.int32)
    return {"tokens": tokens, "targets": np.roll(tokens, -1, axis=1),
            "mask": np.ones((3, 6), np.float32),
            "context_bow": rng.poisson(1.0, size=(3, 4)).astype(np.float32)}


def test_schedule_helpers():
    assert [float(annealing_weight(s, 10)) for s in (0, 5, 10, 30)] == [0.0, 0.5, 1.0, 1.0]
    assert float(annealing_weight(0, 0)) == 1.0
    assert [float(after_warmup(s, 3)) for s in (0, 2, 3, 4)] == [0.0, 0.0, 1.0, 1.0]
    assert check_steps("x", 3) == 3 and check_steps("x", 2.0) == 2
    for bad in (-1, 1.5, True, "ten", None):
        with pytest.raises(ValueError, match="x must be an integer >= 0"):
            check_steps("x", bad)


def test_kl_annealing_weights_the_charged_kl():
    model = _tiny(kl_warmup_steps=4)
    model.compile(optimizer=keras.optimizers.Adam(1e-3))
    model.optimizer.build(model.trainable_variables)
    batch = _batch()
    for step, weight in ((0, 0.0), (1, 0.25), (4, 1.0), (9, 1.0)):
        model.optimizer.iterations.assign(step)
        terms = model.objective(batch, training=True)
        expected = (terms["token_nll"] + terms["stop_nll"] + weight * terms["kl"]) / \
            terms["num_tokens"]
        assert float(terms["kl"]) > 0
        assert float(terms["loss"]) == pytest.approx(float(expected), rel=1e-5)
    model.optimizer.iterations.assign(0)
    terms = model.objective(batch, training=False)              # evaluation: full KL
    expected = (terms["token_nll"] + terms["stop_nll"] + terms["kl"]) / terms["num_tokens"]
    assert float(terms["loss"]) == pytest.approx(float(expected), rel=1e-5)


def test_defaults_keep_the_elbo_and_config():
    model = _tiny()
    config = model.get_config()
    assert (config["kl_warmup_steps"], config["decoder_init"]) == (0, "random")
    model.compile(optimizer=keras.optimizers.Adam(1e-3))
    model.optimizer.build(model.trainable_variables)
    terms = model.objective(_batch(1), training=True)
    expected = (terms["token_nll"] + terms["stop_nll"] + terms["kl"]) / terms["num_tokens"]
    assert float(terms["loss"]) == pytest.approx(float(expected), rel=1e-6)


def test_lda_start_of_the_topic_bias_and_round_trip(tmp_path):
    beta = np.random.default_rng(2).dirichlet(np.ones(4), size=3)
    model = _tiny(decoder_init="lda", topic_word_init=beta, kl_warmup_steps=5)
    B = np.asarray(model.gate.topic_word)
    np.testing.assert_allclose(B, lda_logits(beta, 3, 4), atol=1e-6)
    # Each row of B ranks the words as the LDA topic does, and its softmax is the topic.
    e = np.exp(B - B.max(axis=1, keepdims=True))
    np.testing.assert_allclose(e / e.sum(axis=1, keepdims=True), beta, atol=1e-6)
    path = tmp_path / "topicrnn.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.get_config() == model.get_config()
    assert (loaded.decoder_init, loaded.kl_warmup_steps) == ("lda", 5)
    np.testing.assert_allclose(np.asarray(loaded.gate.topic_word), B, atol=1e-7)
    batch = _batch(3)
    np.testing.assert_allclose(np.asarray(loaded(batch)), np.asarray(model(batch)), atol=1e-6)


def test_lda_scale_shrinks_the_start_and_keeps_each_topics_ranking(tmp_path):
    beta = np.random.default_rng(3).dirichlet(np.ones(4), size=3)
    full = np.asarray(_tiny(decoder_init="lda", topic_word_init=beta).gate.topic_word)
    model = _tiny(decoder_init="lda", topic_word_init=beta, lda_scale=0.1)
    B = np.asarray(model.gate.topic_word)
    np.testing.assert_allclose(B, 0.1 * lda_logits(beta, 3, 4), atol=1e-6)
    np.testing.assert_allclose(B, 0.1 * full, atol=1e-6)
    np.testing.assert_array_equal(np.argsort(B, axis=1), np.argsort(beta, axis=1))
    # Its softmax is the tempered topic beta^0.1 (renormalised), no longer beta itself.
    tempered = beta ** 0.1 / (beta ** 0.1).sum(axis=1, keepdims=True)
    e = np.exp(B - B.max(axis=1, keepdims=True))
    np.testing.assert_allclose(e / e.sum(axis=1, keepdims=True), tempered, atol=1e-5)
    path = tmp_path / "scaled.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.lda_scale == 0.1 and loaded.get_config() == model.get_config()
    np.testing.assert_allclose(np.asarray(loaded.gate.topic_word), B, atol=1e-7)


def test_streamed_topicrnn_takes_the_same_scaled_lda_start_and_keeps_it_when_saved(tmp_path):
    from tfktopic.models.topicrnn import DocumentTopicRNN
    beta = np.random.default_rng(4).dirichlet(np.ones(4), size=3)
    keras.utils.set_random_seed(0)
    model = DocumentTopicRNN(10, LM_TO_TOPIC, num_topics=3, hidden_dim=8, embedding_dim=8,
                             encoder_units=(8,), seed=1, max_streams=2,
                             decoder_init="lda", topic_word_init=beta, lda_scale=0.1)
    B = np.asarray(model.gate.topic_word)
    np.testing.assert_allclose(B, 0.1 * lda_logits(beta, 3, 4), atol=1e-6)
    path = tmp_path / "doc_topicrnn.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert (loaded.decoder_init, loaded.lda_scale) == ("lda", 0.1)
    assert loaded.get_config() == model.get_config()
    np.testing.assert_allclose(np.asarray(loaded.gate.topic_word), B, atol=1e-7)
    with pytest.raises(ValueError, match="lda_scale"):
        DocumentTopicRNN(10, LM_TO_TOPIC, num_topics=3, hidden_dim=8, lda_scale=0)


def test_coherent_preset_is_medium_with_the_scaled_lda_start():
    from tfktopic.models.topicrnn.document import DocumentTopicRNN
    from tfktopic.models.topicrnn.presets import PRESETS

    coherent, medium = PRESETS["coherent"], PRESETS["medium"]
    assert coherent["model"] == {**medium["model"], "decoder_init": "lda", "lda_scale": 0.1}
    assert coherent["data"] == medium["data"] and coherent["training"] == medium["training"]
    assert "decoder_init" not in medium["model"]
    # The streamed model takes the same LDA start, so it has the same `coherent` preset.
    assert DocumentTopicRNN.presets["coherent"]["model"] == {
        k: v for k, v in coherent["model"].items() if k != "cell"}
    beta = np.random.default_rng(4).dirichlet(np.ones(4), size=50)
    model = TopicRNN.from_preset("coherent", 10, LM_TO_TOPIC, hidden_dim=8, embedding_dim=8,
                                 encoder_units=(8,), topic_word_init=beta)
    assert (model.decoder_init, model.lda_scale, model.num_topics) == ("lda", 0.1, 50)
    np.testing.assert_allclose(np.asarray(model.gate.topic_word),
                               0.1 * lda_logits(beta, 50, 4), atol=1e-6)


@pytest.mark.parametrize("kwargs, name", [
    ({"kl_warmup_steps": -2}, "kl_warmup_steps"),
    ({"lda_scale": 0.0}, "lda_scale"),
    ({"lda_scale": float("nan")}, "lda_scale"),
    ({"decoder_init": "nmf"}, "decoder_init"),
    ({"decoder_init": "lda"}, "topic_word_init"),
    ({"topic_word_init": np.ones((3, 4))}, "decoder_init"),
    ({"decoder_init": "lda", "topic_word_init": np.ones((3, 5))}, "topic_word_init"),
])
def test_bad_arguments_name_themselves(kwargs, name):
    with pytest.raises(ValueError, match=name):
        _tiny(**kwargs)
