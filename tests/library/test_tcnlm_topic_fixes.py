"""TCNLM's topic-quality options (issue 14): KL annealing, topic-model warm-up, LDA decoder."""

import keras
import numpy as np
import pytest

from tfktopic.layers.topic_decoder import lda_logits
from tfktopic.models.tcnlm.model import TCNLM


def _tiny(**kwargs):
    keras.utils.set_random_seed(0)
    args = dict(num_topics=4, embedding_dim=8, hidden_dim=8, ntm_units=(8,), seed=1)
    return TCNLM(30, 12, **{**args, **kwargs})


def _batch(seed=0, batch=3, length=5):
    rng = np.random.default_rng(seed)
    tokens = rng.integers(4, 30, size=(batch, length)).astype(np.int32)
    return {"tokens": tokens, "targets": np.roll(tokens, -1, axis=1),
            "mask": np.ones((batch, length), np.float32),
            "context_bow": rng.poisson(1.0, size=(batch, 12)).astype(np.float32)}


def _lm_weights(model):
    return [keras.ops.convert_to_numpy(w) for w in model.trainable_weights
            if "topic_model" not in w.path]


def _ntm_weights(model):
    return [keras.ops.convert_to_numpy(w) for w in model.trainable_weights
            if "topic_model" in w.path]


def test_kl_annealing_schedule_and_its_place_in_the_loss():
    model = _tiny(kl_warmup_steps=4)
    assert [float(model.kl_weight(s)) for s in (0, 1, 2, 4, 9)] == [0.0, 0.25, 0.5, 1.0, 1.0]
    assert float(_tiny().kl_weight(0)) == 1.0           # default: full KL from step 0
    model.compile(optimizer=keras.optimizers.Adam(1e-3))
    model.optimizer.build(model.trainable_variables)
    batch = _batch()
    for step, weight in ((0, 0.0), (2, 0.5), (7, 1.0)):
        model.optimizer.iterations.assign(step)
        terms = model.objective(batch, training=True)
        expected = (terms["nll_sum"] + terms["tm_nll_sum"] + weight * np.sum(terms["kl"])) / \
            terms["num_tokens"] - model.diversity_weight * terms["diversity"]
        assert float(terms["loss"]) == pytest.approx(float(expected), rel=1e-5)
        assert np.sum(terms["kl"]) > 0
    # Evaluation is never annealed: the full ELBO.
    terms = model.objective(batch, training=False)
    model.optimizer.iterations.assign(0)
    expected = (terms["nll_sum"] + terms["tm_nll_sum"] + np.sum(terms["kl"])) / \
        terms["num_tokens"] - model.diversity_weight * terms["diversity"]
    assert float(terms["loss"]) == pytest.approx(float(expected), rel=1e-5)


def test_topic_warmup_trains_only_the_topic_model_for_n_steps():
    model = _tiny(topic_warmup_steps=2)
    assert [float(model.lm_weight(s)) for s in (0, 1, 2, 5)] == [0.0, 0.0, 1.0, 1.0]
    model.compile(optimizer=keras.optimizers.Adam(1e-2))
    batch = _batch()
    lm_before, ntm_before = _lm_weights(model), _ntm_weights(model)
    for _ in range(2):
        model.train_on_batch(batch)
    assert int(model.optimizer.iterations) == 2
    for before, after in zip(lm_before, _lm_weights(model)):   # LM frozen: zero gradients
        np.testing.assert_array_equal(before, after)
    assert all(not np.array_equal(b, a) for b, a in zip(ntm_before, _ntm_weights(model)))
    terms = model.objective(batch, training=True)            # step 2: joint from now on
    expected = (terms["nll_sum"] + terms["tm_nll_sum"] + np.sum(terms["kl"])) / \
        terms["num_tokens"] - model.diversity_weight * terms["diversity"]
    assert float(terms["loss"]) == pytest.approx(float(expected), rel=1e-5)
    model.train_on_batch(batch)
    assert any(not np.array_equal(b, a) for b, a in zip(lm_before, _lm_weights(model)))


def test_warmup_loss_leaves_out_the_lm_term():
    model = _tiny(topic_warmup_steps=3)
    model.compile(optimizer=keras.optimizers.Adam(1e-3))
    model.optimizer.build(model.trainable_variables)
    terms = model.objective(_batch(1), training=True)
    expected = (terms["tm_nll_sum"] + np.sum(terms["kl"])) / terms["num_tokens"] - \
        model.diversity_weight * terms["diversity"]
    assert float(terms["loss"]) == pytest.approx(float(expected), rel=1e-5)
    assert float(terms["nll_sum"]) > 0                      # still reported (perplexity)


def test_defaults_keep_the_paper_objective_exactly():
    model = _tiny()
    config = model.get_config()
    assert (config["kl_warmup_steps"], config["topic_warmup_steps"], config["decoder_init"]) \
        == (0, 0, "random")
    model.compile(optimizer=keras.optimizers.Adam(1e-3))
    model.optimizer.build(model.trainable_variables)
    terms = model.objective(_batch(2), training=True)
    expected = (terms["nll_sum"] + terms["tm_nll_sum"] + np.sum(terms["kl"])) / \
        terms["num_tokens"] - 0.1 * terms["diversity"]
    assert float(terms["loss"]) == pytest.approx(float(expected), rel=1e-6)


def test_lda_decoder_starts_at_the_given_topic_word_matrix():
    beta = np.random.default_rng(3).dirichlet(np.full(12, 0.3), size=4)
    beta[0, 5] = 0.0                                        # a zero: floored, not -inf
    beta[0] /= beta[0].sum()
    model = _tiny(decoder_init="lda", topic_word_init=beta)
    np.testing.assert_allclose(model.beta(), beta, atol=1e-6)
    assert np.isfinite(np.asarray(model.topic_model.decoder.logits)).all()
    # Unnormalised rows are normalised.
    np.testing.assert_allclose(_tiny(decoder_init="lda", topic_word_init=3 * beta).beta(),
                               beta, atol=1e-6)
    logits = lda_logits(beta, 4, 12)
    np.testing.assert_allclose(logits.mean(axis=1), 0.0, atol=1e-5)



def test_round_trip_keeps_the_new_arguments(tmp_path):
    beta = np.random.default_rng(4).dirichlet(np.ones(12), size=4)
    model = _tiny(kl_warmup_steps=7, topic_warmup_steps=3, decoder_init="lda",
                  topic_word_init=beta)
    path = tmp_path / "tcnlm.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.get_config() == model.get_config()
    assert (loaded.kl_warmup_steps, loaded.topic_warmup_steps, loaded.decoder_init) == \
        (7, 3, "lda")
    np.testing.assert_allclose(loaded.beta(), beta, atol=1e-6)
    batch = _batch(5)
    np.testing.assert_allclose(np.asarray(loaded(batch)), np.asarray(model(batch)), atol=1e-6)


@pytest.mark.parametrize("kwargs, name", [
    ({"kl_warmup_steps": -1}, "kl_warmup_steps"),
    ({"topic_warmup_steps": 1.5}, "topic_warmup_steps"),
    ({"decoder_init": "nmf"}, "decoder_init"),
    ({"decoder_init": "lda"}, "topic_word_init"),
    ({"topic_word_init": np.ones((4, 12))}, "decoder_init"),
    ({"decoder_init": "lda", "topic_word_init": np.ones((4, 11))}, "topic_word_init"),
    ({"decoder_init": "lda", "topic_word_init": -np.ones((4, 12))}, "topic_word_init"),
])
def test_bad_arguments_name_themselves(kwargs, name):
    with pytest.raises(ValueError, match=name):
        _tiny(**kwargs)
