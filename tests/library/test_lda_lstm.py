"""LDA+LSTM baseline: the TF E-step equals gensim's, gradients, learning, saving."""

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfktopic.data import TopicVocabulary, Vocabulary, load_corpus, sentence_examples
from tfktopic.data.pipeline import sentence_dataset
from tfktopic.evaluation import evaluate_perplexity
from tfktopic.models.lstm.lda_lstm import (
    LDALSTMLanguageModel,
    LDATopicInference,
    fit_lda,
    lda_bow_corpus,
)

NUM_TOPICS = 8


@pytest.fixture(scope="module")
def lee():
    """gensim's Lee corpus (300 real ABC news documents, offline), split by document."""
    train, valid, test = load_corpus("lee").split((0.8, 0.1, 0.1), seed=0)
    lm = Vocabulary.build(train, min_count=3)
    topic = TopicVocabulary.build(train, lm)
    lda = fit_lda(train, topic, num_topics=NUM_TOPICS, passes=5, seed=0)
    return train, valid, test, lm, topic, lda


def _dense(bows, width):
    dense = np.zeros((len(bows), width), np.float32)
    for i, bow in enumerate(bows):
        for j, count in bow:
            dense[i, j] = count
    return dense


def _sparse(dense_row):
    return [(int(j), float(dense_row[j])) for j in np.flatnonzero(dense_row)]


class _MeanInit:
    """Stands in for gensim's random_state: its Gamma(100, 1/100) init at its mean, 1."""

    def gamma(self, shape, scale, size):
        return np.ones(size)


def _gensim_theta(lda, bows):
    """gensim's `get_document_topics(minimum_probability=0)` as a dense [N, K] array
    (gensim still drops topics below 1e-8, which are 0 here)."""
    theta = np.zeros((len(bows), lda.num_topics))
    for i, bow in enumerate(bows):
        for k, p in lda.get_document_topics(bow, minimum_probability=0):
            theta[i, k] = p
    return theta


def _small(lm, topic, lda=None, **kwargs):
    keras.utils.set_random_seed(0)
    return LDALSTMLanguageModel(len(lm), len(topic), num_topics=NUM_TOPICS, embedding_dim=16,
                                hidden_dim=24, lda=lda, **kwargs)


def test_a_document_s_bag_counts_every_topic_word_from_id_0_and_nothing_else(lee):
    _, _, _, _, topic, _ = lee
    first, other = topic.words[0], topic.words[7]
    documents = [[[first, "the", other], [first, "zzz-not-a-word"]], [["the", "of"]]]
    assert lda_bow_corpus(documents, topic) == [[(0, 2), (7, 1)], []]


def test_tf_estep_equals_gensim_inference_on_real_documents(lee):
    train, valid, test, lm, topic, lda = lee
    # Whole held-out documents and the leak-free contexts the pipeline produces.
    bows = lda_bow_corpus(list(valid) + list(test), topic)
    examples = sentence_examples(valid, lm, topic, protocol="preceding")
    batch = next(iter(sentence_dataset(examples, batch_size=40, shuffle=False)))
    contexts = np.asarray(batch["context_bow"])
    assert (contexts.sum(1) == 0).any() and (contexts.sum(1) > 0).any()
    dense = np.concatenate([_dense(bows, len(topic)), contexts])
    bows = bows + [_sparse(row) for row in contexts]

    layer = LDATopicInference(NUM_TOPICS, len(topic), lda=lda)  # gensim's 50 iterations, 1e-3
    theta = np.asarray(layer(dense))
    np.testing.assert_allclose(theta.sum(1), 1.0, atol=1e-5)
    # An empty context gets the prior mean alpha / sum(alpha).
    empty = theta[len(bows) - len(contexts):][contexts.sum(1) == 0]
    np.testing.assert_allclose(empty, np.broadcast_to(lda.alpha / lda.alpha.sum(), empty.shape),
                               atol=1e-6)

    saved_state = lda.random_state
    try:
        # Same starting point as gensim (the mean of its random init): equal to float32 noise.
        lda.random_state = _MeanInit()
        gamma, _ = lda.inference(bows)
        np.testing.assert_allclose(theta, gamma / gamma.sum(1, keepdims=True), atol=1e-4)
        lda.random_state = _MeanInit()
        np.testing.assert_allclose(theta, _gensim_theta(lda, bows), atol=1e-4)
        # gensim's own random init: the E-step is non-convex, a few documents land in another
        # local optimum, but nearly all agree.
        lda.random_state = np.random.RandomState(0)
        gamma, _ = lda.inference(bows)
        gap = np.abs(theta - gamma / gamma.sum(1, keepdims=True)).max(1)
        assert np.median(gap) < 1e-3 and (gap < 1e-2).mean() > 0.9, gap
    finally:
        lda.random_state = saved_state

    # A fixed budget without early stopping matches gensim with threshold 0, too.
    fixed = LDATopicInference(NUM_TOPICS, len(topic), iterations=7, gamma_threshold=0.0, lda=lda)
    thresholds = (lda.iterations, lda.gamma_threshold, lda.random_state)
    try:
        lda.iterations, lda.gamma_threshold, lda.random_state = 7, 0.0, _MeanInit()
        gamma, _ = lda.inference(bows)
    finally:
        lda.iterations, lda.gamma_threshold, lda.random_state = thresholds
    np.testing.assert_allclose(np.asarray(fixed(dense)), gamma / gamma.sum(1, keepdims=True),
                               atol=1e-4)


def test_shapes_topics_and_context_dependence(lee):
    _, valid, _, lm, topic, lda = lee
    model = _small(lm, topic, lda=lda, num_layers=2)
    examples = sentence_examples(valid, lm, topic, protocol="all_other")
    batch = next(iter(sentence_dataset(examples, batch_size=6, shuffle=False)))
    logits = np.asarray(model(batch))
    assert logits.shape == (6, examples.tokens.shape[1], len(lm))
    # The context changes the predictions of every step; the tokens of one window do not
    # change another window's.
    other = dict(batch, context_bow=tf.reverse(batch["context_bow"], [0]))
    changed = np.asarray(model(other))
    assert np.abs(changed[0] - logits[0]).min(axis=-1).max() > 0
    tokens = np.asarray(batch["tokens"]).copy()
    tokens[1] = 5
    np.testing.assert_allclose(np.asarray(model(dict(batch, tokens=tokens)))[[0, 2]],
                               logits[[0, 2]], atol=1e-5)

    ids = model.topics(top_n=5)
    assert ids.shape == (NUM_TOPICS, 5) and ids.dtype.kind == "i"
    # beta: each topic's expected word distribution, gensim's get_topics (rows sum to 1)
    np.testing.assert_allclose(model.topic_word_matrix(), lda.get_topics(), rtol=1e-5,
                               atol=1e-9)
    expected = np.argsort(-lda.get_topics(), axis=1, kind="stable")[:, :5]
    np.testing.assert_array_equal(ids, expected)
    words = model.topics(top_n=5, vocabulary=topic)
    assert words[0] == [w for w, _ in lda.show_topic(0, topn=5)]
    assert words == model.topics(top_n=5, vocabulary=topic.words)


def test_gradients_reach_lstm_and_softmax_but_not_lda(lee):
    train, _, _, lm, topic, lda = lee
    model = _small(lm, topic, lda=lda)
    examples = sentence_examples(train.subset(range(10)), lm, topic, protocol="all_other")
    batch = next(iter(sentence_dataset(examples, batch_size=16, shuffle=False)))
    model(batch)
    lda_weights = [model.topic_inference.topic_word, model.topic_inference.alpha]
    trainable_ids = {id(w) for w in model.trainable_weights}
    assert not any(id(w) in trainable_ids for w in lda_weights)
    with tf.GradientTape(persistent=True) as tape:
        for w in lda_weights:
            tape.watch(w.value)
        loss = model.objective(batch, training=True)["loss"]
    grads = tape.gradient(loss, model.trainable_weights)
    assert all(g is not None and float(tf.reduce_max(tf.abs(g))) > 0 for g in grads)
    kernel = model.softmax.kernel
    assert kernel.shape[0] == 24 + NUM_TOPICS
    theta_rows = tape.gradient(loss, kernel)[24:]
    assert float(tf.reduce_max(tf.abs(theta_rows))) > 0  # theta feeds the softmax
    assert all(tape.gradient(loss, w.value) is None for w in lda_weights)

    before = [np.asarray(w) for w in lda_weights]
    model.compile(optimizer=keras.optimizers.Adam(1e-2))
    model.fit(sentence_dataset(examples, batch_size=16), epochs=1, verbose=0)
    for w, value in zip(lda_weights, before):
        np.testing.assert_array_equal(np.asarray(w), value)


def test_learns_on_real_text_and_beats_unigram_leak_free(lee, tmp_path):
    train, valid, _, lm, topic, lda = lee
    # Train on the papers' context (rest of the document), evaluate leak-free.
    train_ds = sentence_dataset(sentence_examples(train, lm, topic, protocol="all_other"),
                                batch_size=64, seed=0)
    valid_ex = sentence_examples(valid, lm, topic, protocol="preceding")
    valid_ds = sentence_dataset(valid_ex, batch_size=128, shuffle=False)
    keras.utils.set_random_seed(0)
    model = LDALSTMLanguageModel(len(lm), len(topic), num_topics=NUM_TOPICS, embedding_dim=32,
                                 hidden_dim=64, lda=lda)
    # 2 epochs at 1e-2: validation 0.72 x unigram, loss -0.68 (3 epochs at 5e-3 gave
    # 0.78 x and -0.82 for 1.7x the CPU).
    model.compile(optimizer=keras.optimizers.Adam(1e-2))
    checkpoint = tmp_path / "best.keras"
    history = model.fit(train_ds, epochs=2, verbose=0, validation_data=valid_ds, callbacks=[
        keras.callbacks.ModelCheckpoint(checkpoint, monitor="val_ppl", mode="min",
                                        save_best_only=True)])
    losses = history.history["loss"]
    assert losses[-1] < losses[0] - 0.5
    result = evaluate_perplexity(model, valid_ds, protocol="preceding")
    counts = np.array([lm.counts.get(t, 0) for t in lm.tokens], np.float64) + 0.5
    counts[:2] = 0
    with np.errstate(divide="ignore"):
        unigram = np.log(counts / counts.sum())
    targets = valid_ex.targets[valid_ex.mask > 0]
    unigram_ppl = math.exp(-unigram[targets].mean())
    assert result.num_tokens == valid_ex.num_targets
    assert result.perplexity < 0.9 * unigram_ppl, (result.perplexity, unigram_ppl)
    assert model.evaluate(valid_ds, return_dict=True, verbose=0)["ppl"] == pytest.approx(
        result.perplexity, rel=1e-3)
    best = keras.saving.load_model(checkpoint)
    assert evaluate_perplexity(best, valid_ds).perplexity == pytest.approx(
        min(history.history["val_ppl"]), rel=1e-3)


def test_generation_is_the_forward_pass_given_theta_from_a_context_a_topic_or_the_prior(lee):
    """Greedy tokens from a context are the arg-max of the forward pass with that context
    (theta from the same E-step); a topic k is theta = e_k; with neither, theta is a seeded
    draw from LDA's Dirichlet(alpha)."""
    _, valid, _, lm, topic, lda = lee
    model = _small(lm, topic, lda=lda, num_layers=2)
    bow = _dense(lda_bow_corpus(valid, topic)[:1], len(topic))[0]
    ids = np.asarray(model.generate(2, max_len=10, context_bow=bow, sampler="greedy", allow_unk=True))
    assert (ids[0] == ids[1]).all()
    end = list(ids[0]).index(2) + 1 if 2 in ids[0] else len(ids[0])
    tokens = np.concatenate([[1], ids[0, :end - 1]])[None].astype(np.int32)
    logits = model({"tokens": tokens, "context_bow": bow[None]})
    log_probs = np.array(logits, np.float64)[0]
    log_probs[:, :2] = -np.inf                       # <pad> and <bos> are never emitted
    np.testing.assert_array_equal(log_probs.argmax(-1), ids[0, :end])
    # each step's distribution is the forward pass's at that position, normalised
    forward = np.asarray(keras.ops.log_softmax(logits, axis=-1))[0]
    conditioning = model.generation_conditioning(1, context_bow=bow)
    state = model.initial_generation_state(1)
    for t in range(tokens.shape[1]):
        step, state = model.generation_step(tokens[:, t], state, conditioning)
        np.testing.assert_allclose(np.asarray(step)[0], forward[t], atol=1e-5)

    theta = np.asarray(model.generation_conditioning(3, context_bow=bow))
    np.testing.assert_allclose(theta, np.repeat(_gensim_theta(lda, [_sparse(bow)]), 3, 0),
                               atol=2e-3)
    np.testing.assert_array_equal(model.generation_conditioning(2, topic=5),
                                  np.eye(NUM_TOPICS, dtype=np.float32)[[5, 5]])
    # The prior: seeded Dirichlet(alpha) draws, whose mean is alpha / sum(alpha).
    prior = np.asarray(model.generation_conditioning(4000, seed=1))
    assert np.allclose(prior.sum(axis=1), 1.0, atol=1e-5) and (prior >= 0).all()
    np.testing.assert_array_equal(prior, model.generation_conditioning(4000, seed=1))
    assert not np.array_equal(prior, model.generation_conditioning(4000, seed=2))
    np.testing.assert_allclose(prior.mean(axis=0), lda.alpha / lda.alpha.sum(), atol=0.02)
    # A topic changes what is generated.
    by_topic = [np.asarray(model.generate(1, max_len=10, topic=k, sampler="greedy", allow_unk=True))[0] for k in range(NUM_TOPICS)]
    assert len({tuple(row) for row in by_topic}) > 1
    with pytest.raises(ValueError, match=r"topic must be in \[0, num_topics=8\)"):
        model.generate(1, topic=NUM_TOPICS, sampler="greedy", allow_unk=True)
    with pytest.raises(ValueError, match="at most one of topic and context_bow"):
        model.generate(1, topic=0, context_bow=bow, sampler="greedy", allow_unk=True)
    with pytest.raises(ValueError, match="context_bow must have shape"):
        model.generate(1, context_bow=np.ones(len(topic) + 1, np.float32), sampler="greedy", allow_unk=True)


def test_keras_round_trip_keeps_lda_weights_and_outputs(lee, tmp_path):
    _, valid, _, lm, topic, lda = lee
    model = _small(lm, topic, lda=lda, dropout=0.2, lda_iterations=30, gamma_threshold=1e-4)
    examples = sentence_examples(valid, lm, topic)
    dataset = sentence_dataset(examples, batch_size=8, shuffle=False)
    model.compile(optimizer="adam")
    model.fit(dataset.take(2), epochs=1, verbose=0)
    path = tmp_path / "lda_lstm.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert isinstance(loaded, LDALSTMLanguageModel)
    assert loaded.get_config() == model.get_config()
    np.testing.assert_array_equal(np.asarray(loaded.topic_inference.topic_word),
                                  lda.state.get_lambda().astype(np.float32))
    np.testing.assert_array_equal(np.asarray(loaded.topic_inference.alpha),
                                  lda.alpha.astype(np.float32))
    batch = next(iter(dataset))
    np.testing.assert_allclose(np.asarray(loaded(batch)), np.asarray(model(batch)), atol=1e-5)
    np.testing.assert_array_equal(loaded.topics(10), model.topics(10))


def test_defaults_are_50_topics_300_dim_embeddings_600_units_and_50_e_step_iterations():
    model = LDALSTMLanguageModel(100, 20)
    assert (model.num_topics, model.embedding_dim, model.hidden_dim, model.num_layers,
            model.lda_iterations) == (50, 300, 600, 1, 50)
    inference = model.topic_inference
    assert (inference.num_topics, inference.iterations) == (50, 50)
    assert inference.compute_output_shape((4, 20)) == (4, 50)
    assert inference.compute_output_shape((2, 3, 20)) == (2, 3, 50)


def test_bad_arguments(lee):
    train, _, _, lm, topic, lda = lee
    with pytest.raises(ValueError, match="num_topics must be >= 1"):
        LDALSTMLanguageModel(10, 5, num_topics=0)
    with pytest.raises(ValueError, match="topic_vocab_size must be >= 1"):
        LDALSTMLanguageModel(10, 0)
    with pytest.raises(ValueError, match="hidden_dim must be >= 1"):
        LDALSTMLanguageModel(10, 5, hidden_dim=0)
    with pytest.raises(ValueError, match="document_level must be False"):
        LDALSTMLanguageModel(10, 5, document_level=True)
    with pytest.raises(ValueError, match="num_topics=3 and vocab_size"):
        LDALSTMLanguageModel(len(lm), len(topic), num_topics=3, lda=lda)
    with pytest.raises(ValueError, match="lda must be a gensim LdaModel"):
        LDALSTMLanguageModel(len(lm), len(topic), num_topics=NUM_TOPICS, lda="lda.model")
    with pytest.raises(ValueError, match="'topic_word' and 'alpha'"):
        LDATopicInference(2, 3, lda={"topic_word": np.ones((2, 3))})
    with pytest.raises(ValueError, match="strictly positive"):
        LDATopicInference(2, 3, lda={"topic_word": np.zeros((2, 3)), "alpha": np.ones(2)})
    with pytest.raises(ValueError, match="gamma_threshold must be >= 0"):
        LDATopicInference(2, 3, gamma_threshold=-1)
    with pytest.raises(ValueError, match="iterations must be >= 1"):
        LDATopicInference(2, 3, iterations=0)
    with pytest.raises(ValueError, match="passes must be >= 1"):
        fit_lda(train, topic, num_topics=2, passes=0)
    # the boundaries are allowed: one topic, one pass, one E-step iteration
    assert fit_lda(train[:20], topic, num_topics=1, passes=1).num_topics == 1
    assert LDATopicInference(1, 1, iterations=1)(np.ones((2, 1), np.float32)).shape == (2, 1)
    one = LDALSTMLanguageModel(10, 1, num_topics=1, embedding_dim=4, hidden_dim=4)
    assert one({"tokens": np.ones((2, 3), np.int32),
                "context_bow": np.ones((2, 1), np.float32)}).shape == (2, 3, 10)
    model = _small(lm, topic, lda=lda)
    tokens = np.ones((2, 5), np.int32)
    model({"tokens": tokens, "context_bow": np.zeros((2, len(topic)), np.float32)})
    with pytest.raises(ValueError, match="'context_bow'"):
        model({"tokens": tokens})
    with pytest.raises(ValueError, match="topic_vocab_size="):
        model({"tokens": tokens, "context_bow": np.zeros((2, len(topic) + 1), np.float32)})
    with pytest.raises(ValueError, match=r"top_n must be an integer in \[1, "):
        model.topics(top_n=0)
    with pytest.raises(ValueError, match="vocabulary has 2 words"):
        model.topics(vocabulary=["a", "b"])
