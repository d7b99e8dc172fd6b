"""`TopicLanguageModel.generate`: the keras.ops loop, samplers, prompts, <unk>, backends."""

import numpy as np
import pytest

from tests.backends import backend_available, run_many_in_backend
from tfktopic.tokenizer import detokenize


def greedy_ids(weights=None, prompt=None, sampler="greedy", seed=0):
    """Ids of a small seeded LSTM LM (a helper, also run under JAX): (ids, weights)."""
    import keras

    from tfktopic.models import LSTMLanguageModel
    keras.utils.set_random_seed(0)
    model = LSTMLanguageModel(30, embedding_dim=16, hidden_dim=24)
    model({"tokens": np.ones((1, 2), np.int32)})
    if weights is not None:
        model.set_weights(list(weights))
    ids = model.generate(prompt, max_length=9, sampler=sampler, num_sentences=3, seed=seed)
    return np.asarray(ids), [np.asarray(w) for w in model.get_weights()]


def test_greedy_generation_is_the_argmax_of_each_step():
    ids, weights = greedy_ids()
    assert ids.shape == (3, 9) and (ids == ids[0]).all()
    from tfktopic.models import LSTMLanguageModel
    model = LSTMLanguageModel(30, embedding_dim=16, hidden_dim=24)
    model({"tokens": np.ones((1, 2), np.int32)})
    model.set_weights(weights)
    state, token = model.initial_generation_state(1), np.array([1], np.int32)
    conditioning = model.generation_conditioning(1)
    for t in range(9):
        log_probs, state = model.generation_step(token, state, conditioning)
        log_probs = np.array(log_probs)[0]
        log_probs[[0, 1, 3]] = -np.inf                        # <pad>, <bos>, <unk> banned
        assert ids[0, t] == log_probs.argmax()
        if ids[0, t] == 2:
            assert (ids[0, t + 1:] == 0).all()
            break
        token = ids[0, t:t + 1]


def test_the_prompt_is_fed_first_then_generation_continues():
    prompt = [5, 6, 7]
    ids, _ = greedy_ids(prompt=prompt)
    np.testing.assert_array_equal(ids[:, :3], np.broadcast_to(prompt, (3, 3)))
    free, _ = greedy_ids()
    assert not (ids[:, 3:] == free[:, 3:]).all()              # the prompt conditions the rest


def test_unk_is_never_generated_by_default_and_allowed_on_request():
    import keras

    from tfktopic.models import LSTMLanguageModel
    keras.utils.set_random_seed(0)
    model = LSTMLanguageModel(6, embedding_dim=4, hidden_dim=4)
    model({"tokens": np.ones((1, 2), np.int32)})
    bias = model.get_weights()[-1]
    boost = np.zeros_like(bias)
    boost[3] = 50.0                                           # <unk> dominates every step
    weights = model.get_weights()
    weights[-1] = bias + boost
    model.set_weights(weights)
    ids = model.generate(num_sentences=4, max_length=6, sampler="random", seed=1)
    assert 3 not in ids
    ids = model.generate(num_sentences=4, max_length=6, sampler="random", seed=1,
                         allow_unk=True)
    assert (ids == 3).mean() > 0.5


def test_a_seed_gives_the_same_sentences_and_compile_sets_the_sampler():
    a, weights = greedy_ids(sampler="top_p", seed=4)
    b, _ = greedy_ids(weights, sampler="top_p", seed=4)
    np.testing.assert_array_equal(a, b)
    from tfktopic.models import LSTMLanguageModel
    model = LSTMLanguageModel(30, embedding_dim=16, hidden_dim=24)
    model({"tokens": np.ones((1, 2), np.int32)})
    model.set_weights(weights)
    model.compile(optimizer="adam", sampler="greedy")
    c = model.generate(num_sentences=3, max_length=9)
    assert (c == c[0]).all()
    with pytest.raises(ValueError, match="num_beams > 1"):
        model.generate(sampler={"class_name": "beam", "config": {"num_beams": 3}})
    with pytest.raises(ValueError, match="prompt is text"):
        model.generate("the senate")


@pytest.mark.skipif(not backend_available("jax"), reason="jax is not installed")
def test_generation_gives_the_same_ids_on_tensorflow_and_jax():
    """Same weights, same seed: the same ids on both backends (greedy and top-k)."""
    ids, weights = greedy_ids()
    top_k = dict(sampler="top_k", seed=3, prompt=[5])
    there = run_many_in_backend("jax", {
        "greedy": ("tests.library.test_generation_loop:greedy_ids", dict(weights=weights)),
        "top_k": ("tests.library.test_generation_loop:greedy_ids", dict(weights=weights, **top_k))})
    np.testing.assert_array_equal(ids, there["greedy"][0])
    np.testing.assert_array_equal(greedy_ids(weights, **top_k)[0], there["top_k"][0])


@pytest.mark.parametrize("tokens, text", [
    ("i 'm here", "i'm here"),
    ("we do n't , they did .", "we don't, they did."),
    ("it 's the senate 's vote !", "it's the senate's vote!"),
    ("what ? yes ; no : maybe", "what? yes; no: maybe"),
    ('she said " hello there " .', 'she said "hello there".'),
    ("( see above ) 5 %", "(see above) 5%"),
])
def test_detokenize_joins_punctuation_and_clitics(tokens, text):
    assert detokenize(tokens) == text
