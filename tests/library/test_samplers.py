"""The token samplers (tfktopic.models.samplers): greedy, random, top-k, top-p, beam."""

import numpy as np
import pytest

from tests.backends import backend_available, run_many_in_backend
from tfktopic.models import samplers

pytestmark = pytest.mark.backends


def _scores(rows=4, vocab=12, seed=0):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(rows, vocab)).astype(np.float32) * 2.0
    return (logits - np.log(np.exp(logits).sum(1, keepdims=True))).astype(np.float32)


def draw_many(name, config, scores, seeds):
    """Ids [len(seeds), N] drawn by sampler `name` (a test helper, also run under JAX)."""
    sampler = samplers.get({"class_name": name, "config": config})
    return np.stack([np.asarray(sampler(scores, seed=int(s), step=int(s) % 3))
                     for s in seeds])


def test_greedy_sampler_is_the_argmax():
    scores = _scores()
    np.testing.assert_array_equal(np.asarray(samplers.GreedySampler()(scores)),
                                  scores.argmax(1))


def test_top_k_sampler_never_leaves_the_k_best():
    scores = _scores(rows=3, vocab=20)
    ids = draw_many("top_k", {"k": 3, "temperature": 2.0}, scores, range(60))
    best = np.argsort(-scores, axis=1)[:, :3]
    for row in range(3):
        assert set(ids[:, row]) <= set(best[row])
        assert len(set(ids[:, row])) > 1          # it does sample (temperature 2)


def test_top_k_with_k_1_is_greedy():
    scores = _scores()
    ids = draw_many("top_k", {"k": 1}, scores, range(5))
    np.testing.assert_array_equal(ids, np.broadcast_to(scores.argmax(1), ids.shape))


def test_top_p_sampler_never_leaves_the_nucleus():
    probs = np.array([[0.5, 0.25, 0.15, 0.06, 0.04], [0.9, 0.04, 0.03, 0.02, 0.01]],
                     np.float32)
    ids = draw_many("top_p", {"p": 0.7}, np.log(probs), range(80))
    assert set(ids[:, 0]) == {0, 1}               # 0.5 < 0.7, 0.75 >= 0.7: {0, 1}
    assert set(ids[:, 1]) == {0}                  # the best token alone reaches 0.7


def test_top_p_respects_k():
    probs = np.array([[0.3, 0.3, 0.2, 0.2]], np.float32)
    ids = draw_many("top_p", {"p": 1.0, "k": 2}, np.log(probs), range(60))
    assert set(ids[:, 0]) == {0, 1}


def test_random_sampler_follows_the_distribution():
    probs = np.array([[0.7, 0.2, 0.1]], np.float32)
    ids = draw_many("random", {}, np.log(probs), range(600))[:, 0]
    freq = np.bincount(ids, minlength=3) / len(ids)
    # 600 draws: binomial sd <= 0.019; 4 sd.
    np.testing.assert_allclose(freq, probs[0], atol=0.08)


def test_banned_ids_at_minus_inf_are_never_drawn():
    scores = np.zeros((2, 6), np.float32)
    scores[:, :2] = -np.inf
    for name in ("random", "top_k", "top_p"):
        ids = draw_many(name, {}, scores, range(40))
        assert ids.min() >= 2, name


def test_beam_with_one_beam_is_greedy():
    scores = _scores()
    np.testing.assert_array_equal(np.asarray(samplers.BeamSampler(num_beams=1)(scores)),
                                  np.asarray(samplers.GreedySampler()(scores)))


def test_a_seed_gives_the_same_draws_and_another_seed_others():
    scores = _scores(rows=8, vocab=50)
    a = draw_many("random", {}, scores, [7] * 3)
    assert (a == a[0]).all()
    b = draw_many("random", {}, scores, [8])
    assert (a[0] != b[0]).any()


@pytest.mark.skipif(not backend_available("jax"), reason="jax is not installed")
def test_samplers_draw_the_same_ids_on_tensorflow_and_jax():
    """Counter-based noise: the same (seed, step) gives the same ids on both backends."""
    scores = _scores(rows=5, vocab=30)
    samplers = {"random": {"temperature": 1.3}, "top_k": {"k": 4}, "top_p": {"p": 0.8}}
    there = run_many_in_backend("jax", {
        name: ("tests.library.test_samplers:draw_many",
               dict(name=name, config=config, scores=scores, seeds=list(range(6))))
        for name, config in samplers.items()})
    for name, config in samplers.items():
        np.testing.assert_array_equal(draw_many(name, config, scores, range(6)), there[name])


def test_get_accepts_an_instance_a_name_and_a_config_dict():
    sampler = samplers.TopPSampler(p=0.5, temperature=0.8, k=7)
    assert samplers.get(sampler) is sampler
    assert samplers.get(samplers.serialize(sampler)) == sampler
    assert samplers.get({"class_name": "TopPSampler", "config": sampler.get_config()}) \
        == sampler
    for name, cls in (("greedy", samplers.GreedySampler), ("random", samplers.RandomSampler),
                      ("top_k", samplers.TopKSampler), ("top_p", samplers.TopPSampler),
                      ("beam", samplers.BeamSampler)):
        assert type(samplers.get(name)) is cls


@pytest.mark.parametrize("make, match", [
    (lambda: samplers.get("nucleus"), "unknown sampler 'nucleus'"),
    (lambda: samplers.get(3), "sampler must be"),
    (lambda: samplers.get({"config": {}}), "class_name"),
    (lambda: samplers.TopKSampler(k=0), "k must be an integer > 0"),
    (lambda: samplers.TopKSampler(k=2.5), "k must be an integer"),
    (lambda: samplers.TopPSampler(p=1.5), r"p must be a number > 0 and <= 1"),
    (lambda: samplers.TopPSampler(p=0), "p must be"),
    (lambda: samplers.RandomSampler(temperature=0), "temperature must be"),
    (lambda: samplers.BeamSampler(num_beams=0), "num_beams must be"),
])
def test_bad_sampler_arguments_raise_one_clear_value_error(make, match):
    with pytest.raises(ValueError, match=match):
        make()
