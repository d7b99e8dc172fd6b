"""Tests of the TLASGR-MCMC sampler of (r)GBN topics (tfktopic.bayes.tlasgr, .augmentation;
the counter-based generator's and the samplers' own tests are in tests/test_bayes_random.py).

The tests marked `backends` also run under JAX (the keras.ops reference augmentation, a
float32 simplex step); the others check TensorFlow's tracing, tf.distribute, tf.train
checkpoints or record the draws of an eager sentence loop.

Topic recovery uses documents generated from a known (r)GBN and runs the
sampler with the generator's **true theta** given (theta is the encoder's job
in the model; with theta fixed the topic labels are identified, so the
Hungarian matching must come out as the identity).
"""

import ast
import json
import os
import pathlib
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.bayes_backend_cases import compiled_update
from tfktopic.bayes.augmentation import binomial, crt, multinomial_split
from tfktopic.bayes.counter_random import stateless_standard_normal
from tfktopic.bayes.tlasgr import (_CRT, _MULTINOMIAL, _TEMPORAL, REALMIN, TLASGRTopics,
                                    _replica_layout)

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]

try:
    from scipy.optimize import linear_sum_assignment
except ImportError:  # pragma: no cover - scipy is a test dependency in practice
    linear_sum_assignment = None


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------
def _column_cosines(estimate, truth):
    a = estimate / np.linalg.norm(estimate, axis=0)
    b = truth / np.linalg.norm(truth, axis=0)
    return b.T @ a  # [true topic, estimated topic]


def _matched_cosine(estimate, truth):
    """Mean cosine of true/estimated columns under the best one-to-one matching.

    Hungarian matching (scipy) when available, else greedy. Returns
    (mean matched cosine, estimated column matched to each true column).
    """
    sim = _column_cosines(estimate, truth)
    if linear_sum_assignment is not None:
        rows, cols = linear_sum_assignment(-sim)
    else:
        rows, cols, free = np.arange(len(sim)), np.zeros(len(sim), int), set(range(len(sim)))
        for r in rows:
            cols[r] = max(free, key=lambda c: sim[r, c])
            free.remove(cols[r])
    return float(sim[rows, cols].mean()), cols


def _direct_cosine(estimate, truth):
    return float(np.mean(np.diag(_column_cosines(estimate, truth))))


def _generate(rng, vocab_size, topic_sizes, num_docs, num_sentences, recurrent,
              top_shape=0.5, top_mean=30.0):
    """Documents from an (r)GBN with known Phi, Pi (reference rgbn_rnn.md §1.1).

    theta^L_1 (and every theta^L_j without recurrence) ~ Gam(top_shape, mean
    top_mean): the top prior is not learned by the sampler, so it is chosen
    to give ~100 tokens per sentence and documents that differ. Below:
    theta^l_j ~ Gam(Phi^{l+1} theta^{l+1}_j + Pi^l theta^l_{j-1}, 1),
    d_j ~ Pois(Phi^1 theta^1_j). Phi^1 columns ~ Dir(0.05) (peaked topics),
    Phi^l (l > 1) ~ Dir(0.3); Pi^l = 0.8 * cyclic shift + 0.2 * Dir(1)
    (far from both the uniform and the identity start).
    """
    rows = (vocab_size,) + tuple(topic_sizes[:-1])
    phis = [rng.dirichlet(np.full(r, 0.05 if l == 0 else 0.3), size=k).T
            for l, (r, k) in enumerate(zip(rows, topic_sizes))]
    pis = [0.8 * np.roll(np.eye(k), 1, axis=0) + 0.2 * rng.dirichlet(np.ones(k), size=k).T
           for k in topic_sizes]
    top = len(topic_sizes) - 1
    thetas = [np.zeros((num_docs, num_sentences, k)) for k in topic_sizes]
    for j in range(num_sentences):
        for l in reversed(range(len(topic_sizes))):
            if l == top and (j == 0 or not recurrent):
                thetas[l][:, j] = rng.gamma(top_shape, top_mean / top_shape,
                                            size=(num_docs, topic_sizes[l]))
                continue
            shape = np.zeros((num_docs, topic_sizes[l]))
            if l < top:
                shape += thetas[l + 1][:, j] @ phis[l + 1].T
            if recurrent and j > 0:
                shape += thetas[l][:, j - 1] @ pis[l].T
            thetas[l][:, j] = rng.gamma(np.maximum(shape, 1e-6), 1.0)
    bow = rng.poisson(thetas[0] @ phis[0].T).astype("float32")
    return phis, pis, [t.astype("float32") for t in thetas], bow


def _run_sampler(topics, bow, thetas, steps, batch_size, rng):
    update = compiled_update(topics)
    for _ in range(steps):
        idx = rng.choice(len(bow), batch_size, replace=False)
        update(bow[idx], [t[idx] for t in thetas])


# --------------------------------------------------------------------------
# 1. The augmentation of a batch (the samplers themselves: tests/test_bayes_random.py)
# --------------------------------------------------------------------------
@pytest.mark.backends
def test_augmented_counts_do_not_depend_on_how_the_batch_is_split():
    """The draws are keyed on global document positions: two half batches with
    offsets sum to exactly the full batch's counts (the MirroredStrategy rule)."""
    rng = np.random.default_rng(1)
    _, _, thetas, bow = _generate(rng, 30, (5, 3), 6, 4, recurrent=True)
    topics = TLASGRTopics(30, (5, 3), num_documents=60, seed=4)
    step = tf.constant(3, tf.int64)
    full = topics.augment(bow, thetas, step=step)
    first = topics.augment(bow[:4], [t[:4] for t in thetas], step=step, offset=0)
    second = topics.augment(bow[4:], [t[4:] for t in thetas], step=step, offset=4)
    flat = lambda counts: [np.asarray(c) for group in counts for c in group]
    for whole, a, b in zip(flat(full), flat(first), flat(second)):
        np.testing.assert_array_equal(whole, a + b)
    assert sum(c.sum() for c in flat(full)) > 0
    # ... and a different step draws differently.
    other = flat(topics.augment(bow, thetas, step=tf.constant(4, tf.int64)))
    assert any(not np.array_equal(a, b) for a, b in zip(flat(full), other))


# --------------------------------------------------------------------------
# 2. The Riemannian simplex update against a NumPy transcription of §4.3
# --------------------------------------------------------------------------
def _numpy_tlasgr(x, counts, m, prior, t, rho, floor, noise):
    """Reference rgbn_rnn.md §4.3, line by line (float64)."""
    eps = ((20 + t + 1) / 21) ** -0.7
    scaled = rho * counts
    m = scaled.sum(0) if t == 0 else (1 - (t + 1) ** -0.9) * m + (t + 1) ** -0.9 * scaled.sum(0)
    m_bar = np.maximum(m, floor)
    post = scaled + prior
    new = x + eps / m_bar * (post - post.sum(0) * x) + np.sqrt(eps * 2 * x / m_bar) * noise
    new = new - (new.sum(0) - 1) * x
    if (new <= 0).any():
        new = np.maximum(new, 0)
        new = new / np.maximum(new.sum(0), REALMIN)
    return new, m


def _recorded_augment(monkeypatch, topics, bow, thetas):
    """Run `topics.augment` eagerly, recording every draw in call order: (key, sampler,
    its second argument (the CRT's concentration), its counts, its result)."""
    from tfktopic.bayes import tlasgr
    calls = []

    def recording(name, sampler):
        def wrapped(*args):          # (counts, argument(s)..., key, offset), all positional
            result = sampler(*args)
            calls.append((tuple(int(w) for w in np.asarray(args[-2])), name, np.asarray(args[1], np.float64),
                          np.asarray(args[0]), result))
            return result
        return wrapped

    for name, sampler in (("crt", crt), ("binomial", binomial),
                          ("multinomial_split", multinomial_split)):
        monkeypatch.setattr(tlasgr, name, recording(name, sampler))
    topics.augment(bow, list(thetas))
    return calls


@pytest.mark.parametrize("recurrent", [True, False])
def test_crt_concentrations_are_tau0_times_the_prior_shapes(monkeypatch, recurrent):
    """Reference §4.2: the tables of layer l at sentence j are CRT(m, tau0 (Pi^l
    theta^l_{j-1} + Phi^{l+1} theta^{l+1}_j)), sentence 1 without the Pi term, the top
    layer without the Phi term; recomputed here in numpy with tau0 = 2.5 (at the default
    tau0 = 1, multiplying and dividing by it are the same)."""
    rng = np.random.default_rng(4)
    B, J, V, K = 3, 4, 12, (4, 3)
    topics = TLASGRTopics(V, K, num_documents=30, seed=1, tau0=2.5, recurrent=recurrent)
    for var in topics.phi + topics.pi:
        var.assign(rng.dirichlet(np.ones(var.shape[0]), size=var.shape[1]).T.astype("float32"))
    bow = rng.poisson(2.0, size=(B, J, V)).astype("float32")
    thetas = [rng.gamma(1.0, 1.0, size=(B, J, k)).astype("float32") for k in K]
    calls = _recorded_augment(monkeypatch, topics, bow, thetas)
    concentration = {key: arg for key, name, arg, _, _ in calls if name == "crt"}
    phi2 = np.asarray(topics.phi[1]).astype(np.float64)
    up = thetas[1].astype(np.float64) @ phi2.T                          # [B, J, K1]
    key = lambda l, j: tuple(int(w) for w in np.asarray(
        topics._key(tf.constant(0, tf.int64), l, _CRT, j)))
    if not recurrent:
        assert set(concentration) == {key(0, 0)}
        np.testing.assert_allclose(concentration[key(0, 0)], 2.5 * up, rtol=1e-5)
        return
    pis = [np.asarray(v).astype(np.float64) for v in topics.pi]
    time = [np.asarray(t, np.float64)[:, :-1] @ pi.T for t, pi in zip(thetas, pis)]  # j >= 1
    expected = {key(0, 0): 2.5 * up[:, 0]}
    for j in range(1, J):
        expected[key(0, j)] = 2.5 * (time[0][:, j - 1] + up[:, j])
        expected[key(1, j)] = 2.5 * time[1][:, j - 1]
    assert set(concentration) == set(expected)
    for k in expected:
        np.testing.assert_allclose(concentration[k], expected[k], rtol=1e-5)


def test_the_customers_of_a_sentence_are_its_own_counts_plus_the_tables_handed_back(
        monkeypatch):
    """Reference §4.2 b: walking back from sentence J, the CRT customers of topic k at
    sentence j are its latent counts m_{jk} plus the temporal tables that sentence j+1
    allocated to k (none at j = J); sentence 1's are handed on to its own CRT (lower
    layers). Checked draw by draw on the recorded calls of a 2-layer augmentation."""
    rng = np.random.default_rng(6)
    J = 5
    topics = TLASGRTopics(12, (4, 3), num_documents=30, seed=2)
    for var in topics.phi + topics.pi:
        var.assign(rng.dirichlet(np.ones(var.shape[0]), size=var.shape[1]).T.astype("float32"))
    bow = rng.poisson(4.0, size=(3, J, 12)).astype("float32")
    thetas = [rng.gamma(2.0, 1.0, size=(3, J, k)).astype("float32") for k in (4, 3)]
    calls = {call[0]: call for call in _recorded_augment(monkeypatch, topics, bow, thetas)}
    key = lambda l, phase, j=0: tuple(int(w) for w in np.asarray(
        topics._key(tf.constant(0, tf.int64), l, phase, j)))
    handed = 0
    for l in (0, 1):
        latent = np.asarray(calls[key(l, _MULTINOMIAL)][4][1])   # the topic split [B, J, K]
        back = np.zeros_like(latent[:, 0])
        for j in range(J - 1, 0, -1):
            np.testing.assert_array_equal(calls[key(l, _CRT, j)][3], latent[:, j] + back)
            back = np.asarray(calls[key(l, _TEMPORAL, j)][4][1])[:, 0]   # to sentence j-1
            handed += back.sum()
        if l == 0:
            np.testing.assert_array_equal(calls[key(l, _CRT, 0)][3], latent[:, 0] + back)
    assert handed > 0                                            # tables were handed back


def test_every_draw_of_an_augmentation_has_its_own_random_stream(monkeypatch):
    """Two draws on one key would reuse the same uniforms for the same documents and
    entries: correlated draws. Every sampler call of one `augment` gets a distinct key."""
    rng = np.random.default_rng(5)
    topics = TLASGRTopics(12, (4, 3), num_documents=30, seed=1)
    bow = rng.poisson(2.0, size=(3, 4, 12)).astype("float32")
    thetas = [rng.gamma(1.0, 1.0, size=(3, 4, k)).astype("float32") for k in (4, 3)]
    keys = [call[0] for call in _recorded_augment(monkeypatch, topics, bow, thetas)]
    # a topic split per layer; 3 backward steps x (CRT, time/up split, allocation) in layer
    # 1 and x (CRT, allocation) in the top layer; the first sentence's CRT of layer 1
    assert len(keys) == 2 + 3 * 3 + 3 * 2 + 1
    assert len(set(keys)) == len(keys)


@pytest.mark.parametrize("step", [0, 5])
@pytest.mark.parametrize("floor", [None, 2.2e-20])
@pytest.mark.backends
def test_apply_counts_matches_numpy_reference(step, floor):
    rng = np.random.default_rng(step)
    topics = TLASGRTopics(12, (4, 3), num_documents=100, seed=21, preconditioner_floor=floor)
    topics.iterations.assign(step)
    phi_counts = [rng.poisson(3.0, size=(12, 4)).astype("float32"),
                  rng.poisson(2.0, size=(4, 3)).astype("float32")]
    phi_counts[0][:, 2] = 0                       # an empty topic: the floor matters
    pi_counts = [rng.poisson(1.0, size=(4, 4)).astype("float32"),
                 rng.poisson(1.0, size=(3, 3)).astype("float32")]
    # Random (not uniform) simplex columns: at Pi's uniform start x = 1/rows, so the
    # prior's part of the drift, prior * (1 - rows * x), vanishes and a wrong pi_prior
    # would go unseen.
    for var in topics.phi + topics.pi:
        var.assign(rng.dirichlet(np.ones(var.shape[0]), size=var.shape[1]).T.astype("float32"))
    old = [np.asarray(v).astype("float64") for v in topics.phi + topics.pi]
    pre = [rng.uniform(50, 500, size=v.shape[1]) for v in topics.phi + topics.pi]
    for var, value in zip(topics.phi_preconditioners + topics.pi_preconditioners, pre):
        var.assign(value.astype("float32"))
    stats = topics.apply_counts(phi_counts, pi_counts, batch_size=10)
    assert int(np.asarray(topics.iterations)) == step + 1
    priors = [0.1, 0.1, 1.0, 1.0]
    for index, (var, counts) in enumerate(zip(topics.phi + topics.pi, phi_counts + pi_counts)):
        noise = np.asarray(stateless_standard_normal(var.shape, 21, index, "float64", step=step))
        floor_value = priors[index] * var.shape[0] if floor is None else floor
        expected, m = _numpy_tlasgr(old[index], counts.astype("float64"),
                                    np.float32(pre[index]).astype("float64"), priors[index],
                                    step, 100 / 10, floor_value, noise)
        np.testing.assert_allclose(np.asarray(var), expected, atol=2e-6)
        precond = (topics.phi_preconditioners + topics.pi_preconditioners)[index].numpy()
        np.testing.assert_allclose(precond, m, rtol=1e-6)
        name = ["phi1", "phi2", "pi1", "pi2"][index]
        assert float(stats[f"{name}_change"]) == pytest.approx(
            np.abs(expected - old[index]).max(), rel=1e-4, abs=1e-6)
    assert stats["phi1_counts"] == phi_counts[0].sum()
    assert float(stats["tlasgr_step_size"]) == pytest.approx(((21 + step) / 21) ** -0.7)


# --------------------------------------------------------------------------
# 3. Topic recovery on generated documents (true theta given)
# --------------------------------------------------------------------------
@pytest.mark.backends
def test_recovers_the_topics_of_a_one_layer_gbn():
    rng = np.random.default_rng(0)
    phis, _, thetas, bow = _generate(rng, 40, (4,), 200, 4, recurrent=False)
    topics = TLASGRTopics(40, (4,), num_documents=200, recurrent=False, seed=0)
    chance, _ = _matched_cosine(np.asarray(topics.phi[0]), phis[0])   # random U(0,1) start
    _run_sampler(topics, bow, thetas, steps=60, batch_size=20, rng=rng)
    score, assignment = _matched_cosine(np.asarray(topics.phi[0]), phis[0])
    assert chance < 0.5, chance
    assert score > 0.97, (score, chance)
    np.testing.assert_array_equal(assignment, np.arange(4))   # labels fixed by theta
    assert topics.pi == []


@pytest.mark.backends
def test_recovers_phi_and_pi_of_a_two_layer_recurrent_gbn():
    rng = np.random.default_rng(1)
    phis, pis, thetas, bow = _generate(rng, 40, (6, 3), 200, 4, recurrent=True)
    topics = TLASGRTopics(40, (6, 3), num_documents=200, recurrent=True, seed=1)
    phi_chance = [_matched_cosine(np.asarray(p), t)[0] for p, t in zip(topics.phi, phis)]
    # Chance: the uniform start for Pi, the random U(0, 1) start for Phi.
    pi_chance = [_direct_cosine(np.asarray(p), t) for p, t in zip(topics.pi, pis)]
    _run_sampler(topics, bow, thetas, steps=80, batch_size=20, rng=rng)
    for layer, (estimate, truth) in enumerate(zip(topics.phi, phis)):
        score, assignment = _matched_cosine(np.asarray(estimate), truth)
        assert score > 0.95, (layer, score, phi_chance)
        np.testing.assert_array_equal(assignment, np.arange(truth.shape[1]))
    for layer, (estimate, truth) in enumerate(zip(topics.pi, pis)):
        score = _direct_cosine(np.asarray(estimate), truth)
        assert score > 0.9, (layer, score, pi_chance)
    assert max(pi_chance) < 0.75 and max(phi_chance) < 0.8, (pi_chance, phi_chance)


@pytest.mark.backends
def test_identity_pi_is_stuck_on_dense_theta_and_uniform_start_recovers():
    """The released code starts Pi at the identity. With dense theta (Gam(30, 1)
    at the top) the off-diagonal entries never receive temporal counts; the
    default `pi_init="uniform"` start recovers the cyclic Pi."""
    rng = np.random.default_rng(2)
    _, pis, thetas, bow = _generate(rng, 40, (4,), 200, 4, recurrent=True, top_shape=30.0)
    scores = {}
    for init in ("identity", "uniform"):
        topics = TLASGRTopics(40, (4,), num_documents=200, seed=2, pi_init=init)
        _run_sampler(topics, bow, thetas, steps=100, batch_size=20,
                     rng=np.random.default_rng(3))
        scores[init] = _direct_cosine(np.asarray(topics.pi[0]), pis[0])
    assert scores["identity"] < 0.3 and scores["uniform"] > 0.85, scores


# --------------------------------------------------------------------------
# 4. Simplex, finiteness, shapes of the generative quantities
# --------------------------------------------------------------------------
@pytest.mark.backends
def test_columns_stay_on_the_simplex_over_1000_updates_without_nan():
    rng = np.random.default_rng(4)
    vocab, sizes, batch, sentences = 20, (4, 3), 4, 3
    topics = TLASGRTopics(vocab, sizes, num_documents=1000, seed=4)

    update = compiled_update(topics)
    worst_sum, worst_min = 0.0, 0.0
    for index in range(1000):
        bow = rng.poisson(rng.uniform(0.0, 3.0), size=(batch, sentences, vocab))
        bow[0] = 0                                         # an empty document
        thetas = [rng.gamma(0.3, 10.0, size=(batch, sentences, k)) for k in sizes]
        thetas[0][..., 0] = 0.0                            # a dead topic: zero counts
        stats = update(bow.astype(np.float32), [t.astype(np.float32) for t in thetas])
        values = [np.asarray(v) for v in topics.phi + topics.pi]      # after the update
        finite = (all(np.all(np.isfinite(v)) for v in values)
                  and all(np.isfinite(np.asarray(s)) for s in stats.values()))
        assert finite, index
        sum_error = max(np.abs(v.sum(0) - 1.0).max() for v in values)
        worst_sum, worst_min = max(worst_sum, sum_error), min(worst_min, min(v.min() for v in values))
    assert worst_sum < 1e-5 and worst_min >= 0.0, (worst_sum, worst_min)
    for var in topics.phi_preconditioners + topics.pi_preconditioners:
        assert np.all(np.isfinite(np.asarray(var)))
    assert int(np.asarray(topics.iterations)) == 1000


@pytest.mark.backends
def test_gamma_shapes_poisson_rate_and_phi_products():
    rng = np.random.default_rng(5)
    sizes = (5, 4, 3)
    thetas = [rng.gamma(1.0, 1.0, size=(2, 4, k)).astype("float32") for k in sizes]
    for recurrent in (True, False):
        topics = TLASGRTopics(9, sizes, num_documents=10, recurrent=recurrent, seed=5)
        for var in topics.pi:  # a non-trivial Pi
            x = rng.uniform(size=var.shape)
            var.assign((x / x.sum(0)).astype("float32"))
        phi = [np.asarray(v) for v in topics.phi]
        pi = [np.asarray(v) for v in topics.pi]
        rate, shapes = topics(thetas)
        np.testing.assert_allclose(np.asarray(rate), thetas[0] @ phi[0].T, rtol=1e-5)
        for l, shape in enumerate(shapes):
            expected = np.ones_like(thetas[l]) if l == 2 else thetas[l + 1] @ phi[l + 1].T
            if recurrent:
                previous = thetas[l][:, :-1] @ pi[l].T
                if l == 2:
                    expected[:, 1:] = previous
                else:
                    expected[:, 1:] += previous
            np.testing.assert_allclose(np.asarray(shape), expected, rtol=1e-5)
        products = [np.asarray(p) for p in topics.phi_products()]
        np.testing.assert_allclose(products[2], phi[0] @ phi[1] @ phi[2], rtol=1e-5)
        assert [p.shape for p in products] == [(9, 5), (9, 4), (9, 3)]
        for p in products:
            np.testing.assert_allclose(p.sum(0), 1.0, atol=1e-5)


def test_update_traces_once_for_dynamic_batch_and_sentence_counts():
    topics = TLASGRTopics(12, (4, 3), num_documents=50, seed=8)
    spec = [tf.TensorSpec((None, None, 12)),
            [tf.TensorSpec((None, None, 4)), tf.TensorSpec((None, None, 3))]]
    update = tf.function(topics.update, input_signature=spec)
    rng = np.random.default_rng(8)
    for batch, sentences in ((3, 5), (2, 1), (1, 2)):   # J = 1: no backward pass
        bow = rng.poisson(2.0, size=(batch, sentences, 12)).astype("float32")
        thetas = [rng.gamma(1.0, 5.0, size=(batch, sentences, k)).astype("float32")
                  for k in (4, 3)]
        stats = update(bow, thetas)
        assert float(stats["phi1_counts"]) == bow.sum()   # every token is assigned
        if sentences == 1:
            assert float(stats["pi1_counts"]) == 0.0
    assert update.experimental_get_tracing_count() == 1
    for var in topics.phi + topics.pi:
        np.testing.assert_allclose(np.asarray(var).sum(0), 1.0, atol=1e-5)


def test_the_sentence_count_check_skips_an_unknown_count_on_either_side():
    """bow and thetas must agree on J when both know it; an unknown J on one side (a
    traced signature) is not an error, a known mismatch is (named)."""
    topics = TLASGRTopics(12, (4, 3), num_documents=50, seed=8)
    update = tf.function(topics.update)
    for bow_j, theta_j in ((None, 4), (4, None)):
        update.get_concrete_function(
            tf.TensorSpec((None, bow_j, 12)),
            [tf.TensorSpec((None, theta_j, 4)), tf.TensorSpec((None, theta_j, 3))])
    # A fresh trace: the one above with theta's J unknown would take this signature as
    # its subtype and not trace again.
    with pytest.raises(ValueError, match=r"thetas\[0\] has 3 sentences but bow has 4"):
        tf.function(topics.update).get_concrete_function(
            tf.TensorSpec((None, 4, 12)),
            [tf.TensorSpec((None, 3, 4)), tf.TensorSpec((None, 3, 3))])


# --------------------------------------------------------------------------
# 5. Saving / checkpointing, update inside fit
# --------------------------------------------------------------------------
@keras.saving.register_keras_serializable(package="tfktopic_tests")
class TopicsOnlyModel(keras.Model):
    """The smallest model whose train_step runs TLASGRTopics.update."""

    def __init__(self, topics_config, **kwargs):
        super().__init__(**kwargs)
        self.topics_config = topics_config
        self.topics = TLASGRTopics(**topics_config)

    def call(self, inputs):
        return self.topics.poisson_rate(inputs["theta_1"])

    def train_step(self, data):
        return self.topics.update(data["bow"], [data["theta_1"], data["theta_2"]])

    def get_config(self):
        return {**super().get_config(), "topics_config": self.topics_config}


def _topic_data(seed, num_docs=12):
    rng = np.random.default_rng(seed)
    _, _, thetas, bow = _generate(rng, 15, (4, 3), num_docs, 3, recurrent=True)
    return {"bow": bow, "theta_1": thetas[0], "theta_2": thetas[1]}


def test_update_runs_in_fit_and_keras_file_restores_state_exactly(tmp_path):
    data = _topic_data(6)
    config = {"vocab_size": 15, "topic_sizes": [4, 3], "num_documents": 12, "seed": 6}
    model = TopicsOnlyModel(config)
    model.compile(jit_compile=False)
    history = model.fit(data, batch_size=4, epochs=2, shuffle=False, verbose=0)
    assert int(np.asarray(model.topics.iterations)) == 6
    assert np.all(np.isfinite(history.history["phi1_change"]))
    model({"theta_1": data["theta_1"][:1]})  # build (the weights already exist)
    path = tmp_path / "topics.keras"
    model.save(path)
    loaded = keras.models.load_model(path)
    assert len(loaded.topics.weights) == len(model.topics.weights) == 9
    for a, b in zip(model.topics.weights, loaded.topics.weights):
        assert a.name == b.name
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    # Resuming continues exactly as the uninterrupted run (the draws are keyed
    # on the restored step counter and seed).
    loaded.compile(jit_compile=False)
    model.fit(data, batch_size=4, epochs=1, shuffle=False, verbose=0)
    loaded.fit(data, batch_size=4, epochs=1, shuffle=False, verbose=0)
    for a, b in zip(model.topics.weights, loaded.topics.weights):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_tf_train_checkpoint_restores_phi_pi_counters_and_preconditioners(tmp_path):
    data = _topic_data(7)
    topics = TLASGRTopics(15, (4, 3), num_documents=12, seed=7)
    update = tf.function(topics.update)
    for start in (0, 6):
        update(data["bow"][start:start + 6],
               [data["theta_1"][start:start + 6], data["theta_2"][start:start + 6]])
    saved = [np.asarray(w).copy() for w in topics.weights]
    prefix = tf.train.Checkpoint(topics=topics).save(str(tmp_path / "ckpt"))
    fresh = TLASGRTopics(15, (4, 3), num_documents=12, seed=7)
    assert not np.array_equal(np.asarray(fresh.phi[0]), saved[0])  # a fresh start differs
    tf.train.Checkpoint(topics=fresh).restore(prefix).assert_consumed()
    for value, w in zip(saved, fresh.weights):
        np.testing.assert_array_equal(value, np.asarray(w))
    assert int(np.asarray(fresh.iterations)) == 2
    assert np.all(np.asarray(fresh.phi_preconditioners[0]) > 0)


@pytest.mark.backends
def test_a_fresh_sampler_starts_on_the_simplex_with_uniform_or_identity_pi():
    """Every column of every Phi^l and Pi^l sums to 1 before any update; Pi^l starts at
    1/K_l everywhere (default) or at the identity (the released code); preconditioners and
    the step counter at 0; weights named by their 1-based layer."""
    for init, expected in (("uniform", lambda k: np.full((k, k), 1.0 / k)),
                           ("identity", np.eye)):
        topics = TLASGRTopics(12, (4, 3), num_documents=5, seed=0, pi_init=init)
        for var in topics.phi + topics.pi:
            np.testing.assert_allclose(np.asarray(var).sum(0), 1.0, rtol=1e-6)
            assert np.asarray(var).min() >= 0
        for var, k in zip(topics.pi, (4, 3)):
            np.testing.assert_allclose(np.asarray(var), expected(k), rtol=1e-6)
        assert [tuple(v.shape) for v in topics.phi] == [(12, 4), (4, 3)]
        for var in topics.phi_preconditioners + topics.pi_preconditioners:
            assert not np.asarray(var).any()
        assert int(np.asarray(topics.iterations)) == 0
        assert [v.path.split("/")[-1] for v in topics.phi + topics.pi] == [
            "phi_1", "phi_2", "pi_1", "pi_2"]


@pytest.mark.backends
def test_get_config_round_trip():
    topics = TLASGRTopics(30, [5, 3], num_documents=99, recurrent=False, seed=3,
                          step_size=0.5, preconditioner_floor=1.0, pi_init="uniform")
    clone = TLASGRTopics.from_config(topics.get_config())
    assert clone.get_config() == topics.get_config()
    np.testing.assert_array_equal(np.asarray(clone.phi[1]), np.asarray(topics.phi[1]))  # same seed


@pytest.mark.backends
def test_defaults_are_the_released_codes_hyperparameters():
    """rgbn_rnn.md §1.1 (tau0 = 1) and §4.3 (eps0 = 1, tau = 20, kappa = 0.7, forgetting
    (t+1)^-0.9, Dir(0.1) on Phi, Dir(1) on Pi)."""
    config = TLASGRTopics(10, (4, 3), num_documents=5).get_config()
    expected = {"tau0": 1.0, "step_size": 1.0, "step_size_tau": 20.0, "step_size_decay": 0.7,
                "forgetting_decay": 0.9, "phi_prior": 0.1, "pi_prior": 1.0,
                "preconditioner_floor": None, "pi_init": "uniform", "recurrent": True}
    assert {key: config[key] for key in expected} == expected


def test_replica_layout_is_no_context_offset_0_and_the_local_batch_on_one_replica():
    ctx, offset, batch = _replica_layout(tf.constant(5))
    assert ctx is None
    assert offset.dtype == tf.int64 and int(offset) == 0
    assert float(batch) == 5.0


_LAYOUT_SCRIPT = textwrap.dedent("""
    import json
    from tfktopic.distribute import split_cpu
    devices = split_cpu(2)
    import tensorflow as tf
    from tfktopic.bayes.tlasgr import _replica_layout

    strategy = tf.distribute.MirroredStrategy(devices)
    local = strategy.experimental_distribute_values_from_function(
        lambda ctx: tf.constant([3, 5][ctx.replica_id_in_sync_group]))
    out = strategy.run(tf.function(lambda n: _replica_layout(n)[1:]), args=(local,))
    print("RESULT" + json.dumps(
        {"offsets": [int(x) for x in strategy.experimental_local_results(out[0])],
         "batches": [float(x) for x in strategy.experimental_local_results(out[1])]}))
""")


def test_replica_layout_gives_each_replica_its_global_offset_and_the_global_batch(tmp_path):
    """Two replicas holding 3 and 5 documents: offsets 0 and 3, global batch 8 on both
    (the augmentation keys each document on its global position)."""
    script = tmp_path / "layout.py"
    script.write_text(_LAYOUT_SCRIPT)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT")][-1]
    assert json.loads(line[len("RESULT"):]) == {"offsets": [0, 3], "batches": [8.0, 8.0]}


@pytest.mark.parametrize("kwargs, name", [
    ({"vocab_size": 0}, "vocab_size"),
    ({"topic_sizes": ()}, "topic_sizes"),
    ({"topic_sizes": (4, 0)}, "topic_sizes"),
    ({"topic_sizes": "abc"}, "topic_sizes"),
    ({"num_documents": 0}, "num_documents"),
    ({"seed": -1}, "seed"),
    ({"step_size": 0.0}, "step_size"),
    ({"phi_prior": -1.0}, "phi_prior"),
    ({"preconditioner_floor": 0.0}, "preconditioner_floor"),
    ({"pi_init": "eye"}, "pi_init"),
])
@pytest.mark.backends
def test_bad_arguments_raise_value_error_naming_them(kwargs, name):
    args = {"vocab_size": 10, "topic_sizes": (4, 3), "num_documents": 5, **kwargs}
    with pytest.raises(ValueError, match=name):
        TLASGRTopics(**args)


@pytest.mark.backends
def test_bad_update_inputs_raise_value_error_naming_them():
    topics = TLASGRTopics(10, (4, 3), num_documents=5, seed=0)
    thetas = [tf.ones((2, 3, 4)), tf.ones((2, 3, 3))]
    with pytest.raises(ValueError, match="bow"):
        topics.update(tf.ones((2, 3, 11)), thetas)
    with pytest.raises(ValueError, match="thetas"):
        topics.update(tf.ones((2, 3, 10)), thetas[:1])
    with pytest.raises(ValueError, match=r"thetas\[1\]"):
        topics.update(tf.ones((2, 3, 10)), [thetas[0], tf.ones((2, 3, 5))])
    with pytest.raises(ValueError, match=r"thetas\[0\]"):
        topics.update(tf.ones((2, 3, 10)), [tf.ones((2, 4, 4)), thetas[1]])


# --------------------------------------------------------------------------
# 6. MirroredStrategy on 2 logical CPUs (subprocess: devices must be set first)
# --------------------------------------------------------------------------
_MIRRORED_SCRIPT = textwrap.dedent("""
    import json
    import numpy as np
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    from tfktopic.bayes.tlasgr import TLASGRTopics

    rng = np.random.default_rng(0)
    V, K, J = 30, (5, 3), 4
    batches = []
    for size in (6, 5):       # an even and an uneven split (3 + 3, 3 + 2)
        bow = rng.poisson(1.5, size=(size, J, V)).astype("float32")
        thetas = [rng.gamma(0.5, 4.0, size=(size, J, k)).astype("float32") for k in K]
        batches.append((bow, thetas[0], thetas[1]))

    def run(strategy):
        with strategy.scope():
            topics = TLASGRTopics(V, K, num_documents=60, recurrent=True, seed=7)
        init = np.asarray(topics.phi[0])

        @tf.function
        def step(bow, theta_1, theta_2):
            return strategy.run(topics.update, args=(bow, [theta_1, theta_2]))

        local_sizes = []
        for bow, t1, t2 in batches:
            data = tf.data.Dataset.from_tensor_slices((bow, t1, t2)).batch(len(bow))
            batch = next(iter(strategy.experimental_distribute_dataset(data)))
            local_sizes.append([int(x.shape[0]) for x in
                                strategy.experimental_local_results(batch[0])])
            step(*batch)
        gap = 0.0
        for w in topics.weights:
            local = strategy.experimental_local_results(w.value)
            for other in local[1:]:
                gap = max(gap, float(np.abs(np.asarray(local[0]) - np.asarray(other)).max()))
        moved = float(np.abs(np.asarray(topics.phi[0]) - init).max())
        return [np.asarray(w) for w in topics.weights], local_sizes, gap, moved

    single, _, _, moved = run(tf.distribute.get_strategy())
    mirrored, sizes, gap, _ = run(tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]))
    diff = max(float(np.abs(a.astype("float64") - b).max()) for a, b in zip(single, mirrored))
    print("RESULT" + json.dumps(dict(sizes=sizes, gap=gap, diff=diff, moved=moved,
                                     steps=int(mirrored[-1]))))
""")


@pytest.mark.slow   # the default run checks it through the model: test_distribute's
                    # test_mirrored_mcmc_keeps_phi_pi_identical_..._equal_to_one_device[rgbn_rnn]
def test_mirrored_strategy_matches_single_device(tmp_path):
    script = tmp_path / "mirrored_tlasgr.py"
    script.write_text(_MIRRORED_SCRIPT)
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT")][-1]
    result = json.loads(line[len("RESULT"):])
    assert result["sizes"] == [[3, 3], [3, 2]], result   # the batch really was split
    assert result["steps"] == 2, result
    assert result["moved"] > 1e-3, result                # the update did something
    assert result["gap"] == 0.0, result                  # replicas stay identical
    assert result["diff"] < 1e-6, result                 # == single device, same batch


# --------------------------------------------------------------------------
# 7. Module structure: the import arrows of tfktopic.bayes and models.rgbn
# --------------------------------------------------------------------------
def _package_imports(package):
    """{module: set of modules of `package` it imports} from the source ASTs.

    ``from package import name`` counts as an import of the package's
    ``__init__`` (``package`` itself), unless `name` is one of its modules.
    """
    folder = REPO_ROOT.joinpath(*package.split("."))
    modules = {f"{package}.{p.stem}" if p.stem != "__init__" else package: p
               for p in folder.glob("*.py")}
    graph = {}
    for name, path in modules.items():
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    targets.add(sub if sub in modules else node.module)
        graph[name] = {t for t in targets if t in modules and t != name}
        graph[name].update(t for t in targets if not t.startswith(package)
                           and t.startswith("tfktopic"))
    return modules, graph


def _cycle(graph, nodes):
    """A list of modules forming an import circle among `nodes`, or None."""
    state = {}

    def visit(node, path):
        state[node] = "open"
        for target in sorted(graph.get(node, ())):
            if target not in nodes:
                continue
            if state.get(target) == "open":
                return path[path.index(target):] + [target]
            if target not in state:
                found = visit(target, path + [target])
                if found:
                    return found
        state[node] = "done"
        return None

    for node in sorted(nodes):
        if node not in state:
            found = visit(node, [node])
            if found:
                return found
    return None


@pytest.mark.parametrize("package", ["tfktopic.bayes", "tfktopic.models.rgbn"])
@pytest.mark.backends
def test_no_import_circle_within_the_package(package):
    modules, graph = _package_imports(package)
    # The package's __init__ re-exports its modules; a module importing the
    # __init__ back would close a circle, so it is part of the graph.
    assert _cycle(graph, set(modules)) is None, _cycle(graph, set(modules))


@pytest.mark.backends
def test_bayes_import_arrows_run_one_way():
    modules, graph = _package_imports("tfktopic.bayes")
    inner = lambda m: {t for t in graph[m] if t.startswith("tfktopic.")}
    # The one counter-based RNG imports nothing of the package but the backend hook (its
    # compiled TensorFlow kernel for the Threefry words) and the XLA switch.
    assert inner("tfktopic.bayes.counter_random") == {"tfktopic.backend", "tfktopic.xla"}
    assert inner("tfktopic.bayes.augmentation") == {"tfktopic.bayes.counter_random"}
    assert inner("tfktopic.bayes.tlasgr") == {"tfktopic.bayes.augmentation",
                                              "tfktopic.bayes.counter_random", "tfktopic.xla"}
    assert "tfktopic.bayes.counter_random" in inner("tfktopic.bayes.sgmcmc")
    # tfktopic.bayes is below the models: nothing in it imports tfktopic.models.
    for module in modules:
        assert not any(t.startswith("tfktopic.models") for t in graph[module]), module

