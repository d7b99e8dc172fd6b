"""LDA+LSTM: an LSTM language model with LDA topic proportions of the context.

The baseline of Lau, Baldwin & Cohn (*Topically Driven Neural Language Model*,
ACL 2017, §5 "LDA+LSTM") that TCNLM (Wang et al., AISTATS 2018, Table 2) and
TopicRNN comparisons copy: an LDA model is trained on the training documents,
the topic proportions theta_d of a sentence's document context are inferred
with it, and theta_d is concatenated to the LSTM output before the softmax::

    h_t = LSTM(E y_{<t})                 (zero state per sentence window)
    p(y_t | y_<t, d) = softmax(W [h_t ; theta_d] + b)

Design (why the LDA lives inside the Keras model):

* LDA is fitted once with gensim (`fit_lda`: `LdaModel`, online variational
  Bayes, Hoffman et al. 2010) on the topic-vocabulary bags of words of the
  training documents.
* Its variational topic-word parameters lambda [K, V_c] and the Dirichlet prior
  alpha [K] become **non-trainable weights** of `LDATopicInference`, which runs
  gensim's per-document variational E-step as TF ops on the pipeline's
  ``context_bow``. The model is therefore self-contained: it trains, evaluates,
  saves (`.keras`, the LDA parameters saved as weights) and exports on the
  pipeline dicts alone, and the leak-free ``preceding`` protocol applies to the
  LDA context exactly as to every other topic model -- no side channel of
  precomputed topic proportions that could be built from the wrong context.
* The E-step receives no gradient (`stop_gradient`, non-trainable weights): the
  LDA stays the LDA that gensim fitted, only the LSTM, embedding and softmax
  learn (the baseline of the papers keeps LDA fixed, too).

The E-step (Blei, Ng & Jordan 2003, eqs. (6)-(7); Hoffman et al. 2010, Alg. 2,
in gensim's Lee-Seung form without an explicit phi) for a context with counts
n_w::

    E[log beta_kw]  = psi(lambda_kw) - psi(sum_w' lambda_kw')
    E[log theta_k]  = psi(gamma_k)   - psi(sum_k' gamma_k')
    phi_wk          ∝ exp(E[log theta_k]) exp(E[log beta_kw])
    gamma_k         = alpha_k + sum_w n_w phi_wk
                    = alpha_k + exp(E[log theta_k]) sum_w n_w exp(E[log beta_kw]) / phinorm_w

iterated until the mean absolute change of gamma is below `gamma_threshold`
(per document) or `iterations` is reached; theta = gamma / sum(gamma), which is
gensim's `get_document_topics(..., minimum_probability=0)`. gensim starts gamma
from a random Gamma(100, 1/100) draw; this layer starts from its mean (all
ones), so it is deterministic and agrees with gensim to the convergence
tolerance (tested against `LdaModel.inference` on real documents).
"""

import numpy as np
import keras
from keras import ops

from tfktopic.distributions import digamma
from tfktopic.lda import LDA_PASSES, fit_lda, lda_bow_corpus
from tfktopic.layers.hoisted_lstm import run_lstm
from tfktopic.models.lstm import lda_presets as lda_lstm_presets
from tfktopic.models.decoding import simplex_topics, stacked_cell_step
from tfktopic.models.lstm.lstm_lm import LSTMLanguageModel

__all__ = ["LDATopicInference", "LDALSTMLanguageModel", "fit_lda", "lda_bow_corpus",
           "LDA_PASSES"]

def _lda_parameters(lda):
    """(lambda [K, V], alpha [K]) of a gensim LdaModel or a dict of the two."""
    if isinstance(lda, dict):
        try:
            return np.asarray(lda["topic_word"], np.float32), np.asarray(lda["alpha"], np.float32)
        except KeyError as error:
            raise ValueError(
                f"lda dict needs keys 'topic_word' and 'alpha', missing {error}") from None
    if hasattr(lda, "state") and hasattr(lda, "alpha"):
        return (np.asarray(lda.state.get_lambda(), np.float32),
                np.asarray(lda.alpha, np.float32).reshape(-1))
    raise ValueError(f"lda must be a gensim LdaModel or a dict with 'topic_word' and 'alpha', "
                     f"got {type(lda).__name__}")


def _dirichlet_expectation(concentration):
    """E[log x] under Dirichlet(concentration) along the last axis."""
    return digamma(concentration) - digamma(ops.sum(concentration, axis=-1, keepdims=True))


@keras.saving.register_keras_serializable(package="tfktopic")
class LDATopicInference(keras.layers.Layer):
    """LDA's variational E-step on a bag of words, as TF ops (fixed, non-trainable).

    Holds a fitted LDA's topic-word variational parameters lambda [K, V] and
    Dirichlet prior alpha [K] as non-trainable weights and maps a batch of
    bags of words to topic proportions theta = gamma / sum(gamma) (module
    docstring; Blei et al. 2003 eqs. (6)-(7)). No gradient flows through it.

    Args:
        num_topics: K.
        vocab_size: V, the topic-vocabulary size (width of ``context_bow``).
        iterations: maximum E-step iterations (gensim: 50).
        gamma_threshold: a document stops when the mean absolute change of its
            gamma falls below this (gensim: 1e-3); 0 runs all `iterations`.
        lda: optional gensim `LdaModel` (or dict ``topic_word``/``alpha``) to
            copy the parameters from; not part of the config (they are weights).

    Call args:
        bow: float [B, V] counts.

    Returns:
        theta, float [B, K], rows summing to one (alpha / sum(alpha) for an
        empty bag of words).

    Example:
    >>> layer = LDATopicInference(2, 3, lda={"topic_word": [[5., 1., 1.], [1., 1., 5.]],
    ...                                      "alpha": [0.5, 0.5]})
    >>> theta = layer(np.array([[4., 0., 0.], [0., 0., 0.]], np.float32))
    >>> np.round(np.asarray(theta), 2).tolist()[1]
    [0.5, 0.5]
    """

    def __init__(self, num_topics, vocab_size, iterations=50, gamma_threshold=1e-3, lda=None,
                 **kwargs):
        super().__init__(**kwargs)
        for name, value in (("num_topics", num_topics), ("vocab_size", vocab_size),
                            ("iterations", iterations)):
            if int(value) < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        if not float(gamma_threshold) >= 0.0:
            raise ValueError(f"gamma_threshold must be >= 0, got {gamma_threshold}")
        self.num_topics = int(num_topics)
        self.vocab_size = int(vocab_size)
        self.iterations = int(iterations)
        self.gamma_threshold = float(gamma_threshold)
        # Uniform placeholders until `set_lda` (or loading saved weights).
        self.topic_word = self.add_weight(shape=(self.num_topics, self.vocab_size),
                                          initializer="ones", trainable=False, name="topic_word")
        self.alpha = self.add_weight(shape=(self.num_topics,),
                                     initializer=keras.initializers.Constant(1.0 / self.num_topics),
                                     trainable=False, name="alpha")
        if lda is not None:
            self.set_lda(lda)

    def set_lda(self, lda):
        """Copy lambda and alpha from a gensim `LdaModel` (or a dict of the two).

        Raises:
            ValueError: when the shapes disagree with num_topics / vocab_size, or
                lambda / alpha are not positive.
        """
        topic_word, alpha = _lda_parameters(lda)
        expected = (self.num_topics, self.vocab_size)
        if topic_word.shape != expected or alpha.shape != (self.num_topics,):
            raise ValueError(
                f"lda has {topic_word.shape[0]} topics over {topic_word.shape[-1]} words "
                f"(alpha {alpha.shape}), but the layer expects num_topics={self.num_topics} and "
                f"vocab_size={self.vocab_size}: fit the LDA on the same topic vocabulary")
        if not (np.all(topic_word > 0) and np.all(alpha > 0)):
            raise ValueError("lda topic_word (lambda) and alpha must be strictly positive")
        self.topic_word.assign(topic_word)
        self.alpha.assign(alpha)

    def topic_word_distribution(self):
        """beta [K, V]: each topic's expected word distribution lambda / sum(lambda)
        (gensim's `get_topics()`), as a numpy array."""
        topic_word = np.asarray(ops.convert_to_numpy(self.topic_word), np.float64)
        return topic_word / topic_word.sum(axis=1, keepdims=True)

    def call(self, bow):
        bow = ops.stop_gradient(ops.cast(bow, "float32"))
        alpha = ops.stop_gradient(ops.cast(self.alpha, "float32"))
        exp_elog_beta = ops.stop_gradient(
            ops.exp(_dirichlet_expectation(ops.cast(self.topic_word, "float32"))))  # [K, V]
        epsilon = np.finfo(np.float32).eps  # gensim's phinorm floor

        def expectations(gamma):
            exp_elog_theta = ops.exp(_dirichlet_expectation(gamma))            # [B, K]
            phinorm = ops.matmul(exp_elog_theta, exp_elog_beta) + epsilon      # [B, V]
            return exp_elog_theta, phinorm

        # The loop state keeps fixed shapes (no gathers): jax.jit traces it once.
        gamma = ops.zeros_like(bow[:, :1]) + ops.ones((self.num_topics,))       # [B, K]
        done = ops.zeros_like(gamma[:, 0], dtype="bool")
        exp_elog_theta, phinorm = expectations(gamma)

        def keep_going(i, gamma, done, exp_elog_theta, phinorm):
            return ops.logical_and(i < self.iterations, ops.logical_not(ops.all(done)))

        def update(i, gamma, done, exp_elog_theta, phinorm):
            new = alpha + exp_elog_theta * ops.matmul(bow / phinorm,
                                                      ops.transpose(exp_elog_beta))
            change = ops.mean(ops.abs(new - gamma), axis=-1)
            new = ops.where(done[:, None], gamma, new)      # converged documents stay put
            done = ops.logical_or(done, change < self.gamma_threshold)
            return (i + 1, new, done) + expectations(new)

        _, gamma, _, _, _ = ops.while_loop(
            keep_going, update,
            (ops.convert_to_tensor(0, "int32"), gamma, done, exp_elog_theta, phinorm),
            maximum_iterations=self.iterations)
        return ops.stop_gradient(gamma / ops.sum(gamma, axis=-1, keepdims=True))

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)[:-1] + (self.num_topics,)

    def get_config(self):
        return {**super().get_config(), "num_topics": self.num_topics,
                "vocab_size": self.vocab_size, "iterations": self.iterations,
                "gamma_threshold": self.gamma_threshold}


@keras.saving.register_keras_serializable(package="tfktopic")
class LDALSTMLanguageModel(LSTMLanguageModel):
    """LSTM LM whose softmax sees LDA topic proportions of the context (LDA+LSTM).

    logits_t = W [h_t ; theta_d] + b, with theta_d inferred by the fixed LDA
    E-step (`LDATopicInference`) from the batch's ``context_bow``. Training,
    metrics (``loss``, ``nll``, ``ppl``), dropout and saving are those of
    `LSTMLanguageModel` (sentence level: every window starts from a zero state).
    `generate` draws sentences with theta from a topic, a context or LDA's prior
    Dirichlet(alpha) (`generation_conditioning`).

    Args:
        vocab_size: LM vocabulary size.
        topic_vocab_size: V_c, the width of ``context_bow``.
        num_topics: K, the LDA's number of topics.
        embedding_dim, hidden_dim, num_layers, dropout, embeddings, initialization:
            as in `LSTMLanguageModel` ("torch" draws the softmax bias from
            U(±1/sqrt(H)), where PyTorch's ``nn.Linear`` on [h; theta] would use
            1/sqrt(H + K)).
        lda: the fitted gensim `LdaModel` from `fit_lda` (or a dict with
            ``topic_word`` [K, V_c] and ``alpha`` [K]); its parameters become
            non-trainable weights (saved with the model, not in the config).
            Without it the topics are uniform placeholders -- only useful when
            the weights are loaded afterwards.
        lda_iterations, gamma_threshold: the E-step budget (see
            `LDATopicInference`).

    Example:
    >>> lda = fit_lda(train, topic_vocab, num_topics=50, passes=10)    # doctest: +SKIP
    >>> model = LDALSTMLanguageModel(len(lm_vocab), len(topic_vocab), num_topics=50,
    ...                              embedding_dim=300, hidden_dim=600, lda=lda)  # doctest: +SKIP
    >>> model.compile(optimizer="adam")                                # doctest: +SKIP
    >>> model.fit(sentence_dataset(train_examples), epochs=5)          # doctest: +SKIP
    >>> model.topics(10, vocabulary=topic_vocab)[0]                    # doctest: +SKIP
    >>> model.generate(3, max_len=20, topic=4, method="top_k", seed=0)  # doctest: +SKIP
    """

    def __init__(self, vocab_size, topic_vocab_size, num_topics=50, embedding_dim=300,
                 hidden_dim=600, num_layers=1, dropout=0.0, lda=None, lda_iterations=50,
                 gamma_threshold=1e-3, embeddings=None, initialization="keras", **kwargs):
        if kwargs.pop("document_level", False):
            raise ValueError("document_level must be False: LDALSTMLanguageModel is a "
                             "sentence-level model (the LDA context carries the document)")
        for name, value in (("topic_vocab_size", topic_vocab_size), ("num_topics", num_topics)):
            if int(value) < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        super().__init__(vocab_size, embedding_dim=embedding_dim, hidden_dim=hidden_dim,
                         num_layers=num_layers, dropout=dropout, document_level=False,
                         embeddings=embeddings, initialization=initialization, **kwargs)
        self.topic_vocab_size = int(topic_vocab_size)
        self.num_topics = int(num_topics)
        self.lda_iterations = int(lda_iterations)
        self.gamma_threshold = float(gamma_threshold)
        self.topic_inference = LDATopicInference(
            self.num_topics, self.topic_vocab_size, iterations=self.lda_iterations,
            gamma_threshold=self.gamma_threshold, lda=lda, name="lda",
            dtype="float32")  # the E-step's digamma iterations stay float32 under any policy

    has_topics = True
    simplex_topics = True
    presets = lda_lstm_presets.PRESETS

    @classmethod
    def _lda_start(cls, settings, overrides, tokenizer, documents, preset):
        """`from_preset`'s ``documents=``: the model's LDA, fitted on them (`fit_lda` over
        `tokenizer`'s topic vocabulary with the preset's ``lda_passes``, default
        `LDA_PASSES` as ``tfktopic train``'s, seed 0) unless ``lda=`` is given."""
        if documents is None or overrides.get("lda") is not None:
            return super()._lda_start(settings, overrides, tokenizer, None, preset)
        merged = {**settings, **overrides}
        lda = fit_lda(documents, cls._documents_vocabulary(tokenizer, preset),
                      num_topics=merged.get("num_topics", 50),
                      passes=cls._preset_training(preset).get("lda_passes", LDA_PASSES), seed=0,
                      iterations=merged.get("lda_iterations", 50))
        return {**overrides, "lda": lda}

    def sampled_parameters(self):
        """The LDA's topic-word matrix and alpha (fitted by gensim, not by gradient)."""
        return [self.topic_inference.topic_word, self.topic_inference.alpha]

    def topic_proportions(self, bow):
        """theta [B, K] of a batch of context bags of words (the LDA E-step)."""
        return self.topic_inference(self._check_bow_width(bow, self.topic_vocab_size))

    def call(self, inputs, training=False, return_features=False):
        """Next-token logits [B, T, V]; with `return_features` the softmax input
        [B, T, H + K] (the LSTM output and theta of the window at every step)."""
        if not isinstance(inputs, dict) or "context_bow" not in inputs:
            got = sorted(inputs) if isinstance(inputs, dict) else type(inputs).__name__
            raise ValueError("LDALSTMLanguageModel takes the pipeline dict with 'tokens' and "
                             f"'context_bow' (sentence_dataset), got {got}")
        theta = self.topic_proportions(inputs["context_bow"])                 # [B, K]
        x = self.dropouts[0](self.embedding(inputs["tokens"]), training=training)
        for lstm, dropout in zip(self.lstms, self.dropouts[1:]):
            x = dropout(run_lstm(lstm, x, training=training), training=training)
        # theta is constant over the window: broadcast it to every step.
        theta = ops.expand_dims(ops.cast(theta, x.dtype), 1) + ops.zeros_like(x[..., :1])
        features = ops.concatenate([x, theta], axis=-1)
        if not return_features:
            return self.softmax(features)
        if not self.softmax.built:  # built here, as the full call does
            self.softmax.build(features.shape)
        return features

    def generation_conditioning(self, num_sentences, topic=None, context_bow=None, seed=None):
        """LDA topic proportions theta of each sentence for `generate` (from ``<bos>``
        and a zero state, as the model reads every window).

        Args:
            num_sentences: N.
            topic: None (theta ~ Dirichlet(alpha), LDA's prior, drawn with `seed`), an
                int k (theta = e_k: only topic k), or nonnegative weights [K] / [N, K]
                of a mixture of topics (normalised to sum to 1).
            context_bow: instead of `topic`, a context bag of words [V_c] or [N, V_c];
                theta is its E-step estimate (`topic_proportions`), as in training.
            seed: seed of the prior draw.

        Returns:
            float32 [N, K] tensor (rows on the simplex).
        """
        def prior(n):
            alpha = np.asarray(ops.convert_to_numpy(self.topic_inference.alpha), np.float64)
            return np.random.default_rng(seed).dirichlet(alpha, size=n)

        return ops.convert_to_tensor(simplex_topics(num_sentences, self.num_topics,
                                          self.topic_vocab_size, self.topic_proportions,
                                          prior, topic, context_bow))

    def generation_step(self, token, state, conditioning):
        """log p(next token | previous tokens, theta) [N, V]: the softmax of the top
        cell's output and theta, as in `call`; and the new state."""
        x, new_state = stacked_cell_step(self.generation_cells(), self.embedding(token), state)
        features = ops.concatenate([x, ops.cast(conditioning, x.dtype)], axis=-1)
        return ops.log_softmax(ops.cast(self.softmax(features), "float32"), axis=-1), new_state

    def topic_word_matrix(self):
        """beta [K, V_c]: each LDA topic's expected word distribution lambda / sum(lambda)
        (gensim's `get_topics`); `topics()` ranks its rows."""
        return self.topic_inference.topic_word_distribution()

    def get_config(self):
        config = super().get_config()
        config.pop("document_level", None)
        return {**config, "topic_vocab_size": self.topic_vocab_size,
                "num_topics": self.num_topics, "lda_iterations": self.lda_iterations,
                "gamma_threshold": self.gamma_threshold}
