"""One harness over every model family: the contract every language model keeps.

Each family gets a tiny model on tiny real data (the Lee corpus shipped with
gensim), built once per module. For every family: the `.keras` round trip gives
identical outputs, a few training steps lower the loss and report the
contract's metrics, `from_preset` builds the preset's sizes, and (where the
traits say so) `topics` and `generate` work. The traits are checked against the
run code's model tables.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfktopic.data import (TopicVocabulary, Vocabulary, document_sequences, load_corpus,
                           sentence_examples)
from tfktopic.data.pipeline import document_dataset, sentence_dataset
from tfktopic.data.streams import document_streams, stream_batches
from tfktopic import presets
from tfktopic.models import registry
from tfktopic.models.base import TopicLanguageModel

FAMILIES = registry.names()  # a new model is in the harness as soon as it is registered
NUM_TOPICS = 4


@pytest.fixture(scope="module")
def data():
    train, _, _ = load_corpus("lee").split((0.8, 0.1, 0.1), seed=0)
    train = train[:40]
    lm = Vocabulary.build(train, min_count=3)
    topic = TopicVocabulary.build(train, lm)
    sentences = sentence_examples(train, lm, topic, max_len=12, context_len=60)
    chunks = document_sequences(train, lm, topic, sentences_per_chunk=3, max_len=12,
                                context_len=60)
    streams = document_streams(train, lm, topic)
    stream_batch = next(stream_batches(streams, 4, bptt=12, context="all_other"))
    return {
        "train": train, "lm": lm, "topic": topic, "num_documents": len(chunks.tokens),
        "stream_batch": {k: tf.constant(v) for k, v in stream_batch.items()},
        "sentence_batch": next(iter(sentence_dataset(sentences, batch_size=16, shuffle=False,
                                                     document_targets=True))),
        "chunk_batch": next(iter(document_dataset(chunks, batch_size=4, shuffle=False))),
    }


def _batch(name, data):
    kind = registry.get(name).data_kind
    return {"streams": data["stream_batch"], "chunks": data["chunk_batch"],
            "windows": data["sentence_batch"]}[kind]


#: Tiny constructor settings of each family (dropout 0: evaluation is deterministic).
TINY = {
    "lstm": {"embedding_dim": 12, "hidden_dim": 16},
    "doc_lstm": {"embedding_dim": 12, "hidden_dim": 16, "max_streams": 4},
    "doc_lstm_chunked": {"embedding_dim": 12, "hidden_dim": 16},
    "doc_topicrnn": {"num_topics": NUM_TOPICS, "hidden_dim": 16, "encoder_units": (16,),
                     "max_streams": 4},
    "lda_lstm": {"num_topics": NUM_TOPICS, "embedding_dim": 12, "hidden_dim": 16},
    "topicrnn": {"num_topics": NUM_TOPICS, "hidden_dim": 16, "encoder_units": (16,)},
    "tcnlm": {"num_topics": NUM_TOPICS, "embedding_dim": 12, "hidden_dim": 16,
              "ntm_units": (16,)},
    "rgbn_rnn": {"num_layers": 2, "hidden_sizes": (16, 8), "topic_sizes": (NUM_TOPICS, 2),
                 "embedding_dim": 12, "dropout": 0.0},
}
TINY["gbn_rnn"] = TINY["rgbn_rnn"]


def _build(name, data, seed=0, model_settings=None):
    """A tiny model of family `name`, built by the registry as the run code does."""
    keras.utils.set_random_seed(seed)
    return registry.build_model(
        name, TINY[name] if model_settings is None else model_settings, lm_vocab=data["lm"],
        topic_vocab=data["topic"], num_documents=data["num_documents"], seed=seed,
        train_corpus=data["train"], training={"lda_passes": 1})


@pytest.fixture(scope="module")
def models(data):
    """One built tiny model per family (shared by the read-only checks)."""
    built = {}
    for name in FAMILIES:
        model = _build(name, data)
        model(_batch(name, data))
        built[name] = model
    return built


EXTRA_LOGS = {"lstm": (), "doc_lstm": (), "doc_lstm_chunked": (), "lda_lstm": (),
              "topicrnn": ("token_nll", "stop_nll", "kl"),
              "doc_topicrnn": ("token_nll", "stop_nll", "kl"),
              "tcnlm": ("kl", "tm_nll", "diversity_reg"), "rgbn_rnn": ("kl", "tm_nll"),
              "gbn_rnn": ("kl", "tm_nll")}


def _expected_logs(name, model):
    assert tuple(model.reported_terms) == EXTRA_LOGS[name]
    return {"loss", "nll", "ppl", *EXTRA_LOGS[name]}


@pytest.mark.parametrize("name", FAMILIES)
def test_traits_agree_with_the_model_and_its_data_kind(models, name):
    # The run tables (settings.*_MODELS) are gone: the registry entry is the one table.
    entry = registry.get(name)
    assert isinstance(models[name], entry.model_class)
    assert entry.has_topics == (name in registry.names("has_topics"))
    assert entry.preprocessor().kind == entry.data_kind
    assert entry.preprocessor().topical == entry.has_topics
    model = models[name]
    assert isinstance(model, TopicLanguageModel)
    assert (model.has_topics, model.chunked, model.streamed, model.hierarchical,
            model.generates) == (entry.has_topics, entry.chunked, entry.streamed,
                                 entry.hierarchical, entry.generates)
    # The model reaches the preprocessor of its entry's kind (generate's text goes through it).
    assert model.data_kind == entry.data_kind
    assert (model.preprocessor.kind, model.preprocessor.topical) == (entry.data_kind,
                                                                    entry.has_topics)


@pytest.mark.parametrize("name", FAMILIES)
def test_from_preset_builds_the_presets_sizes(data, name):
    small = presets.preset(name, "small")
    model = _build(name, data, model_settings=small.model)
    config = model.get_config()
    for key, value in small.model.items():
        if isinstance(value, dict):      # rGBN-RNN's tlasgr config also records its MCMC seed
            assert {k: config[key].get(k) for k in value} == value, key
            continue
        expected = list(value) if isinstance(value, tuple) else value
        assert config[key] == expected, key
    cls = registry.get(name).model_class
    V, Vc = len(data["lm"]), len(data["topic"])
    args = {"lstm": (V,), "doc_lstm": (V,), "doc_lstm_chunked": (V,), "lda_lstm": (V, Vc),
            "topicrnn": (V, data["topic"].lm_to_topic),
            "doc_topicrnn": (V, data["topic"].lm_to_topic), "tcnlm": (V, Vc),
            "rgbn_rnn": (V, Vc, data["num_documents"]),
            "gbn_rnn": (V, Vc, data["num_documents"])}[name]
    extra = {"seed": 0} if name in ("rgbn_rnn", "gbn_rnn") else {}   # the registry's seed
    if small.model.get("decoder_init") == "lda":     # the registry fitted an LDA for it
        topics = small.model.get("num_topics") or small.model["topic_sizes"][0]   # K (K_1)
        extra["topic_word_init"] = np.full((topics, Vc), 1.0 / Vc, "float32")
    direct = cls.from_preset("small", *args, **registry.get(name).fixed, **extra)
    assert direct.get_config() == {**config, "name": direct.name}
    with pytest.raises(ValueError, match="unknown preset 'huge'"):
        cls.from_preset("huge", *args)


@pytest.mark.parametrize("name", FAMILIES)
def test_keras_round_trip_gives_identical_outputs(models, data, name, tmp_path):
    model, batch = models[name], _batch(name, data)
    path = tmp_path / f"{name}.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert type(loaded) is type(model)
    assert loaded.get_config() == model.get_config()
    np.testing.assert_array_equal(np.asarray(loaded(batch)), np.asarray(model(batch)))
    if model.has_topics:
        np.testing.assert_array_equal(loaded.topics(5), model.topics(5))


@pytest.mark.parametrize("name", FAMILIES)
def test_train_steps_lower_the_loss_and_report_the_contract(data, name):
    model, batch = _build(name, data, seed=1), _batch(name, data)
    model.compile(optimizer=keras.optimizers.Adam(1e-2))
    dataset = tf.data.Dataset.from_tensors(batch)
    before = model.evaluate(dataset, return_dict=True, verbose=0)
    assert set(before) == _expected_logs(name, model)
    history = model.fit(dataset.repeat(8), epochs=1, verbose=0).history
    logs = {key: values[-1] for key, values in history.items()}
    assert set(logs) == _expected_logs(name, model)
    after = model.evaluate(dataset, return_dict=True, verbose=0)
    assert after["loss"] < before["loss"]
    assert after["ppl"] < before["ppl"]
    for result in (before, logs, after):
        assert all(np.isfinite(float(v)) for v in result.values())
        assert float(result["ppl"]) == pytest.approx(np.exp(float(result["nll"])), rel=1e-5)
    assert float(after["ppl"]) < len(data["lm"])     # better than uniform


@pytest.mark.parametrize("name", FAMILIES)
def test_topics_of_topic_models(models, data, name):
    model = models[name]
    if not registry.get(name).has_topics:
        with pytest.raises((ValueError, AttributeError, NotImplementedError)):
            model.topics(5)
        return
    ids = np.asarray(model.topics(5))
    assert ids.shape == (NUM_TOPICS, 5)
    assert ids.min() >= 0 and ids.max() < len(data["topic"])
    assert all(len(set(row)) == 5 for row in ids.tolist())
    words = model.topics(5, vocabulary=data["topic"])
    assert words == [[data["topic"].words[i] for i in row] for row in ids]


@pytest.mark.parametrize("name", [n for n in FAMILIES if registry.get(n).generates])
def test_generate_is_seeded_and_emits_valid_ids(models, data, name):
    model = models[name]
    first = np.asarray(model.generate(3, max_len=8, method="top_k", top_k=5, seed=3, allow_unk=True))
    assert first.shape == (3, 8)
    np.testing.assert_array_equal(
        first, np.asarray(model.generate(3, max_len=8, method="top_k", top_k=5, seed=3, allow_unk=True)))
    assert first.min() >= 0 and first.max() < len(data["lm"])
    for row in first:
        end = list(row).index(2) if 2 in row else len(row)     # <eos>
        assert (row[:end] > 1).all() and (row[end + 1:] == 0).all()


@pytest.mark.parametrize("name", [n for n in FAMILIES if registry.get(n).generates])
def test_generate_turns_text_into_ids_and_back_through_the_model_s_preprocessor(
        models, data, name):
    from tfktopic.tokenizer import Tokenizer

    model = models[name]
    tokenizer = Tokenizer(data["lm"], data["topic"])
    model.tokenizer = tokenizer
    try:
        pre = model.preprocessor
        inputs = pre.generate_preprocess("The government said", "the fire and the police")
        context = None if not model.has_topics else "the fire and the police"
        bow = None if context is None else inputs["context_bow"][None]
        texts = model.generate("The government said", max_len=8, seed=3, context_bow=context)
        ids = model.generate(inputs["prompt"], max_len=8, seed=3, context_bow=bow,
                             tokenizer=False)
    finally:
        model.tokenizer = None
    assert isinstance(texts, list) and len(texts) == len(ids)
    np.testing.assert_array_equal(ids[:, :3], np.broadcast_to(inputs["prompt"], (len(ids), 3)))
    assert texts == pre.generate_postprocess(ids)
    assert all(text.startswith("the government said") for text in texts)


def _base_generators(models):
    """The models generating through the base class's compiled loop (all generating ones)."""
    names = [name for name in FAMILIES if registry.get(name).generates
             and type(models[name]).generation_step is not TopicLanguageModel.generation_step]
    assert {"topicrnn", "tcnlm", "rgbn_rnn", "gbn_rnn", "doc_topicrnn", "lstm",
            "doc_lstm", "lda_lstm"} <= set(names)
    return names


def _topic(model, k):
    """Topic k for a topic model; the models without topics generate unconditioned."""
    return k if model.has_topics else None


def _eager_scores(model, tokens, conditioning):
    """log p of every position of `tokens` [N, T] fed after <bos>, by eager single steps."""
    state = model.initial_generation_state(len(tokens))
    previous = np.full(len(tokens), 1, np.int32)
    scores = []
    for t in range(tokens.shape[1]):
        log_probs, state = model.generation_step(keras.ops.convert_to_tensor(previous), state,
                                                 conditioning)
        log_probs = np.array(log_probs, np.float64)
        log_probs[:, :2] = -np.inf                                # <pad>, <bos> never emitted
        scores.append(log_probs)
        previous = tokens[:, t]
    return np.stack(scores, 1)


def _live(ids):
    """Positions up to and including each row's first <eos>."""
    return np.cumsum(ids == 2, axis=1) - (ids == 2) == 0


def test_compiled_greedy_generation_equals_an_eager_argmax_loop(models):
    for name in _base_generators(models):
        model = models[name]
        ids = np.asarray(model.generate(3, max_len=9, topic=_topic(model, 1), sampler="greedy", allow_unk=True))
        conditioning = model.generation_conditioning(3, topic=_topic(model, 1))
        # Greedy by hand: every step's arg-max given the previous arg-max.
        state, token, reference = model.initial_generation_state(3), np.ones(3, np.int32), []
        for _ in range(9):
            log_probs, state = model.generation_step(keras.ops.convert_to_tensor(token), state,
                                                     conditioning)
            log_probs = np.array(log_probs, np.float64)
            log_probs[:, :2] = -np.inf
            token = log_probs.argmax(-1).astype(np.int32)
            reference.append(token)
        reference = np.stack(reference, 1)
        live = _live(ids)
        np.testing.assert_array_equal(ids[live], reference[live], err_msg=name)
        assert (ids[~live] == 0).all(), name


def test_top_k_sampling_stays_in_the_top_k_and_is_seeded(models, data):
    from tfktopic.tokenizer import Tokenizer, detokenize

    tokenizer = Tokenizer(data["lm"], data["topic"])
    for name in _base_generators(models):
        model = models[name]
        topic = _topic(model, 0)
        ids = np.asarray(model.generate(6, max_len=8, topic=topic, method="top_k", top_k=3,
                                        temperature=3.0, seed=11))
        scores = _eager_scores(model, ids, model.generation_conditioning(6, topic=topic))
        rank = (scores > np.take_along_axis(scores, ids[..., None], -1)).sum(-1)
        assert (rank[_live(ids)] < 3).all(), name
        others = [np.asarray(model.generate(6, max_len=8, topic=topic, method="top_k", top_k=3,
                                            temperature=3.0, seed=s)) for s in (11, 12)]
        np.testing.assert_array_equal(others[0], ids)
        assert not np.array_equal(others[1], ids), name
        # With a tokenizer, generate returns the decoded text of the same ids.
        texts = model.generate(6, max_len=8, topic=topic, method="top_k", top_k=3,
                               temperature=3.0, seed=11, tokenizer=tokenizer)
        assert texts == [detokenize(" ".join(data["lm"].decode(row, strip_special=True)))
                         for row in ids]
        assert all(isinstance(text, str) for text in texts)


def test_a_weight_regularizer_adds_to_the_trained_and_evaluated_loss(data):
    """`train_step` / `test_step` minimise the objective plus Keras' `model.losses`
    (e.g. a regularizer a user sets on a weight), and report that sum as ``loss``."""
    batch = _batch("lstm", data)
    dataset = tf.data.Dataset.from_tensors(batch)
    losses = {}
    for regularised in (False, True):
        model = _build("lstm", data, seed=2)                    # the same weights twice
        model(batch)
        weight = model.trainable_weights[0]
        if regularised:
            weight.regularizer = keras.regularizers.L2(0.5)   # before the steps are traced
        penalty = 0.5 * float(np.sum(np.square(weight.numpy())))
        model.compile(optimizer=keras.optimizers.SGD(0.0))    # the weights stay put
        fitted = model.fit(dataset, epochs=1, verbose=0, shuffle=False).history["loss"][-1]
        losses[regularised] = (model.evaluate(dataset, return_dict=True, verbose=0)["loss"],
                               fitted)
    assert penalty > 1e-2
    for plain, regularised in zip(losses[False], losses[True]):
        assert regularised == pytest.approx(plain + penalty, rel=1e-5)


@pytest.mark.parametrize("name", ["lstm", "doc_lstm"])
def test_a_model_without_topics_generates_its_forward_pass_s_arg_max_and_refuses_a_topic(
        models, data, name):
    """Greedy generation steps the cells from <bos> and a zero state; the model's call runs
    its layers over the window: every greedy token is the arg-max of that forward pass."""
    model = models[name]
    ids = np.asarray(model.generate(2, max_len=10, sampler="greedy", allow_unk=True))
    live = _live(ids)
    for row, keep in zip(ids, live):
        tokens = np.concatenate([[1], row[keep][:-1]])[None].astype(np.int32)
        batch = {"tokens": tokens}
        if name == "doc_lstm":
            batch["reset"] = np.ones(1, np.float32)
            logits = model(batch, carry=False)
        else:
            logits = model(batch)
        log_probs = np.array(logits, np.float64)[0]
        log_probs[:, :2] = -np.inf
        np.testing.assert_array_equal(log_probs.argmax(-1), row[keep])
    with pytest.raises(ValueError, match="has no topics"):
        model.generate(1, max_len=5, topic=0, sampler="greedy", allow_unk=True)
    with pytest.raises(ValueError, match="has no topics"):
        model.generate(1, max_len=5, context_bow=np.ones(len(data["topic"]), np.float32), sampler="greedy", allow_unk=True)


def test_generate_defaults_are_one_top_k_sentence_of_30_tokens_without_unk(models):
    """The documented defaults of `generate`: num_sentences=1, max_length=30, the top-k
    sampler with k = top_k = 10 (keras-hub's CausalLM default kind) and no ``<unk>``; the old `method` strings keep
    top_k=10 and temperature=1.0 where the method uses them."""
    from tfktopic.models import samplers

    model = models["topicrnn"]
    ids = np.asarray(model.generate(seed=4))
    assert ids.shape == (1, 30)
    np.testing.assert_array_equal(ids, model.generate(1, max_length=30, seed=4,
                                                      sampler=samplers.TopKSampler(k=10),
                                                      allow_unk=False))
    many = np.asarray(model.generate(20, max_length=12, seed=1))
    assert not (many == 3).any()           # <unk> (id 3) is banned unless asked for
    for method, option in (("top_k", {"top_k": 10}), ("sample", {"temperature": 1.0})):
        by_default = np.asarray(model.generate(8, max_len=12, method=method, seed=4))
        explicit = np.asarray(model.generate(8, max_len=12, method=method, seed=4, **option))
        np.testing.assert_array_equal(by_default, explicit)
    # (the options do change the draws: else the comparison above could not fail; the noise
    # is Gumbel-max, argmax(logits / T + g), so on this untrained, nearly flat model only a
    # sharp temperature moves the draws)
    for changed in ({"method": "top_k", "top_k": 11}, {"method": "sample", "temperature": 0.05}):
        assert not np.array_equal(np.asarray(model.generate(8, max_len=12, seed=4, **changed)),
                                  np.asarray(model.generate(8, max_len=12, seed=4,
                                                            method=changed["method"])))


def test_generate_accepts_1_for_counts_and_names_an_argument_below_it(models):
    model = models["topicrnn"]
    assert np.asarray(model.generate(1, max_length=1, method="top_k", top_k=1)).shape == (1, 1)
    for name in ("num_sentences", "max_length", "top_k"):
        with pytest.raises(ValueError, match=f"{name} must be an integer >= 1"):
            model.generate(**{"num_sentences": 1, "max_length": 3, "top_k": 2, name: 0})


def test_a_seed_beyond_int32_folds_into_int32_and_no_seed_draws_a_fresh_one(models):
    """Seeds are folded modulo 2**31 - 1 (the stateless ops take an int32 seed)."""
    model = models["topicrnn"]
    big = 2 ** 40 + 12345
    folded = np.asarray(model.generate(8, max_len=12, method="sample", seed=big % (2**31 - 1), allow_unk=True))
    np.testing.assert_array_equal(
        np.asarray(model.generate(8, max_len=12, method="sample", seed=big, allow_unk=True)), folded)
    for other in (big % (2**31 + 1), big % (2**32 - 1), big % (2**31 - 2)):
        assert not np.array_equal(
            np.asarray(model.generate(8, max_len=12, method="sample", seed=other, allow_unk=True)), folded)
    fresh = [np.asarray(model.generate(8, max_len=12, method="sample", allow_unk=True)) for _ in range(2)]
    assert not np.array_equal(*fresh)


@pytest.mark.parametrize("name", registry.names("has_topics"))
def test_topics_default_to_10_words_and_take_1_to_all_topic_words(models, data, name):
    model = models[name]
    width = len(data["topic"])
    top = np.asarray(model.topics())
    assert top.shape == (NUM_TOPICS, 10)
    np.testing.assert_array_equal(np.asarray(model.topics(1)), top[:, :1])
    assert np.asarray(model.topics(width)).shape == (NUM_TOPICS, width)
    for bad in (0, width + 1):
        with pytest.raises(ValueError, match="top_n"):
            model.topics(bad)


@pytest.mark.parametrize("name", registry.names("has_topics"))
def test_topic_proportions_check_the_bag_of_words_width_on_its_last_axis(models, data, name):
    """Rows of V_c topic-word counts give K proportions per row (3 rows, not V_c); a bag of
    another width is a one-line error naming context_bow and topic_vocab_size."""
    model, width = models[name], len(data["topic"])
    bow = np.random.default_rng(0).poisson(1.0, size=(3, width)).astype("float32")
    assert tuple(np.asarray(model.topic_proportions(bow)).shape) == (3, NUM_TOPICS)
    with pytest.raises(ValueError, match=f"context_bow has {width + 1} columns.*"
                                         f"topic_vocab_size={width}"):
        model.topic_proportions(np.ones((3, width + 1), "float32"))



@pytest.mark.parametrize("name", registry.names("has_topics"))
def test_the_bag_of_words_width_is_checked_when_the_batch_size_is_unknown(models, data, name):
    """Traced with an unknown number of rows (as in `fit` on an unbatched-remainder
    dataset or a serving signature), a bag of the wrong width is still the named error,
    not a shape error from deep inside a matmul."""
    model, width = models[name], len(data["topic"])
    traced = tf.function(model.topic_proportions)
    spec = tf.TensorSpec([None, width], tf.float32)
    assert traced.get_concrete_function(spec).structured_outputs.shape[-1] == NUM_TOPICS
    with pytest.raises(ValueError, match="context_bow has"):
        traced.get_concrete_function(tf.TensorSpec([None, width + 1], tf.float32))
