"""Functions that run one model family's step under the process's Keras backend.

Used by `tests/test_models_backends.py` in-process (TensorFlow, the suite's backend) and
through `tests.backends.run_in_backend` (a fresh ``KERAS_BACKEND=jax`` process); each takes
and returns numpy values only.

Families: ``bigram`` (the doctest model of `tfktopic.models.base`), ``lstm`` (the sentence
LSTM LM), ``doc_lstm`` (the streamed document LSTM), ``doc_topicrnn`` (the streamed
document TopicRNN), and the topic models ``topicrnn``, ``tcnlm``, ``lda_lstm``, ``rgbn_rnn``
(TLASGR inside the step), built small.
"""

import keras
import numpy as np
from keras import ops

from tfktopic.evaluation.perplexity import masked_token_nll
from tfktopic.models.base import TopicLanguageModel

V, T, B, V_C = 12, 5, 6, 9
#: The topic models' LM-id -> topic-id map: ids 0..2 special, 3..11 the V_C content words.
LM_TO_TOPIC = np.array([-1, -1, -1] + list(range(V_C)), np.int32)
#: The families whose batches carry a document context (``context_bow``, ``doc_targets``).
TOPIC_FAMILIES = ("topicrnn", "tcnlm", "lda_lstm")


@keras.saving.register_keras_serializable(package="tfktopic_tests")
class Bigram(TopicLanguageModel):
    """The base class's doctest model: a table of next-token logits."""

    def __init__(self, vocab_size, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.table = keras.layers.Embedding(vocab_size, vocab_size)

    def call(self, inputs, training=False):
        return self.table(inputs["tokens"])

    def objective(self, data, training=False):
        nll_sum, num_tokens = masked_token_nll(data["targets"], self(data, training=training),
                                               data["mask"])
        return {"loss": nll_sum / ops.maximum(num_tokens, 1.0), "units": num_tokens,
                "nll_sum": nll_sum, "num_tokens": num_tokens}

    def get_config(self):
        return {**super().get_config(), "vocab_size": self.vocab_size}


def batch(seed=0):
    """A tiny learnable batch: each sentence counts up from a random start (mod V, ids >= 4),
    the last position padded."""
    rng = np.random.default_rng(seed)
    start = rng.integers(4, V, size=(B, 1))
    tokens = 4 + (start - 4 + np.arange(T)[None]) % (V - 4)
    targets = 4 + (tokens - 4 + 1) % (V - 4)
    mask = np.ones((B, T), np.float32)
    mask[:, -1] = 0.0
    tokens = np.concatenate([np.ones((B, 1), int), tokens[:, :-1]], axis=1)
    bow = rng.poisson(1.0, size=(B, V_C)).astype(np.float32)
    return {"tokens": tokens.astype(np.int32), "targets": targets.astype(np.int32),
            "mask": mask, "bow": bow}


def build(family, dropout=0.0, seed=0):
    """A small model of `family`, built on `batch()` and compiled with Adam."""
    keras.utils.set_random_seed(seed)
    if family == "bigram":
        model = Bigram(V)
    elif family == "lstm":
        from tfktopic.models.lstm.lstm_lm import LSTMLanguageModel
        model = LSTMLanguageModel(V, 8, 16, dropout=dropout)
    elif family == "doc_lstm":
        from tfktopic.models.lstm.document_lstm import DocumentLSTMLanguageModel as DocumentLSTM
        model = DocumentLSTM(V, 8, 16, dropout=dropout)
    elif family == "doc_topicrnn":
        from tfktopic.models.topicrnn.document import DocumentTopicRNN
        model = DocumentTopicRNN(V, LM_TO_TOPIC, num_topics=3, embedding_dim=8, hidden_dim=16,
                                 encoder_units=(16,), dropout=dropout)
    elif family == "topicrnn":
        from tfktopic.models.topicrnn.model import TopicRNN
        model = TopicRNN(V, LM_TO_TOPIC, num_topics=3, embedding_dim=8, hidden_dim=16,
                         encoder_units=(16,), dropout=dropout)
    elif family == "tcnlm":
        from tfktopic.models.tcnlm.model import TCNLM
        model = TCNLM(V, V_C, num_topics=3, embedding_dim=8, hidden_dim=16, ntm_units=(16,),
                      dropout=dropout)
    elif family == "lda_lstm":
        from tfktopic.models.lstm.lda_lstm import LDALSTMLanguageModel
        model = LDALSTMLanguageModel(V, V_C, num_topics=3, embedding_dim=8, hidden_dim=16,
                                     dropout=dropout)
    elif family in ("rgbn_rnn", "gbn_rnn"):
        from tfktopic.models.rgbn.model import RGBNRNN
        model = RGBNRNN(V, V_C, num_documents=4, num_layers=2, hidden_sizes=(16, 8),
                        topic_sizes=(3, 2), embedding_dim=8, dropout=dropout,
                        recurrent=family == "rgbn_rnn", seed=seed)
    else:
        raise ValueError(f"unknown family {family!r}")
    model.compile(optimizer=keras.optimizers.Adam(0.05))
    data = family_batch(family)
    model.test_on_batch(data)  # builds every weight
    return model, data


def stream_batch():
    """`batch()` as one window of parallel document streams (``reset`` flags set)."""
    data = batch()
    return {**{k: data[k] for k in ("tokens", "targets", "mask")},
            "reset": np.ones((B,), np.float32)}


def topic_batch():
    """`batch()` with each sentence's document context: ``context_bow`` (counts over the
    V_C topic words) and ``doc_targets`` (the document's tokens: one window per document)."""
    data = batch()
    return {**{k: data[k] for k in ("tokens", "targets", "mask")}, "context_bow": data["bow"],
            "doc_targets": data["mask"].sum(axis=-1).astype(np.int32)}


def stream_topic_batch():
    """`stream_batch()` with each window's document context (``context_bow``, ``doc_targets``):
    the streamed document TopicRNN's batch."""
    data = topic_batch()
    return {**stream_batch(), "context_bow": data["context_bow"],
            "doc_targets": data["doc_targets"].astype(np.float32)}


def chunk_batch():
    """`topic_batch()` as document chunks [2 documents, 3 sentences, T]."""
    data = topic_batch()
    return {k: data[k].reshape((2, B // 2) + data[k].shape[1:])
            for k in ("tokens", "targets", "mask", "context_bow")}


def family_batch(family):
    """The batch `family` reads."""
    if family in ("rgbn_rnn", "gbn_rnn"):
        return chunk_batch()
    if family == "doc_lstm":
        return stream_batch()
    if family == "doc_topicrnn":
        return stream_topic_batch()
    return topic_batch() if family in TOPIC_FAMILIES else batch()


def _gradients(model, data):
    """(terms, gradients of the loss w.r.t. the trainable weights) under this backend."""
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf
        with tf.GradientTape() as tape:
            terms = model.objective(data, training=False)
            loss = model._loss(terms)
        grads = tape.gradient(loss, model.trainable_weights)
        return terms, [tf.convert_to_tensor(g) for g in grads]  # IndexedSlices -> dense
    import jax

    def loss_of(values):
        mapping = list(zip(model.trainable_variables, values)) + [
            (v, v.value) for v in model.non_trainable_variables]
        with keras.StatelessScope(state_mapping=mapping):
            terms = model.objective(data, training=False)
            return model._loss(terms), terms

    (_, terms), grads = jax.value_and_grad(loss_of, has_aux=True)(
        [v.value for v in model.trainable_variables])
    return terms, grads


def objective_terms(family, weights=None):
    """The objective terms and gradients of `family` on `batch()` with the given weights.

    Returns:
        dict: ``loss``, ``nll_sum``, ``num_tokens``, ``weights`` (the model's weights, to
        hand to the other backend) and ``gradients`` (one per trainable weight).
    """
    model, data = build(family)
    if weights is not None:
        model.set_weights(list(weights))
    data = {k: ops.convert_to_tensor(v) for k, v in data.items()}
    terms, grads = _gradients(model, data)
    return {"loss": np.asarray(terms["loss"]), "nll_sum": np.asarray(terms["nll_sum"]),
            "num_tokens": np.asarray(terms["num_tokens"]),
            "weights": [np.asarray(w) for w in model.get_weights()],
            "gradients": [np.asarray(g) for g in grads]}


def fit(family, epochs=8, dropout=0.1, seed=3):
    """`model.fit` from a seed: the epoch losses, the evaluation and the final weights."""
    model, data = build(family, dropout=dropout, seed=seed)
    keras.utils.set_random_seed(seed)
    history = model.fit(data, epochs=epochs, batch_size=B, verbose=0, shuffle=False)
    evaluation = model.evaluate(data, verbose=0, return_dict=True)
    return {"loss": np.asarray(history.history["loss"]),
            "ppl": np.asarray(history.history["ppl"]),
            "eval_loss": np.asarray(evaluation["loss"]),
            "weights": [np.asarray(w) for w in model.get_weights()]}


def save_and_load(family, path):
    """Train one epoch, save to `path` (.keras), load it back: both models' logits."""
    model, data = build(family)
    model.fit(data, epochs=1, batch_size=B, verbose=0)
    model.save(path)
    loaded = keras.saving.load_model(path)
    return {"before": np.asarray(model(data, training=False)),
            "after": np.asarray(loaded(data, training=False))}


def load_outputs(family, path):
    """The logits on `batch()` of the model saved at `path`."""
    loaded = keras.saving.load_model(path)
    data = family_batch(family)
    return {"outputs": np.asarray(loaded(data, training=False))}


def jitted_and_eager_steps(family, steps=3):
    """`steps` training steps of `family` compiled with and without jit (same seed).

    Returns:
        dict: ``jit_compile`` (the model's choice under ``jit_compile="auto"``) and, per
        mode (``"jit"`` / ``"eager"``), the losses and the weights afterwards (TLASGR's Phi
        and Pi included for the GBN families).
    """
    result = {}
    for mode in ("jit", "eager"):
        model, data = build(family)
        model.compile(optimizer=keras.optimizers.Adam(0.05),
                      jit_compile="auto" if mode == "jit" else False)
        if mode == "jit":
            result["jit_compile"] = bool(model.jit_compile)
        losses = [float(model.train_on_batch(data, return_dict=True)["loss"])
                  for _ in range(steps)]
        result[mode] = {"losses": losses,
                        "weights": [np.asarray(w) for w in model.get_weights()]}
    return result


def jax_side(weights, tf_paths, jax_dir, jitted=()):
    """Every cross-backend check's other side in one process (one interpreter start instead
    of one per check; `tests/library/test_models_backends.py`'s ``across`` fixture).

    Args:
        weights: family -> the first process's weights, for `objective_terms`.
        tf_paths: family -> the ``.keras`` file the first process saved, for `load_outputs`.
        jax_dir: where this process saves its own ``<family>.keras`` (`save_and_load`).
        jitted: the families whose `jitted_and_eager_steps` are run too.

    Returns:
        dict: family -> ``{"objective", "loads_theirs", "saved", "path"[, "steps"]}``, or
        ``{"error": traceback}`` for a family whose checks raised (the others still run).
    """
    import os
    import traceback

    result = {}
    for family in weights:
        try:
            path = os.path.join(jax_dir, f"{family}.keras")
            result[family] = {"objective": objective_terms(family, weights[family]),
                              "loads_theirs": load_outputs(family, tf_paths[family]),
                              "saved": save_and_load(family, path), "path": path}
            if family in jitted:
                result[family]["steps"] = jitted_and_eager_steps(family)
        except Exception:  # reported by that family's tests
            result[family] = {"error": traceback.format_exc()}
    return result
