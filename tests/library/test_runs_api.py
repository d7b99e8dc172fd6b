"""`tfktopic.runs` as the one run path: prepare_data, data rules, NPMI reference, build_model."""

import json

import numpy as np
import pytest
import tensorflow as tf

from tfktopic import runs
from tfktopic.data import load_corpus


@pytest.fixture(scope="module")
def lee():
    return load_corpus("lee")


def _tiny_tcnlm():
    settings = runs.preset_settings("tcnlm", "small")
    settings["model"].update(hidden_dim=32, factor_dim=32, embedding_dim=16)
    return settings


def test_prepare_data_is_the_split_vocabularies_and_examples_of_the_pieces(lee):
    settings = _tiny_tcnlm()
    data = runs.prepare_data(settings, "lee", seed=3)
    parts = runs.split_corpus(lee, 3)
    assert {k: [d for d in v] for k, v in data.parts.items()} == \
        {k: [d for d in v] for k, v in parts.items()}
    lm_vocab, topic_vocab = runs.build_vocabularies(parts["train"], settings["data"])
    assert data.lm_vocab.tokens == lm_vocab.tokens and data.topic_vocab.words == topic_vocab.words
    train = runs.make_examples("tcnlm", parts["train"], lm_vocab, topic_vocab, settings["data"],
                               protocol="all_other")
    test = runs.make_examples("tcnlm", parts["test"], lm_vocab, topic_vocab, settings["data"])
    np.testing.assert_array_equal(data.examples["train"].targets, train.targets)
    np.testing.assert_array_equal(data.examples["test"].targets, test.targets)
    batch = next(iter(data.dataset("train", 8)))
    assert tuple(batch["tokens"].shape) == (8, settings["data"]["max_len"])
    # A Corpus object gives the same data as its name.
    again = runs.prepare_data(settings, lee, seed=3)
    assert again.topic_vocab.words == data.topic_vocab.words


def test_a_threshold_given_for_a_reference_size_is_scaled_once(lee):
    paper = runs.preset_settings("tcnlm", "paper")
    assert paper["data"]["min_doc_freq"] == 100
    assert paper["data"]["min_doc_freq_reference_docs"] == 50000
    resolved, notes = runs.resolve_data_rules(paper["data"], 240)
    assert resolved["min_doc_freq"] == 1  # 100 * 240 / 50,000 rounds to 0: at least 1
    assert resolved["min_doc_freq_rule"] == {"given": 100, "reference_docs": 50000,
                                             "train_documents": 240}
    assert "scaled to 1 for 240" in notes[0]
    assert runs.resolve_data_rules(resolved, 240) == (resolved, [])  # idempotent
    # Never scaled up for a corpus larger than the reference.
    assert runs.resolve_data_rules(paper["data"], 60000)[0]["min_doc_freq"] == 100

    settings = _tiny_tcnlm()
    runs.apply_overrides(settings, {"min_doc_freq": 20, "min_doc_freq_reference_docs": 480})
    data = runs.prepare_data(settings, "lee")
    assert data.data["min_doc_freq"] == 10 and "min_doc_freq_reference_docs" not in data.data
    direct = runs.build_vocabularies(data.parts["train"], {**settings["data"], "min_doc_freq": 10})
    assert data.topic_vocab.words == direct[1].words

    # An explicit --set min_doc_freq is absolute: the preset's reference is dropped.
    explicit = runs.apply_overrides(runs.preset_settings("tcnlm", "paper"), ["min_doc_freq=5"])
    assert "min_doc_freq_reference_docs" not in explicit["data"]
    assert runs.resolve_data_rules(explicit["data"], 240)[0]["min_doc_freq"] == 5


def test_train_run_records_the_resolved_rule_in_run_json(tmp_path):
    out = tmp_path / "run"
    runs.train_run("tcnlm", out, max_documents=40, epochs=1, batch_size=512, verbose=0,
                   log=None, overrides={"hidden_dim": 32, "factor_dim": 32, "embedding_dim": 16,
                                        "min_doc_freq": 8, "min_doc_freq_reference_docs": 64})
    config = json.loads((out / "run.json").read_text())
    assert config["data"]["min_doc_freq"] == 4  # 8 * 32 training documents / 64
    assert config["data"]["min_doc_freq_rule"]["train_documents"] == 32
    run = runs.load_run(out)
    train = runs.run_splits(config)["train"]
    expected = runs.build_vocabularies(train, config["data"])[1]
    assert run.topic_vocab.words == expected.words

    # evaluate: NPMI of the top-10 words against the run's training split, whatever is scored.
    from tfktopic.evaluation import npmi_coherence

    report = runs.evaluate_run(run, corpus="lee", max_documents=12, num_generated=0, log=None)
    topics = runs.run_topics(run, 10)
    direct = npmi_coherence(topics, counts=runs.npmi_reference(train, sum(topics, [])),
                            cardinalities=(10,))
    assert report["npmi"]["mean"] == pytest.approx(direct.mean)
    assert report["npmi"]["reference"] == runs.NPMI_REFERENCE
    # Diversity of the top-25 words (Dieng et al. 2020), and a same-K LDA beside it.
    from tfktopic.evaluation.coherence import topic_diversity

    assert report["diversity"]["value"] == topic_diversity(runs.run_topics(run, 25), 25)
    assert "lda_baseline" not in report
    with_lda = runs.evaluate_run(run, corpus="lee", max_documents=12, num_generated=0,
                                 log=None, lda_baseline=True)
    assert with_lda["lda_baseline"]["num_topics"] == len(topics)
    assert 1 / len(topics) <= with_lda["lda_baseline"]["diversity"] <= 1.0
    # train_run's results hold the same quality report (LDA on the same split)
    results = json.loads((out / "results.json").read_text())
    assert results["topic_quality"]["model"]["npmi"] == pytest.approx(report["npmi"]["mean"])
    assert results["topic_quality"]["lda"]["npmi"] == pytest.approx(
        with_lda["lda_baseline"]["npmi"])
    # Without its training corpus the NPMI is skipped with the reason, not silently.
    run.config["corpus"] = str(tmp_path / "gone.txt")
    run.config["format"] = "tdlm"
    report = runs.evaluate_run(run, corpus="lee", max_documents=12, num_generated=0, log=None)
    assert "gone.txt" in report["npmi"]["skipped"] and "mean" not in report["npmi"]
    assert report["perplexity"]["num_tokens"] > 0


def test_a_corpus_that_comes_split_keeps_its_parts(lee):
    corpora = {"train": lee.subset(range(0, 30)), "valid": lee.subset(range(30, 35)),
               "test": lee.subset(range(35, 40))}
    data = runs.prepare_data(_tiny_tcnlm(), corpora)
    assert [len(data.parts[k]) for k in ("train", "valid", "test")] == [30, 5, 5]
    assert list(data.parts["test"]) == list(corpora["test"])
    with pytest.raises(ValueError, match="train, valid and test"):
        runs.prepare_data(_tiny_tcnlm(), {"train": lee, "test": lee})


def test_random_document_subset_is_seeded_and_in_file_order(lee):
    settings = _tiny_tcnlm()
    first = runs.prepare_data(settings, "lee", max_documents=50)
    assert list(first.corpus) == list(lee.subset(range(50)))
    sample = runs.prepare_data(settings, "lee", max_documents=50, subset_seed=0)
    order = sorted(np.random.default_rng(0).permutation(len(lee))[:50].tolist())
    assert list(sample.corpus) == list(lee.subset(order))


def test_for_model_gives_the_examples_prepare_data_gives_that_model():
    settings = runs.preset_settings("rgbn_rnn", "small")
    chunks = runs.prepare_data(settings, "lee", max_documents=40)
    assert chunks.unit == "chunks" and chunks.examples["train"].tokens.ndim == 3
    windows = chunks.for_model("lstm")
    direct = runs.prepare_data({**settings, "name": "lstm"}, "lee", max_documents=40)
    np.testing.assert_array_equal(windows.examples["test"].targets,
                                  direct.examples["test"].targets)
    assert windows.lm_vocab is chunks.lm_vocab and windows.unit == "windows"
    leaky = windows.with_protocol("all_other")
    assert leaky.examples["train"] is windows.examples["train"]


@pytest.mark.parametrize("model", ["rgbn_rnn", "tcnlm"])
def test_train_context_preceding_trains_on_the_contexts_every_model_is_scored_with(model):
    settings = runs.preset_settings(model, "small")
    default = runs.prepare_data(settings, "lee", max_documents=40)
    settings["data"]["train_context"] = "preceding"
    preceding = runs.prepare_data(settings, "lee", max_documents=40)
    for protocol, data in (("all_other", default), ("preceding", preceding)):
        train = runs.make_examples(model, data.parts["train"], data.lm_vocab, data.topic_vocab,
                                   data.data, protocol=protocol)
        assert data.examples["train"].protocol == protocol
        np.testing.assert_array_equal(data.examples["train"].context_values,
                                      train.context_values)
    # Leak-free training contexts are the shorter ones: a document's first sentence has none.
    assert preceding.examples["train"].context_values.size < \
        default.examples["train"].context_values.size
    np.testing.assert_array_equal(preceding.examples["test"].context_values,
                                  default.examples["test"].context_values)
    settings["data"]["train_context"] = "whole_document"
    with pytest.raises(ValueError, match=f"train_context: {model} trains with one of "
                                         "all_other, preceding"):
        runs.prepare_data(settings, "lee", max_documents=40)


def test_npmi_reference_is_the_training_split(lee):
    data = runs.prepare_data(_tiny_tcnlm(), "lee", max_documents=60)
    train_words = {w for doc in data.parts["train"] for s in doc for w in s}
    test_only = sorted({w for doc in data.parts["test"] for s in doc for w in s} - train_words)
    assert test_only, "the test split should hold a word the training split lacks"
    counts = data.npmi_reference(test_only[:3] + ["the"])
    tokens = sum(len(s) for doc in data.parts["train"] for s in doc)
    assert counts.num_documents == len(data.parts["train"]) and counts.num_tokens == tokens
    assert counts.window_size == 20 and runs.NPMI_REFERENCE.startswith("the training split")


def test_build_model_without_topic_updates_leaves_phi_unchanged():
    settings = runs.preset_settings("gbn_rnn", "small")
    settings["model"].update(num_layers=1, hidden_sizes=[8], topic_sizes=[4], embedding_dim=8)
    data = runs.prepare_data(settings, "lee", max_documents=20)
    batch = {k: tf.constant(v) for k, v in next(iter(data.dataset("train", 2))).items()}
    phis = {}
    for updates in (True, False):
        model = runs.build_model(settings, data, seed=0, topic_updates=updates)
        model(batch)
        before = np.asarray(model.phis[0]).copy()
        logs = model.train_step(batch)
        assert np.isfinite(float(logs["loss"]))
        phis[updates] = np.allclose(np.asarray(model.phis[0]), before)
    assert phis == {True: False, False: True}
    with pytest.raises(ValueError, match="topic_updates=False applies to rgbn_rnn and gbn_rnn"):
        runs.build_model(_tiny_tcnlm(), runs.prepare_data(_tiny_tcnlm(), "lee", max_documents=20),
                         topic_updates=False)


def test_build_model_names_a_bad_setting():
    settings = _tiny_tcnlm()
    data = runs.prepare_data(settings, "lee", max_documents=20)
    settings["model"]["no_such_argument"] = 1
    with pytest.raises(ValueError, match="--set: a setting is not an argument of tcnlm"):
        runs.build_model(settings, data)


def test_global_clipnorm_clips_all_gradients_together_like_clip_grad_norm():
    """``--set global_clipnorm=0.5`` scales every gradient by 0.5 / (norm of all of them), as
    PyTorch's ``clip_grad_norm_`` (Zheng et al.'s training), not each variable by its own
    norm; with the preset's per-variable clipnorm still set it names the override to add."""
    settings = runs.preset_settings("doc_lstm", "medium")
    runs.apply_overrides(settings, ["global_clipnorm=0.5"])
    with pytest.raises(ValueError, match=r"global_clipnorm=0.5: .*clipnorm=5.0.*--set clipnorm=null"):
        runs.build_optimizer(settings, 1000)
    runs.apply_overrides(settings, ["clipnorm=null", "learning_rate=0.1"])
    optimizer = runs.build_optimizer(settings, 1000)
    a, b = tf.Variable([0.0, 0.0]), tf.Variable([0.0])
    big = [np.array([3.0, 4.0]), np.array([12.0])]          # global norm 13: clipped
    for grads in (big, [g / 100 for g in big]):             # norm 0.13: left alone
        optimizer.apply_gradients([(tf.constant(g, tf.float32), v) for g, v in zip(grads, (a, b))])

    def adam(gradients, rate=0.1, beta1=0.9, beta2=0.999, eps=1e-7):  # Keras' form of eps
        m = v = x = 0.0
        for t, g in enumerate(gradients, 1):
            m, v = beta1 * m + (1 - beta1) * g, beta2 * v + (1 - beta2) * g * g
            x = x - rate * np.sqrt(1 - beta2 ** t) / (1 - beta1 ** t) * m / (np.sqrt(v) + eps)
        return x

    scaled = [[g * 0.5 / 13 for g in big], [g / 100 for g in big]]
    expected = [adam([step[i] for step in scaled]) for i in range(2)]
    per_variable = [adam([big[i] * 0.5 / np.linalg.norm(big[i]), big[i] / 100])
                    for i in range(2)]
    np.testing.assert_allclose(np.asarray(a), expected[0], rtol=1e-5)
    np.testing.assert_allclose(np.asarray(b), expected[1], rtol=1e-5)
    assert not np.allclose(np.asarray(a), per_variable[0], rtol=1e-3)
