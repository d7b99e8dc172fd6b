"""TCNLM: the Topic Compositional Neural Language Model (Wang et al., AISTATS 2018).

A neural topic model (NTM) reads the bag of words d of a sentence's document
context and gives topic proportions t (Gaussian softmax, eqs. 8-9); the
language model is an LSTM whose weights are the topic mixture
W(t) = sum_k t_k W[k], factorised as W_a diag(W_b t) W_c (eqs. 9-15, see
`tfktopic.models.tcnlm.factorized_lstm`). Both are trained jointly by maximising,
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

**Topic quality.** The randomly started NTM's topics collapse (APNEWS, K = 50: NPMI
0.40 x LDA); ``decoder_init="lda"`` (the ``coherent`` and ``small`` presets) starts the
decoder from an LDA of the training split and reaches 1.24 x LDA at no perplexity cost
(the measurements: docs/models/tcnlm.md, "Topic quality").
"""

import numbers

import keras
import numpy as np
from keras import ops

from tfktopic.evaluation.cross_entropy import row_bucket
from tfktopic.evaluation.perplexity import gather_real_positions, masked_token_nll
from tfktopic.models.tcnlm.factorized_lstm import (GATE_ORDER, LEGACY_GATE_ORDER,
                                                   FactorizedTopicLSTM, TopicExpertsLSTM)
from tfktopic.layers.initialization import (cell_initializers, check_initialization,
                                            embedding_initializer, softmax_initializers)
from tfktopic.layers.topic_decoder import (DECODER_INITS, NeuralTopicModel, check_decoder_init,
                                          lda_logits, topic_diversity)
from tfktopic.layers.topic_encoders import BOW_NORMALIZATIONS
from tfktopic.models.tcnlm import presets as tcnlm_presets
from tfktopic.models.base import TopicLanguageModel
from tfktopic.models.decoding import GENERATION_METHODS, simplex_topics
from tfktopic.models.schedules import (after_warmup, annealing_weight, check_steps,
                                       optimizer_step)

__all__ = ["TCNLM", "MIXTURES", "DECODER_INITS", "GENERATION_METHODS"]

MIXTURES = ("factorized", "moe")
#: `FactorizedTopicLSTM`'s initializer arguments ("torch" draws each of them).
FACTORIZED_WEIGHTS = ("factor_initializer", "recurrent_initializer", "topic_initializer",
                      "bias_initializer")


def _positive_int(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return int(value)


@keras.saving.register_keras_serializable(package="tfktopic")
class TCNLM(TopicLanguageModel):
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
        kl_warmup_steps: KL annealing: the KL term of eq. (17) is weighted by
            min(1, step / kl_warmup_steps) over the first optimizer steps
            (0, the default and the paper: full weight from the start).
        topic_warmup_steps: topic-model warm-up: for the first N optimizer steps
            the LM's NLL is left out of the loss, so only the NTM (and R) learns
            and the LM weights receive zero gradients (0, the default and the
            paper: joint from the first step).
        decoder_init: "random" (glorot logits, the default) or "lda": the
            decoder's logits start at log beta of an LDA (`topic_word_init`,
            which `tfktopic.runs.build_model` fits on the training split).
        topic_word_init: with ``decoder_init="lda"``, the [num_topics,
            topic_vocab_size] topic-word matrix (rows on the simplex) to start
            from (saved with the weights, not the config).
        initialization: of the language-model part: "keras" (the default: Keras'
            embedding and softmax, SCN-LSTM's U(±0.05) factors or the experts'
            Glorot / orthogonal kernels, forget-gate bias 1), "torch" (PyTorch's
            convention, as Zheng et al.'s recipe: embedding and softmax U(±0.1),
            every weight and bias of the recurrent cells U(±1/sqrt(H)) without a
            forget-gate offset) or a dict of parts
            (`tfktopic.layers.initialization`); the neural topic model keeps its own.
        gate_order: gate order of the factorized LSTM's weights in a file being
            loaded: "ifco" (keras' order, every new model) or "ifoc" (files saved
            before; `from_config` of a config without the key). See
            `FactorizedTopicLSTMCell`.

    Inputs: the pipeline dict (``tokens``, ``context_bow``; ``targets`` and
    ``mask`` for training). ``model(batch)`` returns next-token logits
    [B, T, V] ("factorized") or normalised log-probabilities ("moe"), so
    `tfktopic.evaluation.evaluate_perplexity(model, dataset)` applies.

    Example:
    >>> model = TCNLM.from_preset("small", tokenizer=Tokenizer(lm_vocab, topic_vocab),
    ...                           documents=train_docs)       # doctest: +SKIP
    >>> model.compile(optimizer=keras.optimizers.Adam(1e-2, clipnorm=5.0))  # doctest: +SKIP
    >>> model.fit(sentence_dataset(train_examples), epochs=10)             # doctest: +SKIP
    >>> model.topics(10, weights=True)                                     # doctest: +SKIP
    >>> model.generate(3, topic=2, method="top_k", seed=0)                 # doctest: +SKIP

    (A run example of `from_preset`: `TopicLanguageModel.from_preset`.)
    """

    has_topics = True
    simplex_topics = True
    saved_in_weights = ("decoder_init",)  # the LDA start is in the decoder's saved weights
    generates = True
    reported_terms = ("kl", "tm_nll", "diversity_reg")  # the regulariser, not topic diversity
    presets = tcnlm_presets.PRESETS

    def __init__(self, vocab_size, topic_vocab_size, num_topics=50, embedding_dim=300,
                 hidden_dim=600, num_layers=1, factor_dim=None, ntm_units=(256, 256),
                 diversity_weight=0.1, mixture="factorized", dropout=0.0, embeddings=None,
                 bow_normalization="total", seed=None, kl_warmup_steps=0,
                 topic_warmup_steps=0, decoder_init="random", topic_word_init=None,
                 initialization="keras", gate_order=GATE_ORDER, **kwargs):
        super().__init__(**kwargs)
        self.gate_order = gate_order   # of the weights a file loads (`FactorizedTopicLSTMCell`)
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
        self.kl_warmup_steps = check_steps("kl_warmup_steps", kl_warmup_steps)
        self.topic_warmup_steps = check_steps("topic_warmup_steps", topic_warmup_steps)
        self.decoder_init = check_decoder_init(decoder_init, topic_word_init)
        self.initialization = check_initialization(initialization)

        self.embedding = keras.layers.Embedding(
            self.vocab_size, self.embedding_dim,
            weights=None if embeddings is None else [embeddings], name="embedding",
            embeddings_initializer=embedding_initializer(self.initialization),
            dtype=self.dtype_policy)
        self.topic_model = NeuralTopicModel(self.num_topics, self.topic_vocab_size,
                                            hidden_units=self.ntm_units,
                                            normalization=bow_normalization, seed=seed,
                                            name="topic_model", dtype="float32")  # KL, softmax
        # A fresh set of initializers per layer (an instance repeats its draws).
        if self.mixture == "factorized":
            self.rnns = [FactorizedTopicLSTM(
                self.hidden_dim, self.num_topics, factor_dim=self.factor_dim, return_state=True,
                gate_order=gate_order, name=f"topic_lstm_{i}", dtype=self.dtype_policy,
                **cell_initializers(self.initialization, self.hidden_dim, FACTORIZED_WEIGHTS))
                for i in range(self.num_layers)]
        else:
            self.rnns = [TopicExpertsLSTM(
                self.hidden_dim, self.num_topics, return_state=True, name=f"expert_lstm_{i}",
                dtype=self.dtype_policy, **cell_initializers(self.initialization, self.hidden_dim))
                for i in range(self.num_layers)]
        self.dropouts = [keras.layers.Dropout(self.dropout, dtype=self.dtype_policy)
                         for _ in range(self.num_layers + 1)]
        self.softmax = keras.layers.Dense(
            self.vocab_size, name="softmax", dtype=self.dtype_policy,
            **softmax_initializers(self.initialization, self.hidden_dim))
        initial_logits = None if topic_word_init is None else lda_logits(
            topic_word_init, self.num_topics, self.topic_vocab_size)
        # `train_step` calls the NTM and the LM directly (not `self(...)`), so Keras
        # would never mark the model built; every size is known, so build here.
        self.build()
        if initial_logits is not None:
            self.topic_model.decoder.logits.assign(initial_logits)

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
        features, new_states = self.lm_features(tokens, topic_proportions, training=training,
                                                states=states)
        return self.output_head(features, ops.expand_dims(topic_proportions, 1)), new_states

    def lm_features(self, tokens, topic_proportions, training=False, states=None):
        """The softmax input of the LM: (features, states) of `language_model`.

        Returns:
            features [B, T, H] ("factorized") or [B, T, K, H] (the K experts
            of "moe"), after dropout, and the final per-layer ``[h, c]``.
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
        return x, new_states

    def output_head(self, features, topic_proportions):
        """Predictions from `lm_features` (at every position, or gathered ones).

        Args:
            features: [..., H] ("factorized") or [..., K, H] ("moe").
            topic_proportions: t [..., K] of each row of `features` (or
                broadcastable to its leading shape; used by "moe" only).

        Returns:
            logits [..., V] ("factorized") or, "moe", the log-probabilities of
            eq. (7): log sum_k t_k softmax(V h^(k)), a log-space mixture over
            the expert axis.
        """
        logits = self.softmax(features)
        if self.mixture == "factorized":
            return logits
        t = ops.cast(topic_proportions, self.compute_dtype)
        log_t = ops.expand_dims(ops.log(ops.maximum(t, 1e-30)), -1)
        return ops.logsumexp(ops.log_softmax(logits, axis=-1) + log_t, axis=-2)

    def topic_proportions(self, bow):
        """Topic proportions t from the posterior mean of q(theta | d), float [B, K]."""
        bow = ops.cast(self._check_bow_width(bow, self.topic_vocab_size), self.compute_dtype)
        return self.topic_model(bow, training=False)[0]

    def _inputs(self, inputs):
        if not isinstance(inputs, dict) or "tokens" not in inputs or "context_bow" not in inputs:
            found = sorted(inputs) if isinstance(inputs, dict) else type(inputs).__name__
            raise ValueError(
                "TCNLM inputs must be a dict with 'tokens' [B, T] and 'context_bow' "
                f"[B, topic_vocab_size] (the sentence_dataset batches); got {found}")
        return inputs["tokens"], inputs["context_bow"]

    def _forward(self, inputs, training):
        """(LM features [B, T, ...], t, kl, tm_log_likelihood, bow) of a batch."""
        tokens, bow = self._inputs(inputs)
        t, kl, tm_log_likelihood = self.topic_model(bow, training=training)
        features, _ = self.lm_features(tokens, t, training=training)
        return features, t, kl, tm_log_likelihood, bow

    def call(self, inputs, training=False):
        features, t = self._forward(inputs, training)[:2]
        return self.output_head(features, ops.expand_dims(t, 1))

    # -- objective (see the module docstring for the scaling) --------------------------------

    def objective(self, data, training=False):
        """The terms of eq. (18) over a batch (`TopicLanguageModel`'s contract).

        Returns:
            dict: ``loss`` = (nll_sum + tm_nll_sum + sum(kl)) / num_tokens -
            lambda R, ``units`` = num_tokens, ``nll_sum`` and ``num_tokens`` of
            the LM, ``kl`` [B] per sentence, ``tm_nll_sum`` and ``tm_words`` of
            the NTM on the contexts, ``diversity`` R, and ``report`` (kl per
            sentence, tm_nll per context word, diversity).
        """
        features, t, kl, tm_log_likelihood, bow = self._forward(data, training)
        # The softmax at the predicted positions only (each with its sentence's t).
        # Only logits go through the XLA cross-entropy and need bucket-padded rows; the
        # mixture's padded rows (t = 0) would give it log 0.
        from_logits = self.mixture == "factorized"
        real = gather_real_positions(data["mask"], data["targets"], per_position=(features,),
                                     per_row=(t,), bucket=row_bucket() if from_logits else 1)
        predictions = self.output_head(real.per_position[0], real.per_row[0])
        nll_sum, num_tokens = masked_token_nll(real.targets, predictions, real.mask,
                                               from_logits=from_logits)
        tm_nll_sum = -ops.sum(ops.cast(tm_log_likelihood, "float32"))
        tm_words = ops.sum(ops.cast(bow, "float32"))
        kl = ops.cast(kl, "float32")
        diversity = ops.cast(topic_diversity(self.topic_model.decoder.beta()), "float32")
        lm_term, kl_term = nll_sum, ops.sum(kl)
        if training and (self.kl_warmup_steps or self.topic_warmup_steps):
            step = optimizer_step(self)
            lm_term = self.lm_weight(step) * nll_sum
            kl_term = self.kl_weight(step) * kl_term
        elbo_terms = lm_term + tm_nll_sum + kl_term
        # The diversity term is equal on all replicas: under a strategy it is
        # counted once, as replica_share weights sum to one.
        loss = elbo_terms / ops.maximum(num_tokens, 1.0) - self.diversity_weight * diversity
        sentences = ops.cast(ops.shape(kl)[0], "float32")
        return {"loss": loss, "units": num_tokens, "nll_sum": nll_sum, "num_tokens": num_tokens,
                "kl": kl, "tm_nll_sum": tm_nll_sum, "tm_words": tm_words,
                "diversity": diversity,
                "report": {"kl": (ops.divide_no_nan(ops.sum(kl), sentences), sentences),
                           "tm_nll": (ops.divide_no_nan(tm_nll_sum, tm_words), tm_words),
                           "diversity_reg": (diversity, 1.0)}}

    def kl_weight(self, step):
        """The KL annealing weight min(1, step / kl_warmup_steps) (1 without warm-up).

        Args:
            step: optimizer steps taken (a number or scalar tensor).

        Returns:
            float32 scalar in [0, 1] (`tfktopic.models.schedules.annealing_weight`).
        """
        return annealing_weight(step, self.kl_warmup_steps)

    def lm_weight(self, step):
        """Weight of the LM's NLL: 0 for the first `topic_warmup_steps` steps, then 1."""
        return after_warmup(step, self.topic_warmup_steps)

    # -- topics and generation ---------------------------------------------------------------

    def beta(self):
        """The topic-word distributions, numpy [K, topic_vocab_size] (rows sum to 1)."""
        return np.asarray(self.topic_model.decoder.beta())

    def topic_word_matrix(self):
        """beta [K, topic_vocab_size] (`beta`); `topics()` ranks its rows."""
        return self.beta()

    def generation_conditioning(self, num_sentences, topic=None, context_bow=None, seed=None):
        """Topic proportions t of each sentence for `generate`.

        Args:
            num_sentences: N.
            topic: None (t from the prior: theta ~ N(0, I), drawn with `seed`),
                an int k (a single topic, t = one-hot e_k: "use only the k-th
                factor of W_b and U_b", TCNLM §4.3), or nonnegative weights [K] /
                [N, K] for a mixture of topics (normalised to sum to 1).
            context_bow: instead of `topic`, a context bag of words [D] or
                [N, D]; t is its posterior mean.
            seed: seed of the prior draw.

        Returns:
            float [N, K] tensor (rows on the simplex).
        """
        def prior(n):  # theta ~ N(0, I), t = softmax(W theta + b)
            return self.topic_model.prior_topic_proportions(
                n, seed=keras.random.SeedGenerator(seed))

        t = simplex_topics(num_sentences, self.num_topics, self.topic_vocab_size,
                           self.topic_proportions, prior, topic, context_bow)
        return ops.convert_to_tensor(t, self.compute_dtype)

    def initial_generation_state(self, num_sentences):
        shape = (num_sentences, self.hidden_dim) if self.mixture == "factorized" else \
            (self.num_topics, num_sentences, self.hidden_dim)
        return [[ops.zeros(shape, self.compute_dtype)] * 2 for _ in range(self.num_layers)]

    def generation_step(self, token, state, conditioning):
        """log p(next token | previous token, state, t) via `language_model`."""
        predictions, state = self.language_model(token[:, None], conditioning, states=state)
        return ops.log_softmax(predictions[:, 0], axis=-1), state

    def get_config(self):
        return {**super().get_config(), "vocab_size": self.vocab_size,
                "topic_vocab_size": self.topic_vocab_size, "num_topics": self.num_topics,
                "embedding_dim": self.embedding_dim, "hidden_dim": self.hidden_dim,
                "num_layers": self.num_layers, "factor_dim": self.factor_dim,
                "ntm_units": list(self.ntm_units), "diversity_weight": self.diversity_weight,
                "mixture": self.mixture, "dropout": self.dropout,
                "bow_normalization": self.bow_normalization, "seed": self.seed,
                "kl_warmup_steps": self.kl_warmup_steps,
                "topic_warmup_steps": self.topic_warmup_steps,
                "decoder_init": self.decoder_init, "initialization": self.initialization,
                "gate_order": GATE_ORDER}

    @classmethod
    def from_config(cls, config):
        """A config without ``gate_order`` (a file saved before it) holds the factorized
        LSTM's gates in the order (i, f, o, c); they are put in (i, f, c, o) on load."""
        return super().from_config({"gate_order": LEGACY_GATE_ORDER, **config})
