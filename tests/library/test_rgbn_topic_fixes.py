"""rGBN-RNN / GBN-RNN topic-quality options (issue 14): the LDA start of Phi^1
(``decoder_init="lda"``, `TLASGRTopics` ``phi_init``) and the ``coherent`` preset."""

import keras
import numpy as np
import pytest

from tfktopic.bayes.tlasgr import TLASGRTopics, initial_phi
from tfktopic.models.rgbn import GBN_PRESETS, PRESETS, RGBNRNN

V, VC, J = 30, 12, 3


def _tiny(**kwargs):
    keras.utils.set_random_seed(0)
    args = dict(num_documents=50, num_layers=2, hidden_sizes=(8, 6), topic_sizes=(4, 3),
                embedding_dim=8, dropout=0.0, seed=3)
    return RGBNRNN(V, VC, **{**args, **kwargs})


def _batch(seed=0, batch=2, length=5):
    rng = np.random.default_rng(seed)
    tokens = rng.integers(4, V, size=(batch, J, length)).astype(np.int32)
    return {"tokens": tokens, "targets": np.roll(tokens, -1, axis=-1),
            "mask": np.ones((batch, J, length), np.float32),
            "context_bow": rng.poisson(1.0, size=(batch, J, VC)).astype(np.float32)}


def _beta(seed=3, topics=4):
    return np.random.default_rng(seed).dirichlet(np.full(VC, 0.3), size=topics)


def test_phi_init_sets_phi1_and_leaves_every_other_start_as_before():
    beta = _beta()
    beta[0, 5] = 0.0                                       # a zero: floored (gets counts)
    beta[0] /= beta[0].sum()
    default = TLASGRTopics(VC, (4, 3), 50, seed=5, name="topics")
    started = TLASGRTopics(VC, (4, 3), 50, seed=5, phi_init=beta, name="topics")
    phi = np.asarray(started.phi[0])
    np.testing.assert_allclose(phi, beta.T, atol=1e-6)
    assert phi.min() > 0
    np.testing.assert_allclose(phi.sum(0), 1.0, atol=1e-6)
    # The random draws of the other matrices are unchanged (Phi^2, Pi, counters).
    for a, b in zip(default.weights[1:], started.weights[1:]):
        assert a.path == b.path
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    # [V, K] columns and unnormalised rows give the same start; not in the config.
    np.testing.assert_allclose(initial_phi(3 * beta.T, VC, 4), initial_phi(beta, VC, 4),
                               rtol=1e-6, atol=1e-9)
    assert "phi_init" not in started.get_config()


def test_lda_start_puts_the_matrix_into_phi1_and_defaults_keep_the_paper_start():
    beta = _beta()
    model = _tiny(decoder_init="lda", topic_word_init=beta)
    np.testing.assert_allclose(model.topic_word_matrix(0), beta, atol=1e-6)
    assert model.topics(3)[0].tolist() == np.argsort(-beta[0], kind="stable")[:3].tolist()
    # Layer 2 goes through Phi^1 Phi^2 with the same random Phi^2 as the default model.
    default = _tiny()
    assert default.decoder_init == "random"
    np.testing.assert_array_equal(np.asarray(model.topic_model.phi[1]),
                                  np.asarray(default.topic_model.phi[1]))
    assert not np.allclose(default.topic_word_matrix(0), beta, atol=1e-2)
    # Everything but Phi^1 is the default model's (same seed): same networks.
    for a, b in zip(default.trainable_weights, model.trainable_weights):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_lda_start_trains_and_the_mcmc_moves_phi_from_it():
    beta = _beta()
    model = _tiny(decoder_init="lda", topic_word_init=beta, recurrent=False)
    model.compile(optimizer=keras.optimizers.Adam(1e-3))
    model.train_on_batch(_batch())
    phi = model.topic_word_matrix(0)
    assert np.isfinite(phi).all() and not np.allclose(phi, beta, atol=1e-6)
    np.testing.assert_allclose(phi.sum(1), 1.0, atol=1e-5)



def test_round_trip_keeps_the_lda_start_and_its_label(tmp_path):
    beta = _beta(4)
    model = _tiny(decoder_init="lda", topic_word_init=beta)
    model.compile(optimizer=keras.optimizers.Adam(1e-3))
    path = tmp_path / "rgbn.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.get_config() == model.get_config()
    assert loaded.decoder_init == "lda" and loaded.get_config()["decoder_init"] == "lda"
    np.testing.assert_allclose(loaded.topic_word_matrix(0), beta, atol=1e-6)
    batch = _batch(5)
    np.testing.assert_allclose(np.asarray(loaded(batch)), np.asarray(model(batch)), atol=1e-5)
    # A config without the new key (models saved before it existed) gives the default.
    config = model.get_config()
    config.pop("decoder_init")
    assert RGBNRNN.from_config(config).decoder_init == "random"


def test_coherent_preset_is_medium_with_the_lda_start_and_small_mcmc_steps():
    coherent, medium = PRESETS["coherent"], PRESETS["medium"]
    assert coherent["model"] == {**medium["model"], "decoder_init": "lda",
                                 "tlasgr": {"step_size": 0.02}}
    assert coherent["data"] == medium["data"] and coherent["training"] == medium["training"]
    assert "decoder_init" not in medium["model"] and "tlasgr" not in medium["model"]
    assert GBN_PRESETS["coherent"]["model"]["recurrent"] is False
    # The preset builds a model whose sampler takes the small steps from the LDA start.
    model = RGBNRNN.from_preset("coherent", V, VC, num_documents=50, num_layers=1,
                                hidden_sizes=(8,), embedding_dim=8,
                                topic_word_init=_beta(topics=100))
    assert model.topic_model.step_size == 0.02 and model.decoder_init == "lda"
    assert float(model.topic_model.schedule(0)[0]) == pytest.approx(0.02)
    np.testing.assert_allclose(model.topic_word_matrix(0), _beta(topics=100), atol=1e-6)


@pytest.mark.parametrize("kwargs, name", [
    ({"decoder_init": "nmf"}, "decoder_init"),
    ({"decoder_init": "lda"}, "topic_word_init"),
    ({"topic_word_init": np.ones((4, VC))}, "decoder_init"),
    ({"decoder_init": "lda", "topic_word_init": np.ones((4, VC - 1))}, "phi_init"),
    ({"decoder_init": "lda", "topic_word_init": -np.ones((4, VC))}, "phi_init"),
    ({"tlasgr": {"phi_init": np.ones((VC, 4))}}, "topic_word_init"),
])
def test_bad_arguments_name_themselves(kwargs, name):
    with pytest.raises(ValueError, match=name):
        _tiny(**kwargs)
