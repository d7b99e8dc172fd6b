"""SavedModel export: every family, reloaded in a fresh process without tfktopic.

Each model family is trained for a few steps on a slice of the embedded Lee
corpus, exported, and then ONE subprocess that imports only TensorFlow and
numpy (tfktopic and TFP are blocked) loads every export, calls each signature
on saved inputs and writes the outputs; they must equal the in-process model.
"""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

from tfktopic.data import (TopicVocabulary, Vocabulary, document_sequences, load_corpus,
                           sentence_examples)
from tfktopic.data.pipeline import document_dataset, sentence_dataset
from tfktopic.errors import VocabularyError
from tfktopic.export import export_saved_model
from tfktopic.models import RGBNRNN, TCNLM, LDALSTMLanguageModel, LSTMLanguageModel, TopicRNN
from tfktopic.models.lstm.document_lstm import DocumentLSTMLanguageModel
from tfktopic.models.topicrnn.document import DocumentTopicRNN

FAMILIES = ("lstm", "doc_lstm_chunked", "lda_lstm", "topicrnn", "tcnlm", "rgbn_rnn")
CHUNKED = ("doc_lstm_chunked", "rgbn_rnn")
TOPIC_MODELS = ("lda_lstm", "topicrnn", "tcnlm", "rgbn_rnn")
INPUTS = ("tokens", "targets", "mask", "context_bow")

# Runs in a fresh interpreter: TensorFlow and numpy only. tfktopic and TFP
# cannot be imported at all, so the SavedModels must be self-contained.
LOADER = r"""
import importlib.abc, json, sys
assert "tfktopic" not in sys.modules

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("tfktopic", "tensorflow_probability"):
            raise ImportError(f"{name} must not be needed to serve an export")

sys.meta_path.insert(0, Block())
import numpy as np
import tensorflow as tf
for entry in json.load(open(sys.argv[1])):
    serving = tf.saved_model.load(entry["path"])
    signatures = serving.signatures
    x = {k: tf.constant(v) for k, v in np.load(entry["inputs"]).items()}
    out = {"signatures": np.array(sorted(signatures))}
    out["log_probs"] = signatures["next_token_log_probs"](
        tokens=x["tokens"], context_bow=x["context_bow"])["log_probs"].numpy()
    out["default"] = signatures["serving_default"](
        tokens=x["tokens"], context_bow=x["context_bow"])["log_probs"].numpy()
    # Dynamic batch and length: 2 rows, 3 fewer steps.
    out["log_probs_small"] = signatures["next_token_log_probs"](
        tokens=x["tokens"][:2, ..., :-3], context_bow=x["context_bow"][:2])["log_probs"].numpy()
    if entry["ignores_context"]:
        zeros = tf.zeros(x["context_bow"].shape[:-1] + (1,))
        out["log_probs_no_context"] = signatures["next_token_log_probs"](
            tokens=x["tokens"], context_bow=zeros)["log_probs"].numpy()
    scores = signatures["score_sentences"](**x)
    out["log_likelihood"] = scores["log_likelihood"].numpy()
    out["num_tokens"] = scores["num_tokens"].numpy()
    if "topic_proportions" in signatures:
        for key, value in signatures["topic_proportions"](bow=x["context_bow"]).items():
            out["topics/" + key] = value.numpy()
    if "vocabulary" in signatures:
        for key, value in signatures["vocabulary"]().items():
            out["vocab/" + key] = np.array([w.decode("utf-8") for w in value.numpy()])
    np.savez(entry["outputs"], **out)

assert not [m for m in sys.modules if m.split(".")[0] in ("tfktopic", "tensorflow_probability")]
print("served", len(json.load(open(sys.argv[1]))))
"""


def _lee():
    train = load_corpus("lee").subset(range(40))
    lm = Vocabulary.build(train, min_count=3)
    topic = TopicVocabulary.build(train, lm, min_doc_freq=2)
    sentences = sentence_examples(train, lm, topic, max_len=12, protocol="preceding")
    documents = document_sequences(train, lm, topic, sentences_per_chunk=3, max_len=12,
                                   protocol="preceding")
    return lm, topic, sentences, documents


def _model(name, lm, topic, num_documents):
    V, V_c = len(lm), len(topic)
    small = dict(embedding_dim=16, hidden_dim=16)
    if name == "lstm":
        return LSTMLanguageModel(V, **small)
    if name == "doc_lstm_chunked":
        return LSTMLanguageModel(V, document_level=True, **small)
    if name == "lda_lstm":
        rng = np.random.default_rng(0)   # an LDA's lambda / alpha (gensim is not the subject)
        lda = {"topic_word": rng.gamma(0.5, 2.0, (4, V_c)) + 0.01, "alpha": np.full(4, 0.25)}
        return LDALSTMLanguageModel(V, V_c, num_topics=4, lda=lda, **small)
    if name == "topicrnn":
        return TopicRNN(V, topic.lm_to_topic, num_topics=4, encoder_units=(16,), seed=1, **small)
    if name == "tcnlm":
        return TCNLM(V, V_c, num_topics=4, ntm_units=(16,), seed=1, **small)
    return RGBNRNN(V, V_c, num_documents=num_documents, num_layers=2, hidden_sizes=(16, 12),
                   topic_sizes=(6, 4), embedding_dim=16, dropout=0.1, seed=1)


def _log_softmax(x):
    x = np.asarray(x, np.float64)
    top = x.max(-1, keepdims=True)
    return x - top - np.log(np.exp(x - top).sum(-1, keepdims=True))


def _reference(model, name, x):
    """What the in-process model gives (eager call, no export code involved)."""
    batch = {k: tf.constant(v) for k, v in x.items()}
    small = {k: tf.constant(v[:2, ..., :-3] if k == "tokens" else v[:2]) for k, v in x.items()}
    log_probs = _log_softmax(model(batch, training=False))
    picked = np.take_along_axis(log_probs, x["targets"][..., None].astype(np.int64), -1)[..., 0]
    ref = {"log_probs": log_probs,
           "log_probs_small": _log_softmax(model(small, training=False)),
           "log_likelihood": (picked * x["mask"]).sum(-1),
           "num_tokens": x["mask"].sum(-1)}
    bow = batch["context_bow"]
    if name == "lda_lstm":
        ref["topics/proportions"] = model.topic_proportions(bow)
    elif name == "topicrnn":
        ref["topics/proportions"] = model.topic_posterior(bow, training=False)[1]
    elif name == "tcnlm":
        ref["topics/proportions"] = model.topic_model(bow, training=False)[0]
    elif name == "rgbn_rnn":
        thetas = [np.asarray(t, np.float64) for t in model.forward(batch)["thetas"]]
        ref["topics/proportions"] = thetas[0] / thetas[0].sum(-1, keepdims=True)
        ref.update({f"topics/theta_{l + 1}": t for l, t in enumerate(thetas)})
    return {k: np.asarray(v) for k, v in ref.items()}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    lm, topic, sentences, documents = _lee()
    root = tmp_path_factory.mktemp("export")
    manifest, expected = [], {}
    for name in FAMILIES:
        chunked = name in CHUNKED
        keras.utils.set_random_seed(0)
        model = _model(name, lm, topic, len(documents))
        # Two eager training steps, so the exported weights are trained, not initial.
        model.compile(optimizer=keras.optimizers.Adam(1e-2))
        dataset = (document_dataset(documents, batch_size=4, seed=0) if chunked else
                   sentence_dataset(sentences, batch_size=16, seed=0,
                                    document_targets=name == "topicrnn"))
        batches = list(dataset.take(2))
        model(batches[0])                         # builds the plain LSTMs
        initial = [w.numpy().copy() for w in model.trainable_weights]
        for batch in batches:
            model.train_step(batch)
        assert not all(np.array_equal(a, w.numpy())
                       for a, w in zip(initial, model.trainable_weights))
        x = next(iter(document_dataset(documents, batch_size=4, shuffle=False) if chunked else
                      sentence_dataset(sentences, batch_size=5, shuffle=False)))
        x = {k: np.asarray(x[k]) for k in INPUTS}
        path = export_saved_model(model, root / name, lm_vocab=lm, topic_vocab=topic)
        assert path == root / name
        np.savez(root / f"{name}_in.npz", **x)
        expected[name] = (x, _reference(model, name, x))
        manifest.append({"path": str(path), "inputs": str(root / f"{name}_in.npz"),
                         "outputs": str(root / f"{name}_out.npz"),
                         "ignores_context": name in ("lstm", "doc_lstm_chunked")})
    (root / "manifest.json").write_text(json.dumps(manifest))
    process = subprocess.run([sys.executable, "-c", LOADER, str(root / "manifest.json")],
                             cwd=root, capture_output=True, text=True, timeout=600,
                             env={**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
                                  "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert process.returncode == 0, process.stderr[-4000:]
    assert f"served {len(FAMILIES)}" in process.stdout
    results = {name: (x, ref, dict(np.load(root / f"{name}_out.npz")))
               for name, (x, ref) in expected.items()}
    return {"results": results, "lm": lm, "topic": topic}


@pytest.mark.parametrize("name", FAMILIES)
def test_fresh_process_outputs_equal_in_process_model(served, name):
    x, ref, out = served["results"][name]
    expected = {"next_token_log_probs", "score_sentences", "serving_default", "vocabulary"}
    if name in TOPIC_MODELS:
        expected.add("topic_proportions")
    assert set(out["signatures"]) == expected
    shape = x["tokens"].shape
    assert out["log_probs"].shape == shape + (len(served["lm"]),)
    assert out["log_likelihood"].shape == shape[:-1] == out["num_tokens"].shape
    np.testing.assert_array_equal(out["default"], out["log_probs"])
    for key in ("log_probs", "log_probs_small", "log_likelihood"):
        np.testing.assert_allclose(out[key], ref[key], rtol=1e-5, atol=2e-5, err_msg=key)
    np.testing.assert_array_equal(out["num_tokens"], ref["num_tokens"])
    topic_keys = sorted(k for k in ref if k.startswith("topics/"))
    assert sorted(k for k in out if k.startswith("topics/")) == topic_keys
    assert topic_keys or name not in TOPIC_MODELS
    for key in topic_keys:
        np.testing.assert_allclose(out[key], ref[key], rtol=1e-5, atol=1e-6, err_msg=key)
    if name in ("lstm", "doc_lstm_chunked"):
        np.testing.assert_array_equal(out["log_probs_no_context"], out["log_probs"])


@pytest.mark.parametrize("name", FAMILIES)
def test_served_log_probs_normalise_and_scores_add_up(served, name):
    x, _, out = served["results"][name]
    top = out["log_probs"].max(-1, keepdims=True)
    log_norm = np.log(np.exp(out["log_probs"] - top).sum(-1)) + top[..., 0]
    np.testing.assert_allclose(log_norm, 0.0, atol=1e-5)
    picked = np.take_along_axis(out["log_probs"], x["targets"][..., None].astype(np.int64), -1)
    np.testing.assert_allclose(out["log_likelihood"], (picked[..., 0] * x["mask"]).sum(-1),
                               rtol=1e-5, atol=1e-4)
    assert np.all(out["log_likelihood"][out["num_tokens"] > 0] < 0)
    assert np.all(out["log_likelihood"][out["num_tokens"] == 0] == 0)
    if name in TOPIC_MODELS and name != "topicrnn":     # TopicRNN's theta is Gaussian
        np.testing.assert_allclose(out["topics/proportions"].sum(-1), 1.0, atol=1e-5)


def test_vocabulary_signature_maps_ids_without_tfktopic(served):
    lm, topic = served["lm"], served["topic"]
    for name, (_, _, out) in served["results"].items():
        assert out["vocab/lm_words"].tolist() == lm.tokens, name
        assert out["vocab/topic_words"].tolist() == topic.words, name


def test_stateful_model_is_served_from_a_zero_state_and_reexported(tmp_path):
    keras.utils.set_random_seed(0)
    model = LSTMLanguageModel(20, embedding_dim=8, hidden_dim=8, stateful=True)
    tokens = np.random.default_rng(0).integers(1, 20, (2, 6)).astype(np.int32)
    model(tokens)
    model(tokens)                                 # the carried state is not zero now
    model.reset_states()
    expected = _log_softmax(model(tokens))
    export_saved_model(model, tmp_path / "stateful")
    model(tokens)                                 # an earlier export is overwritten
    serving = tf.saved_model.load(str(export_saved_model(model, tmp_path / "stateful")))
    assert set(serving.signatures) == {"next_token_log_probs", "score_sentences",
                                       "serving_default"}      # no vocabulary given
    signature = serving.signatures["next_token_log_probs"]
    for _ in range(2):                            # no state carried between requests
        got = signature(tokens=tf.constant(tokens), context_bow=tf.zeros((2, 1)))["log_probs"]
        np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5, atol=1e-5)
    got = signature(tokens=tf.constant(tokens[:1]), context_bow=tf.zeros((1, 1)))["log_probs"]
    np.testing.assert_allclose(got.numpy(), expected[:1], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("topical", [False, True], ids=["doc_lstm", "doc_topicrnn"])
def test_a_streamed_model_serves_each_request_as_a_new_document(tmp_path, topical):
    """A served streamed model starts every request from a zero state, whatever its
    carried state (and serving leaves that state alone): its log-probabilities are
    those of a document's first window (reset = 1) in the model, for any batch size."""
    keras.utils.set_random_seed(0)
    lm_to_topic = np.array([-1, -1, -1, -1] + list(range(16)))
    model = (DocumentTopicRNN(20, lm_to_topic, num_topics=3, hidden_dim=8, embedding_dim=8,
                              encoder_units=(8,), max_streams=2) if topical
             else DocumentLSTMLanguageModel(20, embedding_dim=8, hidden_dim=8, max_streams=2))
    rng = np.random.default_rng(0)
    tokens = rng.integers(1, 20, (2, 6)).astype(np.int32)
    bow = rng.integers(0, 3, (2, 16)).astype(np.float32)
    first = {"tokens": tokens, "reset": np.ones(2, np.float32), "context_bow": bow}
    expected = _log_softmax(model(first))
    later = {**first, "reset": np.zeros(2, np.float32)}
    assert not np.allclose(_log_softmax(model(later)), expected)   # a carried state
    carried = [v.numpy().copy() for v in model.non_trainable_weights]
    serving = tf.saved_model.load(str(export_saved_model(model, tmp_path / "streamed")))
    signature = serving.signatures["next_token_log_probs"]
    width = 16 if topical else 1
    for rows in (2, 5):                              # more rows than max_streams too
        got = signature(tokens=tf.constant(np.tile(tokens, (3, 1))[:rows]),
                        context_bow=tf.constant(np.tile(bow, (3, 1))[:rows, :width]))
        np.testing.assert_allclose(got["log_probs"].numpy()[:2], expected, rtol=1e-5,
                                   atol=1e-5)
    for before, variable in zip(carried, model.non_trainable_weights):
        np.testing.assert_array_equal(before, variable.numpy())


def test_each_signature_is_traced_once_and_no_gradient_function_is_saved(tmp_path,
                                                                         monkeypatch):
    """`save` finds the export's own traces (no second trace inside the save) and the
    fused LSTM's `tf.custom_gradient` gradient is not traced (serving only)."""
    keras.utils.set_random_seed(0)
    model = LSTMLanguageModel(20, embedding_dim=8, hidden_dim=8)
    tokens = np.ones((2, 5), np.int32)
    model(tokens)
    calls = []
    call = type(model).call
    monkeypatch.setattr(type(model), "call",
                        lambda self, *a, **k: (calls.append(1), call(self, *a, **k))[1])
    export_saved_model(model, tmp_path / "once")
    assert len(calls) == 2          # next_token_log_probs and score_sentences, once each
    saved = saved_model_pb2.SavedModel()
    saved.ParseFromString((tmp_path / "once" / "saved_model.pb").read_bytes())
    assert not saved.meta_graphs[0].graph_def.library.registered_gradients  # TF's default: 2
    loaded = tf.saved_model.load(str(tmp_path / "once"))
    got = loaded.signatures["next_token_log_probs"](tokens=tf.constant(tokens),
                                                    context_bow=tf.zeros((2, 1)))
    np.testing.assert_allclose(got["log_probs"].numpy(), _log_softmax(model(tokens)),
                               rtol=1e-5, atol=1e-5)


def test_bad_input_gives_clear_errors(tmp_path):
    unbuilt = LSTMLanguageModel(20, embedding_dim=8, hidden_dim=8)
    with pytest.raises(ValueError, match="no weights yet"):
        export_saved_model(unbuilt, tmp_path / "unbuilt")
    with pytest.raises(TypeError, match="supports LSTMLanguageModel"):
        export_saved_model(keras.Sequential([keras.layers.Dense(2)]), tmp_path / "seq")
    model = TCNLM(20, 6, num_topics=2, embedding_dim=8, hidden_dim=8, ntm_units=(8,))
    (tmp_path / "file").write_text("x")
    with pytest.raises(FileExistsError, match="is an existing file"):
        export_saved_model(model, tmp_path / "file")
    with pytest.raises(NotADirectoryError, match="is a file"):
        export_saved_model(model, tmp_path / "file" / "export")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "notes.txt").write_text("x")
    with pytest.raises(FileExistsError, match="not a SavedModel"):
        export_saved_model(model, tmp_path / "full")
    with pytest.raises(VocabularyError, match="has 3 words but the model expects 20"):
        export_saved_model(model, tmp_path / "v", lm_vocab=["a", "b", "c"])
    with pytest.raises(VocabularyError, match="has 2 words but the model expects 6"):
        export_saved_model(model, tmp_path / "v", topic_vocab=["a", "b"])
    assert not (tmp_path / "v").exists() and not (tmp_path / "unbuilt").exists()


def test_an_export_that_fails_midway_leaves_nothing_and_keeps_an_earlier_export(
        tmp_path, monkeypatch):
    model = LSTMLanguageModel(20, embedding_dim=8, hidden_dim=8)
    model(np.ones((1, 3), np.int32))
    real_save = tf.saved_model.save

    def full_disk(obj, export_dir, **kwargs):
        # Part of the SavedModel is on disk when the disk fills up.
        os.makedirs(os.path.join(export_dir, "variables"), exist_ok=True)
        with open(os.path.join(export_dir, "saved_model.pb"), "wb") as handle:
            handle.write(b"partial")
        raise tf.errors.ResourceExhaustedError(None, None, "No space left on device")

    monkeypatch.setattr(tf.saved_model, "save", full_disk)
    with pytest.raises(tf.errors.ResourceExhaustedError):
        export_saved_model(model, tmp_path / "new")
    assert sorted(os.listdir(tmp_path)) == []          # no partial SavedModel, no temporary
    monkeypatch.setattr(tf.saved_model, "save", real_save)
    export_saved_model(model, tmp_path / "earlier")
    before = (tmp_path / "earlier" / "saved_model.pb").read_bytes()
    monkeypatch.setattr(tf.saved_model, "save", full_disk)
    with pytest.raises(tf.errors.ResourceExhaustedError):
        export_saved_model(model, tmp_path / "earlier")
    assert sorted(os.listdir(tmp_path)) == ["earlier"]
    assert (tmp_path / "earlier" / "saved_model.pb").read_bytes() == before
    assert tf.saved_model.load(str(tmp_path / "earlier")).signatures["score_sentences"]
