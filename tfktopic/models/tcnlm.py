"""TCNLM: the Topic Compositional Neural Language Model (Wang et al., AISTATS 2018).

A neural topic model (NTM) reads the bag of words d of a sentence's document
context and gives topic proportions t (Gaussian softmax, eqs. 8-9); the
language model is an LSTM whose weights are the topic mixture
W(t) = sum_k t_k W[k], factorised as W_a diag(W_b t) W_c (eqs. 9-15, see
`tfktopic.layers.factorized_lstm`). Both are trained jointly by maximising,
per (sentence, context) pair,

    L = E_q[log p(d | t)] - KL(q(theta | d) || N(0, I))
        + E_q[sum_m log p(y_m | y_<m, t)]                               (17)
    J = L + lambda R                                                    (18)

with the topic diversity regulariser R (eq. 16) and lambda = 0.1.

**Scaling of the terms (the paper is silent, reference §1.4).** The loss is
the exact negative per-sentence ELBO *summed* over the batch -- every sentence
contributes its LM NLL, the NTM NLL of its own context and its KL once -- and
divided by the number of predicted LM tokens in the batch, minus lambda R once
per batch:

    loss = (sum_b [NLL_LM,b + NLL_NTM,b + KL_b]) / #tokens - lambda R.

So the LM part equals the mean token NLL of `LSTMLanguageModel` (same
learning-rate scale), the relative weight of LM and NTM terms is the paper's
ELBO (no ad-hoc factor), and R keeps the fixed weight lambda against a
per-token objective. ``kl`` is reported per sentence, ``tm_nll`` per context
word (exp(tm_nll) is the NTM's perplexity on the contexts) and ``diversity``
is R.

Decisions the paper leaves open (reference §1.7), as implemented:

* n_f = n_h unless ``factor_dim`` is given; every layer of a stack is
  topic-compositional; one bias per gate, forget bias +1 (Keras LSTM; SCN used 0);
  all factor matrices U(-0.05, 0.05) as SCN-LSTM.
* theta has K dimensions, prior N(0, I); beta_k = softmax(phi_k) of a free K x D
  matrix (eq. 6 exact); one reparameterised sample per sentence in training,
  t from the posterior mean theta = mu(d) at evaluation (deterministic).
* Full softmax (no adaptive softmax: same perplexity, see reference §6).
* Generation starts from ``<bos>`` and a zero state; a single topic is t = e_k
  ("use only the k-th factor of W_b and U_b"), a mixture is a weight vector.

`mixture="moe"` is the naive mixture of experts of eq. (7) (K independent
LSTMs, p(y) = sum_k t_k softmax(V h^(k))), the paper's Table 6 comparison.
It materialises [B, T, K, V] expert log-probabilities: keep B * T * K * V small.
"""

import numbers

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from tfktopic.distribute import global_logs, replica_mean, replica_share
from tfktopic.evaluation.perplexity import Perplexity, masked_token_nll
from tfktopic.layers.factorized_lstm import FactorizedTopicLSTM, TopicExpertsLSTM
from tfktopic.layers.topic_decoder import NeuralTopicModel, topic_diversity
from tfktopic.layers.topic_encoders import BOW_NORMALIZATIONS
from tfktopic.models.decoding import GENERATION_METHODS, next_tokens

__all__ = ["TCNLM", "PRESETS", "MIXTURES", "GENERATION_METHODS"]

MIXTURES = ("factorized", "moe")
_PAD, _BOS, _EOS, _UNK = 0, 1, 2, 3

_PAPER_DATA = {
    # TDLM preprocessing, which TCNLM follows (reference §2.2-2.3, Table 1).
    "min_count": 10,                 # LM vocabulary: types seen >= 10 times
    "stopwords": "mallet_en.txt",    # topic vocabulary: minus Mallet's stop list,
    "max_freq_fraction": 0.001,      # the top 0.1 % most frequent types,
    "min_doc_freq": 100,             # and words in < 100 documents (TCNLM §4) of the
    "min_doc_freq_reference_docs": 50000,   # 50K APNEWS training documents (scale for fewer)
    "max_len": 30,                   # LM sequence length
    "context_len": 300,              # context words per sentence
    "train_protocol": "all_other",   # training context: the rest of the document
}
_PAPER_TRAINING = {
    # "Adam, NTM and NLM trained jointly" (TCNLM §4); the rest is not given by the paper:
    # TDLM's values (reference §1.7, §2.8).
    "optimizer": "adam",
    "learning_rate": 1e-3,
    "batch_size": 64,
    "epochs": 10,                    # with early stopping on the validation perplexity
    "clipnorm": 5.0,
}

PRESETS = {
    # TCNLM "small" (§4, Table 2): 1-layer LSTM of 600 units, dropout 0.4, lambda 0.1,
    # NTM encoder 2 x 256 ReLU; 50 / 100 / 150 topics in Table 2 (APNEWS: 52.75 / 52.63 /
    # 52.59). n_x = 300 and n_f = n_h are our choices (reference §1.7).
    "paper": {
        "model": {"num_topics": 50, "embedding_dim": 300, "hidden_dim": 600, "num_layers": 1,
                  "factor_dim": 600, "ntm_units": (256, 256), "diversity_weight": 0.1,
                  "mixture": "factorized", "dropout": 0.4},
        "data": dict(_PAPER_DATA),
        "training": dict(_PAPER_TRAINING),
    },
    # TCNLM "large" (Table 2): 2 layers of 900 units, both topic-compositional
    # (APNEWS 50 topics: 48.07).
    "paper_large": {
        "model": {"num_topics": 50, "embedding_dim": 300, "hidden_dim": 900, "num_layers": 2,
                  "factor_dim": 900, "ntm_units": (256, 256), "diversity_weight": 0.1,
                  "mixture": "factorized", "dropout": 0.4},
        "data": dict(_PAPER_DATA),
        "training": dict(_PAPER_TRAINING),
    },
    # Table 6: 30 topics, a 1-layer LSTM of 100 units (APNEWS: basic LSTM 101.62,
    # naive MoE 85.87, TCNLM 82.67).
    "paper_table6": {
        "model": {"num_topics": 30, "embedding_dim": 300, "hidden_dim": 100, "num_layers": 1,
                  "factor_dim": 100, "ntm_units": (256, 256), "diversity_weight": 0.1,
                  "mixture": "factorized", "dropout": 0.4},
        "data": dict(_PAPER_DATA),
        "training": dict(_PAPER_TRAINING),
    },
    "paper_table6_moe": {
        "model": {"num_topics": 30, "embedding_dim": 300, "hidden_dim": 100, "num_layers": 1,
                  "ntm_units": (256, 256), "diversity_weight": 0.1, "mixture": "moe",
                  "dropout": 0.4},
        "data": dict(_PAPER_DATA),
        "training": dict(_PAPER_TRAINING),
    },
    # Not from the paper: trains in about 1-2 minutes on 2 CPU cores on the Lee corpus
    # (gensim's 300 news documents; 80/10/10 split by document) -- the README's demo.
    # 0.5 % of Lee's ~7.4K raw types are dropped from the topic vocabulary as too frequent
    # ("said", "says", "mr"; the papers' 0.1 % assumes a 30K+ type corpus).
    "small": {
        "model": {"num_topics": 10, "embedding_dim": 64, "hidden_dim": 128, "num_layers": 1,
                  "factor_dim": 128, "ntm_units": (64, 64), "diversity_weight": 0.1,
                  "mixture": "factorized", "dropout": 0.4},
        "data": {"min_count": 3, "stopwords": "gensim", "max_freq_fraction": 0.005,
                 "min_doc_freq": 2, "max_len": 30, "context_len": 300,
                 "train_protocol": "all_other"},
        "training": {"optimizer": "adam", "learning_rate": 1e-2, "batch_size": 64,
                     "epochs": 10, "clipnorm": 5.0},
    },
}
PRESETS["paper_small"] = PRESETS["paper"]   # alias: the paper's "small" model
PRESETS["demo"] = PRESETS["small"]          # alias: the README demo


def _positive_int(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return int(value)


@keras.saving.register_keras_serializable(package="tfktopic")
class TCNLM(keras.Model):
    """Topic Compositional Neural Language Model (Wang et al., AISTATS 2018).

    Args:
        vocab_size: LM vocabulary size (softmax width).
        topic_vocab_size: D, the topic-vocabulary size (width of ``context_bow``).
        num_topics: K (T in the paper).
        embedding_dim: n_x, the word-embedding size.
        hidden_dim: n_h, LSTM units per layer.
        num_layers: stacked LSTM layers; every layer is topic-compositional.
        factor_dim: n_f, the number of factors of eq. (12) (default: hidden_dim).
        ntm_units: ReLU layers of the NTM's inference network ((256, 256)).
        diversity_weight: lambda of eq. (18) (0.1 in every experiment of the paper).
        mixture: "factorized" (TCNLM) or "moe" (the naive mixture of K LSTM
            experts of eq. (7), the paper's Table 6 comparison).
        dropout: dropout on the embeddings, between layers and before the softmax.
        embeddings: optional ``[vocab_size, embedding_dim]`` matrix (word2vec)
            to initialise the embedding (saved with the weights, not the config).
        bow_normalization: scaling of the context counts before the NTM encoder
            ("total", "log1p" or "none"); the NTM likelihood uses raw counts.
        seed: seed of the NTM's reparameterisation noise.

    Inputs: the pipeline dict (``tokens``, ``context_bow``; ``targets`` and
    ``mask`` for training). ``model(batch)`` returns next-token logits
    [B, T, V] ("factorized") or normalised log-probabilities ("moe"), so
    `tfktopic.evaluation.evaluate_perplexity(model, dataset)` applies.

    Example:
    >>> model = TCNLM.from_preset("small", len(lm_vocab), len(topic_vocab))  # doctest: +SKIP
    >>> model.compile(optimizer=keras.optimizers.Adam(1e-2, clipnorm=5.0))  # doctest: +SKIP
    >>> model.fit(sentence_dataset(train_examples), epochs=10)             # doctest: +SKIP
    >>> model.topics(10, topic_vocab)                                      # doctest: +SKIP
    >>> ids = model.generate(3, topic=2, method="top_k", seed=0)           # doctest: +SKIP
    >>> [" ".join(lm_vocab.decode(row, strip_special=True)) for row in ids]  # doctest: +SKIP
    """

    def __init__(self, vocab_size, topic_vocab_size, num_topics=50, embedding_dim=300,
                 hidden_dim=600, num_layers=1, factor_dim=None, ntm_units=(256, 256),
                 diversity_weight=0.1, mixture="factorized", dropout=0.0, embeddings=None,
                 bow_normalization="total", seed=None, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = _positive_int("vocab_size", vocab_size)
        self.topic_vocab_size = _positive_int("topic_vocab_size", topic_vocab_size)
        self.num_topics = _positive_int("num_topics", num_topics)
        self.embedding_dim = _positive_int("embedding_dim", embedding_dim)
        self.hidden_dim = _positive_int("hidden_dim", hidden_dim)
        self.num_layers = _positive_int("num_layers", num_layers)
        self.factor_dim = None if factor_dim is None else _positive_int("factor_dim", factor_dim)
        if isinstance(ntm_units, numbers.Number) or not all(
                isinstance(u, numbers.Integral) and not isinstance(u, bool) and u >= 1
                for u in ntm_units):
            raise ValueError(f"ntm_units must be a sequence of integers >= 1, got {ntm_units!r}")
        self.ntm_units = tuple(int(u) for u in ntm_units)
        if not float(diversity_weight) >= 0.0:
            raise ValueError(f"diversity_weight must be >= 0, got {diversity_weight}")
        self.diversity_weight = float(diversity_weight)
        if mixture not in MIXTURES:
            raise ValueError(f"mixture must be one of {MIXTURES}, got {mixture!r}")
        self.mixture = mixture
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        self.dropout = float(dropout)
        if embeddings is not None:
            embeddings = np.asarray(embeddings, np.float32)
            if embeddings.shape != (self.vocab_size, self.embedding_dim):
                raise ValueError(
                    f"embeddings must have shape (vocab_size, embedding_dim) = "
                    f"{(self.vocab_size, self.embedding_dim)}, got {embeddings.shape}")
        if bow_normalization not in BOW_NORMALIZATIONS:
            raise ValueError(f"bow_normalization must be one of {BOW_NORMALIZATIONS}, got "
                             f"{bow_normalization!r}")
        self.bow_normalization = bow_normalization
        self.seed = seed

        self.embedding = keras.layers.Embedding(
            self.vocab_size, self.embedding_dim,
            weights=None if embeddings is None else [embeddings], name="embedding")
        self.topic_model = NeuralTopicModel(self.num_topics, self.topic_vocab_size,
                                            hidden_units=self.ntm_units,
                                            normalization=bow_normalization, seed=seed,
                                            name="topic_model")
        if self.mixture == "factorized":
            self.rnns = [FactorizedTopicLSTM(self.hidden_dim, self.num_topics,
                                             factor_dim=self.factor_dim, return_state=True,
                                             name=f"topic_lstm_{i}")
                         for i in range(self.num_layers)]
        else:
            self.rnns = [TopicExpertsLSTM(self.hidden_dim, self.num_topics, return_state=True,
                                          name=f"expert_lstm_{i}")
                         for i in range(self.num_layers)]
        self.dropouts = [keras.layers.Dropout(self.dropout) for _ in range(self.num_layers + 1)]
        self.softmax = keras.layers.Dense(self.vocab_size, name="softmax")

        self.loss_tracker = keras.metrics.Mean(name="loss")
        self.perplexity = Perplexity(name="ppl")
        self.kl_tracker = keras.metrics.Mean(name="kl")
        self.topic_perplexity = Perplexity(name="tm_ppl")
        self.diversity_tracker = keras.metrics.Mean(name="diversity")
        self._step_function = None
        # `train_step` calls the NTM and the LM directly (not `self(...)`), so Keras
        # would never mark the model built; every size is known, so build here.
        self.build()

    @classmethod
    def from_preset(cls, name, vocab_size, topic_vocab_size, **overrides):
        """A model with the hyperparameters of ``PRESETS[name]["model"]``.

        Args:
            name: a key of `PRESETS` ("paper", "paper_large", "small", ...).
            vocab_size, topic_vocab_size: the vocabulary sizes.
            **overrides: constructor arguments replacing the preset's.
        """
        if name not in PRESETS:
            raise ValueError(f"preset must be one of {sorted(PRESETS)}, got {name!r}")
        return cls(vocab_size, topic_vocab_size, **{**PRESETS[name]["model"], **overrides})

    def build(self, input_shape=None):
        # Every size is known from the constructor: all weights exist after __init__ (so
        # `.keras` loading, `BackupAndRestore` and `topics()` work before any call).
        self.embedding.build((None, None))
        self.topic_model.build((None, self.topic_vocab_size))
        shape = (None, None, self.embedding_dim)
        for rnn in self.rnns:
            if self.mixture == "factorized":
                rnn.build(shape, (None, self.num_topics))
                shape = (None, None, self.hidden_dim)
            else:
                rnn.build(shape)
                shape = (None, None, self.num_topics, self.hidden_dim)
        self.softmax.build(shape)
        self.built = True

    # -- forward -----------------------------------------------------------------------------

    def language_model(self, tokens, topic_proportions, training=False, states=None):
        """The LM conditioned on given topic proportions.

        Args:
            tokens: int [B, T] input ids.
            topic_proportions: float [B, K] t (rows on the simplex).
            training: dropout on/off.
            states: optional per-layer ``[h, c]`` to continue from (generation).

        Returns:
            (predictions, states): logits [B, T, V] ("factorized") or
            log-probabilities ("moe"), and the final per-layer ``[h, c]``.
        """
        t = ops.cast(topic_proportions, self.compute_dtype)
        x = self.dropouts[0](self.embedding(tokens), training=training)
        new_states = []
        for i, (rnn, dropout) in enumerate(zip(self.rnns, self.dropouts[1:])):
            initial = None if states is None else states[i]
            if self.mixture == "factorized":
                x, h, c = rnn(x, t, initial_state=initial, training=training)
            else:
                x, h, c = rnn(x, initial_state=initial, training=training)
            new_states.append([h, c])
            x = dropout(x, training=training)
        logits = self.softmax(x)
        if self.mixture == "factorized":
            return logits, new_states
        # Eq. (7): log sum_k t_k softmax(V h^(k)), a log-space mixture over the expert axis.
        log_t = ops.log(ops.maximum(t, 1e-30))[:, None, :, None]
        return ops.logsumexp(ops.log_softmax(logits, axis=-1) + log_t, axis=2), new_states

    def infer_topics(self, context_bow):
        """Topic proportions t from the posterior mean of q(theta | d), float [B, K]."""
        context_bow = ops.convert_to_tensor(context_bow, self.compute_dtype)
        return self.topic_model(context_bow, training=False)[0]

    def _inputs(self, inputs):
        if not isinstance(inputs, dict) or "tokens" not in inputs or "context_bow" not in inputs:
            found = sorted(inputs) if isinstance(inputs, dict) else type(inputs).__name__
            raise ValueError(
                "TCNLM inputs must be a dict with 'tokens' [B, T] and 'context_bow' "
                f"[B, topic_vocab_size] (the sentence_dataset batches); got {found}")
        return inputs["tokens"], inputs["context_bow"]

    def _forward(self, inputs, training):
        tokens, bow = self._inputs(inputs)
        t, kl, tm_log_likelihood = self.topic_model(bow, training=training)
        predictions, _ = self.language_model(tokens, t, training=training)
        return predictions, kl, tm_log_likelihood, bow

    def call(self, inputs, training=False):
        return self._forward(inputs, training)[0]

    # -- objective (see the module docstring for the scaling) --------------------------------

    def _objective(self, data, training):
        predictions, kl, tm_log_likelihood, bow = self._forward(data, training)
        nll_sum, num_tokens = masked_token_nll(data["targets"], predictions, data["mask"],
                                               from_logits=self.mixture == "factorized")
        tm_nll_sum = -ops.sum(ops.cast(tm_log_likelihood, "float32"))
        kl = ops.cast(kl, "float32")
        diversity = ops.cast(topic_diversity(self.topic_model.decoder.beta()), "float32")
        elbo_terms = nll_sum + tm_nll_sum + ops.sum(kl)
        loss = elbo_terms / ops.maximum(num_tokens, 1.0) - self.diversity_weight * diversity
        if self.losses:
            loss = loss + sum(self.losses)
        stats = {"nll_sum": nll_sum, "num_tokens": num_tokens, "kl": kl,
                 "tm_nll_sum": tm_nll_sum, "tm_words": ops.sum(ops.cast(bow, "float32")),
                 "diversity": diversity}
        return loss, stats

    def _report(self, loss, stats):
        # Under a distribution strategy: the global-batch loss and logs.
        self.loss_tracker.update_state(replica_mean(loss, stats["num_tokens"]))
        self.perplexity.update_from_sums(stats["nll_sum"], stats["num_tokens"])
        self.kl_tracker.update_state(stats["kl"])
        self.topic_perplexity.update_from_sums(stats["tm_nll_sum"], stats["tm_words"])
        self.diversity_tracker.update_state(stats["diversity"])
        return global_logs(self.metrics, lambda: {
            "loss": self.loss_tracker.result(), "nll": self.perplexity.nll(),
            "ppl": self.perplexity.result(), "kl": self.kl_tracker.result(),
            "tm_nll": self.topic_perplexity.nll(),
            "diversity": self.diversity_tracker.result()})

    def train_step(self, data):
        with tf.GradientTape() as tape:
            loss, stats = self._objective(data, training=True)
            # A hand-written per-token mean is not rescaled by Keras under a
            # distribution strategy: weight it by this replica's share of the
            # global batch's tokens, so the summed gradients are the global ones
            # (the diversity term, equal on all replicas, is counted once).
            scaled = loss * replica_share(stats["num_tokens"])
            scaled = self.optimizer.scale_loss(scaled)
        gradients = tape.gradient(scaled, self.trainable_weights)
        self.optimizer.apply_gradients(zip(gradients, self.trainable_weights))
        return self._report(loss, stats)

    def test_step(self, data):
        return self._report(*self._objective(data, training=False))

    @property
    def metrics(self):
        return [self.loss_tracker, self.perplexity, self.kl_tracker, self.topic_perplexity,
                self.diversity_tracker]

    # -- topics and generation ---------------------------------------------------------------

    def beta(self):
        """The topic-word distributions, numpy [K, topic_vocab_size] (rows sum to 1)."""
        return np.asarray(self.topic_model.decoder.beta())

    def topics(self, top_n=10, vocabulary=None):
        """The top words of every topic (rows of beta).

        Args:
            top_n: words per topic.
            vocabulary: optional `TopicVocabulary` (or list of topic words).

        Returns:
            int array [K, top_n] of topic-vocabulary ids, or a list of K word
            lists when `vocabulary` is given.
        """
        top_n = _positive_int("top_n", top_n)
        if top_n > self.topic_vocab_size:
            raise ValueError(f"top_n must be <= topic_vocab_size={self.topic_vocab_size}, "
                             f"got {top_n}")
        ids = np.argsort(-self.beta(), axis=1, kind="stable")[:, :top_n]
        if vocabulary is None:
            return ids
        words = list(getattr(vocabulary, "words", vocabulary))
        if len(words) != self.topic_vocab_size:
            raise ValueError(f"vocabulary has {len(words)} words but the model's topic "
                             f"vocabulary has {self.topic_vocab_size}")
        return [[words[i] for i in row] for row in ids]

    def _generation_topics(self, num_sentences, topic, context_bow, seed):
        if topic is not None and context_bow is not None:
            raise ValueError("give at most one of topic and context_bow")
        K = self.num_topics
        if context_bow is not None:
            bow = np.asarray(context_bow, np.float32)
            bow = bow[None] if bow.ndim == 1 else bow
            if bow.ndim != 2 or bow.shape[1] != self.topic_vocab_size or \
                    bow.shape[0] not in (1, num_sentences):
                raise ValueError(f"context_bow must have shape [topic_vocab_size="
                                 f"{self.topic_vocab_size}] or [num_sentences, topic_vocab_size], "
                                 f"got {bow.shape}")
            t = np.asarray(self.infer_topics(bow))
        elif topic is None:
            # Unconditional: theta from the prior N(0, I), t = softmax(W theta + b).
            t = np.asarray(self.topic_model.prior_topic_proportions(
                num_sentences, seed=keras.random.SeedGenerator(seed)))
        elif isinstance(topic, numbers.Integral) and not isinstance(topic, bool):
            if not 0 <= topic < K:
                raise ValueError(f"topic must be in [0, num_topics={K}), got {topic}")
            t = np.eye(K, dtype=np.float32)[[int(topic)]]
        else:
            t = np.asarray(topic, np.float32)
            t = t[None] if t.ndim == 1 else t
            if t.ndim != 2 or t.shape[1] != K or t.shape[0] not in (1, num_sentences):
                raise ValueError(f"topic must be an int, or weights of shape [num_topics={K}] "
                                 f"or [num_sentences, num_topics], got shape {t.shape}")
            if not np.all(np.isfinite(t)) or np.any(t < 0) or np.any(t.sum(axis=1) <= 0):
                raise ValueError("topic weights must be finite, nonnegative and not all zero")
            t = t / t.sum(axis=1, keepdims=True)
        return np.broadcast_to(t, (num_sentences, K)).astype(np.float32)

    def _zero_states(self, batch):
        shape = (batch, self.hidden_dim) if self.mixture == "factorized" else \
            (self.num_topics, batch, self.hidden_dim)
        return [[tf.zeros(shape, self.compute_dtype)] * 2 for _ in range(self.num_layers)]

    def _next_log_probs(self, tokens, t, states):
        if self._step_function is None:
            def step(tokens, t, states):
                predictions, states = self.language_model(tokens[:, None], t, states=states)
                return ops.log_softmax(predictions[:, 0], axis=-1), states

            self._step_function = tf.function(step, reduce_retracing=True)
        return self._step_function(tf.constant(tokens, tf.int32), tf.constant(t), states)

    def generate(self, num_sentences=1, max_len=30, topic=None, context_bow=None,
                 method="greedy", temperature=1.0, top_k=10, seed=None, allow_unk=True):
        """Generate sentences from ``<bos>``, conditioned on topics.

        Args:
            num_sentences: number of sentences.
            max_len: maximum tokens per sentence (``<eos>`` included).
            topic: None (t from the prior: theta ~ N(0, I)), an int k (a single
                topic, t = one-hot e_k: "use only the k-th factor of W_b and
                U_b", TCNLM §4.3), or nonnegative weights [K] / [N, K] for a
                mixture of topics (normalised to sum to 1).
            context_bow: instead of `topic`, a context bag of words [D] or
                [N, D]; t is its posterior mean.
            method: "greedy" (argmax), "sample" (softmax with temperature) or
                "top_k" (sample among the `top_k` most likely tokens).
            temperature: divides the log-probabilities before sampling (> 0).
            top_k: candidates of "top_k".
            seed: seed of the sampling (and of the prior draw).
            allow_unk: False never generates ``<unk>`` (id 3).

        Returns:
            int32 array [num_sentences, max_len] of LM ids; after the first
            ``<eos>`` a row holds ``<pad>`` (0), so
            ``lm_vocab.decode(row, strip_special=True)`` gives the words.
            ``<pad>`` and ``<bos>`` are never generated.
        """
        num_sentences = _positive_int("num_sentences", num_sentences)
        max_len = _positive_int("max_len", max_len)
        if method not in GENERATION_METHODS:
            raise ValueError(f"method must be one of {GENERATION_METHODS}, got {method!r}")
        if not float(temperature) > 0.0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        top_k = _positive_int("top_k", top_k)
        t = self._generation_topics(num_sentences, topic, context_bow, seed)
        rng = np.random.default_rng(seed)
        banned = [_PAD, _BOS] if allow_unk else [_PAD, _BOS, _UNK]
        out = np.zeros((num_sentences, max_len), np.int32)
        done = np.zeros(num_sentences, bool)
        tokens = np.full(num_sentences, _BOS, np.int32)
        states = self._zero_states(num_sentences)
        for step in range(max_len):
            log_probs, states = self._next_log_probs(tokens, t, states)
            log_probs = np.asarray(log_probs, np.float64)
            log_probs[:, banned] = -np.inf
            chosen = next_tokens(log_probs, method, temperature, top_k, rng)
            chosen[done] = _PAD
            out[:, step] = chosen
            done |= chosen == _EOS
            if done.all():
                break
            tokens = np.where(done, _EOS, chosen).astype(np.int32)
        return out

    def get_config(self):
        return {**super().get_config(), "vocab_size": self.vocab_size,
                "topic_vocab_size": self.topic_vocab_size, "num_topics": self.num_topics,
                "embedding_dim": self.embedding_dim, "hidden_dim": self.hidden_dim,
                "num_layers": self.num_layers, "factor_dim": self.factor_dim,
                "ntm_units": list(self.ntm_units), "diversity_weight": self.diversity_weight,
                "mixture": self.mixture, "dropout": self.dropout,
                "bow_normalization": self.bow_normalization, "seed": self.seed}
