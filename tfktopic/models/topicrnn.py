"""TopicRNN / TopicLSTM / TopicGRU (Dieng, Wang, Gao & Paisley, ICLR 2017).

The model (§3; reference sgmcmc_and_topicrnn.md §B5):

* theta ~ N(0, I_K), one per document; q(theta | X_c) = N(mu, diag sigma^2)
  from a ReLU MLP over the stop-word-free bag of words X_c
  (`GaussianTopicEncoder`);
* h_t = RNN(x_t, h_{t-1}) with a fused `SimpleRNN` / `LSTM` / `GRU` layer
  (no Python loop over time);
* l_t ~ Bernoulli(sigmoid(Gamma^T h_t)), observed: 1 when y_t is a stop word
  (its entry of ``lm_to_topic`` is -1);
* p(y_t | h_t, theta, l_t) ∝ exp(V h_t + (1 - l_t) B^T theta) (`StopwordGate`).

Training maximises the ELBO (§3, "the ELBO")

    sum_t [log p(y_t | h_t, l_t, theta) + log p(l_t | h_t)] - KL(q(theta | X_c) || N(0, I))

with theta sampled by reparameterisation, the observed l_t, and the KL
charged **once per document** (reference §B5 "Recommended TBPTT scheme", as
Zheng, Vafa & Blei's re-implementation): a window with n of its document's N
predicted tokens carries ``(n / N) * KL`` of its own q, so the charges of the
windows of a document sum to one KL (exactly one when they share q). The loss
of a batch is

    [sum_t (NLL_t + BCE_t) + sum_windows (n_w / N_w) KL_w] / #predicted tokens,

i.e. summed over an epoch, the negative ELBO of the corpus per token. N comes
from the batch's ``doc_targets`` (``sentence_dataset(..., document_targets=True)``),
else from ``tokens_per_document``; without either every window is treated as
its own document (KL per window, a warning says so).

Evaluation (§3 and §4.1; reference §B6): theta = mean of q inferred from the
*preceding* words only (the pipeline's ``protocol="preceding"`` contexts) and
the unknown l_t is marginalised, so ``model(batch)`` returns normalised
log-probabilities and `tfktopic.evaluation.evaluate_perplexity` works unchanged.

Inputs are the pipeline dicts: sentence windows ``tokens`` [B, T] with
``context_bow`` [B, V_c] (each window from a zero state), or document chunks
``tokens`` [B, J, T] with ``context_bow`` [B, J, V_c] (`document_dataset`): the
J windows are laid end to end and the RNN state is carried across them
(padding steps are masked), one theta per window from its own context.
"""

import inspect
import warnings

import keras
import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp
from keras import ops

from tfktopic.distribute import global_logs, replica_share
from tfktopic.evaluation.perplexity import Perplexity, masked_token_nll
from tfktopic.layers.stopword_gate import VARIANTS, StopwordGate, check_lm_to_topic
from tfktopic.layers.topic_encoders import BOW_NORMALIZATIONS, GaussianTopicEncoder
from tfktopic.models.decoding import GENERATION_METHODS, next_tokens

__all__ = ["TopicRNN", "PRESETS", "CELLS", "GENERATION_METHODS", "build_sentiment_classifier"]

tfd = tfp.distributions

CELLS = {"rnn": keras.layers.SimpleRNN, "lstm": keras.layers.LSTM, "gru": keras.layers.GRU}

# Setups of Dieng et al. (2017), reference §B7. Flat dicts: constructor
# arguments of `TopicRNN` (picked by `TopicRNN.from_preset`) plus data and
# training hyperparameters read by the scripts. The paper does not give the
# batch size, learning rate or BPTT length for PTB: ours are marked "ours".
_PTB = {
    "dataset": "ptb",
    "sentences_per_document": 10,   # §4.1: documents = blocks of 10 sentences (Mikolov & Zweig)
    "min_count": 1,                 # PTB is already <unk>-ed to 10k types
    "stopwords": "mallet",          # the paper's 449-word list is not published (§B7)
    "max_freq_fraction": 0.0,       # §4.1: only stop words are removed from X_c
    "num_layers": 1,                # §4.1: "1 layer for the RNN ... in all word prediction experiments"
    "encoder_units": (200, 200),    # §4.1: inference MLP, 2 hidden layers x 200 ReLU
    "variant": "paper",
    "dropout": 0.0,                 # §4.1: no dropout
    "optimizer": "adam",            # §4.1
    "learning_rate": 1e-3,          # ours (not given)
    "batch_size": 64,               # ours (not given)
    "max_len": 30,                  # ours: sentence windows of <= 30 predicted tokens
    "context_len": 300,
    "epochs": 15,                   # §4.1: at most 15 epochs, early stopping on validation
    "early_stopping_patience": 2,   # ours
}

PRESETS = {
    # Table 2, 10 neurons: K = 18 topics.
    "ptb_10": {**_PTB, "hidden_dim": 10, "num_topics": 18, "cell": "rnn"},
    # Table 2, 100 neurons: K = 50 (also Table 1's topics: 100 neurons, 50 topics).
    "ptb_100": {**_PTB, "hidden_dim": 100, "num_topics": 50, "cell": "rnn"},
    # Table 2, 300 neurons: K = 50.
    "ptb_300": {**_PTB, "hidden_dim": 300, "num_topics": 50, "cell": "rnn"},
    # The default paper setup: PTB, 100 neurons, 50 topics (Tables 1-2).
    "paper": {**_PTB, "hidden_dim": 100, "num_topics": 50, "cell": "rnn"},
    # §4.2 IMDB sentiment: vocabulary 5,000, stop words removed from X_c,
    # inference net 2 x 500, RNN 2 x 300, 200 topics, no dropout, 13 epochs;
    # features [mu(X_c), h_T] -> 50 sigmoid units -> sigmoid. Reviews are one
    # sequence truncated at 400 tokens (Walter1218's max_seqlen; ours).
    "imdb": {
        "dataset": "imdb", "max_size": 5000, "min_count": 1, "stopwords": "mallet",
        "max_freq_fraction": 0.0, "hidden_dim": 300, "num_layers": 2, "num_topics": 200,
        "encoder_units": (500, 500), "cell": "rnn", "variant": "paper", "dropout": 0.0,
        "optimizer": "adam", "learning_rate": 3e-4, "batch_size": 32, "max_len": 400,
        "epochs": 13, "classifier_units": 50, "classifier_epochs": 100,
    },
    # A small setup that trains in a minute on 2 CPU cores (tests, demos).
    "small": {
        "dataset": "lee", "min_count": 3, "stopwords": "gensim", "max_freq_fraction": 0.001,
        "hidden_dim": 32, "num_topics": 8, "encoder_units": (64,), "cell": "lstm",
        "num_layers": 1, "variant": "paper", "dropout": 0.0, "optimizer": "adam",
        "learning_rate": 3e-3, "batch_size": 64, "max_len": 30, "context_len": 300,
        "epochs": 8,
    },
}


def _positive_int(name, value):
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a positive int, got {value!r}") from None
    if number < 1 or number != value:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return number


@keras.saving.register_keras_serializable(package="tfktopic")
class TopicRNN(keras.Model):
    """TopicRNN language model (``cell="rnn"``), TopicLSTM or TopicGRU.

    Args:
        vocab_size: C, the LM vocabulary size.
        lm_to_topic: `TopicVocabulary.lm_to_topic`: for each LM id its topic
            id, or -1 for stop words and special tokens (l_t = 1 exactly when
            the target's entry is -1); the topic vocabulary has V_c entries.
        num_topics: K, the size of theta.
        hidden_dim: RNN units per layer (the paper's 10 / 100 / 300 neurons).
        embedding_dim: word embedding size; `None` uses `hidden_dim` (the
            paper's U is C x H).
        cell: "rnn" (TopicRNN), "lstm" (TopicLSTM) or "gru" (TopicGRU).
        num_layers: stacked recurrent layers (PTB: 1, IMDB: 2).
        encoder_units: ReLU layers of the inference network (PTB: (200, 200),
            IMDB: (500, 500)).
        variant: "paper" (full-vocabulary softmaxes, evaluation marginalises
            l_t) or "disjoint" (stop / content supports; see `StopwordGate`).
        dropout: dropout on the embeddings, between layers and before the
            output (the paper uses none).
        embeddings: optional ``[vocab_size, embedding_dim]`` initial matrix.
        bow_normalization: scaling of X_c before the inference network
            ("total", "log1p" or "none"; see `normalize_bow`).
        tokens_per_document: document length N used to apportion the KL when a
            batch has no ``doc_targets``.
        seed: seed of the reparameterisation noise and dropout.

    Example:
    >>> model = TopicRNN(len(lm_vocab), topic_vocab.lm_to_topic, num_topics=50,
    ...                  hidden_dim=100, cell="gru")                     # doctest: +SKIP
    >>> model.compile(optimizer="adam")                                  # doctest: +SKIP
    >>> model.fit(sentence_dataset(train_examples, document_targets=True),
    ...           epochs=15)                                             # doctest: +SKIP
    >>> evaluate_perplexity(model, sentence_dataset(test_preceding, shuffle=False),
    ...                     protocol="preceding")                        # doctest: +SKIP
    """

    def __init__(self, vocab_size, lm_to_topic, num_topics=50, hidden_dim=200, embedding_dim=None,
                 cell="lstm", num_layers=1, encoder_units=(200, 200), variant="paper", dropout=0.0,
                 embeddings=None, bow_normalization="total", tokens_per_document=None, seed=None,
                 **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = _positive_int("vocab_size", vocab_size)
        self.lm_to_topic = check_lm_to_topic(lm_to_topic, self.vocab_size)
        self.num_topics = _positive_int("num_topics", num_topics)
        self.hidden_dim = _positive_int("hidden_dim", hidden_dim)
        self.num_layers = _positive_int("num_layers", num_layers)
        if embeddings is not None:
            embeddings = np.asarray(embeddings, np.float32)
            if embeddings.ndim != 2 or embeddings.shape[0] != self.vocab_size:
                raise ValueError(f"embeddings must have shape [vocab_size={self.vocab_size}, "
                                 f"embedding_dim], got {embeddings.shape}")
            if embedding_dim is None:
                embedding_dim = embeddings.shape[1]
            elif embeddings.shape[1] != embedding_dim:
                raise ValueError(f"embeddings have {embeddings.shape[1]} columns but "
                                 f"embedding_dim={embedding_dim}")
        self.embedding_dim = self.hidden_dim if embedding_dim is None else _positive_int(
            "embedding_dim", embedding_dim)
        if cell not in CELLS:
            raise ValueError(f"cell must be one of {tuple(CELLS)}, got {cell!r}")
        self.cell = cell
        self.encoder_units = tuple(_positive_int("encoder_units", u) for u in encoder_units)
        if variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
        self.variant = variant
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        self.dropout = float(dropout)
        if bow_normalization not in BOW_NORMALIZATIONS:
            raise ValueError(f"bow_normalization must be one of {BOW_NORMALIZATIONS}, "
                             f"got {bow_normalization!r}")
        self.bow_normalization = bow_normalization
        if tokens_per_document is not None and not float(tokens_per_document) > 0:
            raise ValueError(f"tokens_per_document must be > 0 or None, got {tokens_per_document}")
        self.tokens_per_document = None if tokens_per_document is None else float(
            tokens_per_document)
        self.seed = seed
        self.num_content = int((self.lm_to_topic >= 0).sum())

        self.embedding = keras.layers.Embedding(
            self.vocab_size, self.embedding_dim,
            weights=None if embeddings is None else [embeddings], name="embedding")
        self.rnns = [CELLS[cell](self.hidden_dim, return_sequences=True, name=f"{cell}_{i}")
                     for i in range(self.num_layers)]
        self.dropouts = [keras.layers.Dropout(self.dropout, seed=None if seed is None else seed + i)
                         for i in range(self.num_layers + 1)]
        self.encoder = GaussianTopicEncoder(self.num_topics, self.encoder_units,
                                            normalization=bow_normalization, seed=seed,
                                            name="encoder")
        self.gate = StopwordGate(self.vocab_size, self.lm_to_topic, self.num_topics,
                                 variant=variant, name="stopword_gate")
        self.loss_tracker = keras.metrics.Mean(name="loss")
        self.perplexity = Perplexity(name="ppl")
        self.token_nll_tracker = keras.metrics.Mean(name="token_nll")
        self.stop_nll_tracker = keras.metrics.Mean(name="stop_nll")
        self.kl_tracker = keras.metrics.Mean(name="kl")
        self.build()

    def build(self, input_shape=None):
        """Create every weight; all shapes follow from the constructor arguments."""
        if self.built:
            return
        self.embedding.build((None, None))
        shape = (None, None, self.embedding_dim)
        for rnn in self.rnns:
            rnn.build(shape)
            shape = (None, None, self.hidden_dim)
        self.encoder.build((None, self.num_content))
        self.gate.build(shape, (None, self.num_topics))
        self.built = True

    @classmethod
    def from_preset(cls, name, vocab_size, lm_to_topic, **overrides):
        """Build a model from `PRESETS[name]` (constructor keys only) and overrides."""
        if name not in PRESETS:
            raise ValueError(f"name must be one of {tuple(PRESETS)}, got {name!r}")
        accepted = set(inspect.signature(cls.__init__).parameters) - {"self", "kwargs"}
        kwargs = {k: v for k, v in PRESETS[name].items() if k in accepted}
        kwargs.update(overrides)
        return cls(vocab_size, lm_to_topic, **kwargs)

    # ----------------------------------------------------------------- forward
    def hidden_states(self, tokens, training=False):
        """Top-layer RNN states h_t: [B, T, H] for [B, T] tokens, [B, J, T, H] for [B, J, T].

        Document chunks are laid end to end with padding masked, so the state
        is carried across the J windows and passes unchanged through padding.
        """
        tokens = ops.cast(tokens, "int32")
        chunked = len(tokens.shape) == 3
        mask = None
        if chunked:
            shape = ops.shape(tokens)
            tokens = ops.reshape(tokens, (shape[0], shape[1] * shape[2]))
            mask = ops.not_equal(tokens, 0)
        x = self.dropouts[0](self.embedding(tokens), training=training)
        for rnn, dropout in zip(self.rnns, self.dropouts[1:]):
            x = dropout(rnn(x, mask=mask, training=training), training=training)
        if chunked:
            x = ops.reshape(x, (shape[0], shape[1], shape[2], self.hidden_dim))
        return x

    def _check_context(self, context_bow):
        width = context_bow.shape[-1]
        if width is not None and width != self.num_content:
            raise ValueError(f"context_bow has {width} columns but the topic vocabulary of "
                             f"lm_to_topic has {self.num_content} words")

    def infer_topics(self, context_bow, training=False):
        """q(theta | X_c): (theta, mean, log_std), theta sampled when training."""
        context_bow = ops.convert_to_tensor(context_bow, "float32")
        self._check_context(context_bow)
        return self.encoder(context_bow, training=training)

    def call(self, inputs, training=False):
        """Marginal log-probabilities log p(y_t | y_<t, theta) [..., T, C] (§3, eq. of §B6).

        theta is the mean of q (a sample when training) of ``context_bow``.
        """
        hidden = self.hidden_states(inputs["tokens"], training=training)
        theta, _, _ = self.infer_topics(inputs["context_bow"], training=training)
        return self.gate(hidden, theta)["log_probs"]

    # --------------------------------------------------------------- objective
    def _kl_weights(self, data, window_tokens):
        """n_w / N_w per window: the share of the document's KL each window carries."""
        if "doc_targets" in data:
            doc_targets = ops.cast(data["doc_targets"], "float32")
            return window_tokens / ops.maximum(doc_targets, 1.0)
        if self.tokens_per_document is not None:
            return window_tokens / self.tokens_per_document
        warnings.warn(
            "TopicRNN: the batch has no 'doc_targets' and tokens_per_document is None, so every "
            "window is treated as its own document and charged a full KL. Build the dataset "
            "with sentence_dataset(..., document_targets=True) to charge the KL once per "
            "document.", stacklevel=3)
        return ops.cast(window_tokens > 0, "float32")

    def objective(self, data, training=False):
        """The ELBO's terms over a batch, as sums (nats).

        Args:
            data: a batch dict (``tokens``, ``targets``, ``mask``,
                ``context_bow`` and optionally ``doc_targets``).
            training: sample theta and apply dropout (True), or use the mean
                of q (False; then the marginal NLL is computed too).

        Returns:
            A dict of float32 scalars: ``token_nll`` (-sum log p(y_t | h_t,
            l_t, theta) with the observed l_t), ``stop_nll`` (-sum log
            p(l_t | h_t)), ``kl`` (sum over windows of (n_w / N_w) KL_w),
            ``num_tokens``, and, when not training, ``marginal_nll``
            (-sum log p(y_t | h_t, theta) with l_t marginalised).
        """
        targets, mask = data["targets"], ops.cast(data["mask"], "float32")
        hidden = self.hidden_states(data["tokens"], training=training)
        theta, mean, log_std = self.infer_topics(data["context_bow"], training=training)
        stop = self.gate.stop_indicator(targets)
        outputs = self.gate(hidden, theta, stop_indicator=stop, marginal=not training)
        token_nll, num_tokens = masked_token_nll(targets, outputs["logits"], mask)
        stop_log_prob = tfd.Bernoulli(logits=outputs["stop_logits"], dtype="float32").log_prob(stop)
        stop_nll = -ops.sum(stop_log_prob * mask)
        kl = ops.cast(self.encoder.kl(mean, log_std), "float32")
        kl_charged = ops.sum(self._kl_weights(data, ops.sum(mask, axis=-1)) * kl)
        terms = {"token_nll": token_nll, "stop_nll": stop_nll, "kl": kl_charged,
                 "num_tokens": num_tokens}
        if not training:
            terms["marginal_nll"], _ = masked_token_nll(targets, outputs["log_probs"], mask,
                                                        from_logits=False)
        return terms

    def per_token_loss(self, terms):
        """The negative ELBO per predicted token from `objective`'s sums:
        (token_nll + stop_nll + kl) / num_tokens."""
        return (terms["token_nll"] + terms["stop_nll"] + terms["kl"]) / ops.maximum(
            terms["num_tokens"], 1.0)

    def _report(self, terms, loss, nll_sum):
        count = terms["num_tokens"]
        per_token = lambda value: value / ops.maximum(count, 1.0)
        self.loss_tracker.update_state(loss, sample_weight=count)
        self.perplexity.update_from_sums(nll_sum, count)
        self.token_nll_tracker.update_state(per_token(terms["token_nll"]), sample_weight=count)
        self.stop_nll_tracker.update_state(per_token(terms["stop_nll"]), sample_weight=count)
        self.kl_tracker.update_state(per_token(terms["kl"]), sample_weight=count)
        # The trackers are token-weighted; under a distribution strategy the
        # logs are computed from the summed states of all replicas.
        return global_logs(self.metrics, lambda: {
            "loss": self.loss_tracker.result(), "nll": self.perplexity.nll(),
            "ppl": self.perplexity.result(), "token_nll": self.token_nll_tracker.result(),
            "stop_nll": self.stop_nll_tracker.result(), "kl": self.kl_tracker.result()})

    def train_step(self, data):
        """One step on the negative ELBO per token.

        Reports ``loss`` (= token_nll + stop_nll + kl, per token), ``nll`` /
        ``ppl`` of the joint -log p(y_t, l_t | h_t, theta) (for "disjoint" the
        marginal; for "paper" an upper bound of it), ``token_nll``,
        ``stop_nll`` and ``kl`` (the KL charged per token).
        """
        data, _, _ = keras.utils.unpack_x_y_sample_weight(data)
        with tf.GradientTape() as tape:
            terms = self.objective(data, training=True)
            loss = self.per_token_loss(terms)
            # A hand-written per-token mean is not rescaled by Keras under a
            # distribution strategy: weight it by this replica's share of the
            # global batch's tokens, so the summed gradients are the global ones.
            scaled = loss * replica_share(terms["num_tokens"])
            scaled = self.optimizer.scale_loss(scaled)
        gradients = tape.gradient(scaled, self.trainable_weights)
        self.optimizer.apply_gradients(zip(gradients, self.trainable_weights))
        return self._report(terms, loss, terms["token_nll"] + terms["stop_nll"])

    def test_step(self, data):
        """Evaluation with theta = mean of q: ``nll`` / ``ppl`` are the marginal
        over l_t (what `evaluate_perplexity` computes); ``loss`` is the ELBO
        per token at theta = mean."""
        data, _, _ = keras.utils.unpack_x_y_sample_weight(data)
        terms = self.objective(data, training=False)
        return self._report(terms, self.per_token_loss(terms), terms["marginal_nll"])

    @property
    def metrics(self):
        return [self.loss_tracker, self.perplexity, self.token_nll_tracker,
                self.stop_nll_tracker, self.kl_tracker]

    # ---------------------------------------------------------------- features
    def encode(self, inputs):
        """Document features of §4.2: [mu(X_c), last RNN state h_T].

        Args:
            inputs: a batch dict with ``tokens`` [B, L] (a whole document per
                row, e.g. from `tfktopic.data.contexts.document_examples`),
                ``context_bow`` [B, V_c] and optionally ``mask`` [B, L]; or a
                dataset / iterable of such dicts.

        Returns:
            float32 numpy array [B, K + H]: the mean of q(theta | X_c)
            (deterministic) and the top layer's hidden state after the last
            real token (masked positions excluded).
        """
        if not isinstance(inputs, dict):
            parts = [self.encode(batch) for batch in inputs]
            if not parts:
                return np.zeros((0, self.num_topics + self.hidden_dim), np.float32)
            return np.concatenate(parts)
        tokens = ops.convert_to_tensor(inputs["tokens"], "int32")
        if len(tokens.shape) != 2:
            raise ValueError(f"encode takes tokens of shape [B, L], got {tuple(tokens.shape)}")
        if "mask" in inputs:
            lengths = ops.cast(ops.sum(ops.cast(inputs["mask"], "float32"), axis=-1), "int32")
        else:
            lengths = ops.sum(ops.cast(ops.not_equal(tokens, 0), "int32"), axis=-1)
        hidden = self.hidden_states(tokens, training=False)
        last = ops.maximum(lengths - 1, 0)
        h_last = ops.take_along_axis(hidden, last[:, None, None], axis=1)[:, 0]
        _, mean, _ = self.infer_topics(inputs["context_bow"], training=False)
        return np.asarray(ops.concatenate([ops.cast(mean, "float32"),
                                           ops.cast(h_last, "float32")], axis=-1))

    # ------------------------------------------------------------------ topics
    def topics(self, top_n=10, vocabulary=None):
        """Top content words of each row of B (Table 1).

        Args:
            top_n: words per topic.
            vocabulary: a `TopicVocabulary` or a list of topic words; `None`
                returns ids.

        Returns:
            int array [K, top_n] of topic-vocabulary ids, or K lists of words.
        """
        top_n = _positive_int("top_n", top_n)
        if top_n > self.num_content:
            raise ValueError(f"top_n must be <= {self.num_content} (topic words), got {top_n}")
        weights = np.asarray(self.gate.topic_word)
        ids = np.argsort(-weights, axis=1, kind="stable")[:, :top_n]
        if vocabulary is None:
            return ids
        words = list(vocabulary.words if hasattr(vocabulary, "words") else vocabulary)
        if len(words) != self.num_content:
            raise ValueError(f"vocabulary has {len(words)} words, the model has "
                             f"{self.num_content} topic words")
        return [[words[i] for i in row] for row in ids]

    # -------------------------------------------------------------- generation
    def _generation_theta(self, num_sentences, topic, context_bow, topic_strength):
        if topic is not None and context_bow is not None:
            raise ValueError("pass topic or context_bow, not both")
        if context_bow is not None:
            bow = np.asarray(context_bow, np.float32)
            if bow.ndim == 1:
                bow = bow[None]
            if bow.ndim != 2 or bow.shape[-1] != self.num_content:
                raise ValueError(f"context_bow must have {self.num_content} columns, got "
                                 f"shape {bow.shape}")
            _, mean, _ = self.infer_topics(bow, training=False)
            theta = np.asarray(mean, np.float32)
        elif topic is None:
            _, mean, _ = self.infer_topics(np.zeros((1, self.num_content), np.float32))
            theta = np.asarray(mean, np.float32)
        elif np.ndim(topic) == 0:
            if not (isinstance(topic, (int, np.integer)) and 0 <= topic < self.num_topics):
                raise ValueError(f"topic must be an int in [0, {self.num_topics}) or a vector "
                                 f"of {self.num_topics} weights, got {topic!r}")
            theta = np.zeros((1, self.num_topics), np.float32)
            theta[0, int(topic)] = topic_strength
        else:
            weights = np.asarray(topic, np.float32)
            if weights.shape[-1] != self.num_topics or weights.ndim > 2:
                raise ValueError(f"topic must be an int in [0, {self.num_topics}) or a vector "
                                 f"of {self.num_topics} weights, got shape {weights.shape}")
            theta = topic_strength * weights.reshape(-1, self.num_topics)
        if len(theta) not in (1, num_sentences):
            raise ValueError(f"got {len(theta)} topic vectors for num_sentences={num_sentences}")
        return np.broadcast_to(theta, (num_sentences, self.num_topics)).astype(np.float32)

    def generate(self, num_sentences=1, max_len=30, topic=None, context_bow=None,
                 method="greedy", temperature=1.0, top_k=10, seed=None, topic_strength=3.0):
        """Generate sentences from the marginal predictive (§3, reference §B6).

        Every step feeds the previous token, computes the marginal over l_t
        (equivalently: draw l_t, then y_t from the chosen softmax), and picks
        the next token; ``<pad>`` and ``<bos>`` are never emitted.

        Args:
            num_sentences: sentences to generate.
            max_len: maximum tokens per sentence (``<eos>`` included).
            topic: `None`, a topic index k (theta = topic_strength * e_k), a
                vector of K weights (theta = topic_strength * weights) or an
                array [num_sentences, K].
            context_bow: a bag of words [V_c] or [num_sentences, V_c];
                theta = mean of q(theta | context_bow). With neither `topic`
                nor `context_bow`, theta = mean of q for an empty context.
            method: "greedy", "sample" (temperature sampling) or "top_k".
            temperature: softmax temperature (> 0) for "sample" and "top_k".
            top_k: candidates kept by "top_k".
            seed: seed of the sampler.
            topic_strength: length of theta along a chosen topic (theta ~ N(0, I)
                a priori, so 3 is three prior standard deviations).

        Returns:
            int32 array [num_sentences, max_len] of LM ids; every row ends at
            its first ``<eos>`` (id 2) and is padded with 0 after it.
        """
        num_sentences = _positive_int("num_sentences", num_sentences)
        max_len = _positive_int("max_len", max_len)
        if method not in GENERATION_METHODS:
            raise ValueError(f"method must be one of {GENERATION_METHODS}, got {method!r}")
        if not float(temperature) > 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        top_k = _positive_int("top_k", top_k)
        theta = tf.constant(self._generation_theta(num_sentences, topic, context_bow,
                                                   float(topic_strength)))
        rng = np.random.default_rng(seed)
        states = [[ops.convert_to_tensor(s) for s in rnn.cell.get_initial_state(num_sentences)]
                  for rnn in self.rnns]

        @tf.function
        def step(token, states):
            x = self.embedding(token)
            new_states = []
            for rnn, state in zip(self.rnns, states):
                x, state = rnn.cell(x, state, training=False)
                new_states.append(list(state) if isinstance(state, (list, tuple)) else [state])
            log_probs = self.gate(x[:, None, :], theta)["log_probs"][:, 0]
            return log_probs, new_states

        token = np.full(num_sentences, 1, np.int32)  # <bos>
        output = np.zeros((num_sentences, max_len), np.int32)
        done = np.zeros(num_sentences, bool)
        for t in range(max_len):
            log_probs, states = step(tf.constant(token), states)
            token = next_tokens(np.asarray(log_probs), method, temperature, top_k, rng)
            output[:, t] = np.where(done, 0, token)
            done |= token == 2
            if done.all():
                break
        return output

    def get_config(self):
        return {**super().get_config(), "vocab_size": self.vocab_size,
                "lm_to_topic": self.lm_to_topic.tolist(), "num_topics": self.num_topics,
                "hidden_dim": self.hidden_dim, "embedding_dim": self.embedding_dim,
                "cell": self.cell, "num_layers": self.num_layers,
                "encoder_units": list(self.encoder_units), "variant": self.variant,
                "dropout": self.dropout, "bow_normalization": self.bow_normalization,
                "tokens_per_document": self.tokens_per_document, "seed": self.seed}


def build_sentiment_classifier(feature_dim, hidden_units=50, train_features=None,
                               learning_rate=3e-4):
    """The IMDB classifier of §4.2: features -> 50 sigmoid units -> sigmoid.

    (Le & Mikolov's one-hidden-layer network on TopicRNN's document features;
    a single sigmoid output replaces the 2-way softmax.)

    Args:
        feature_dim: width of `TopicRNN.encode` features (K + H).
        hidden_units: hidden sigmoid units (50 in the paper).
        train_features: optional [N, feature_dim] training features; when
            given, a `Normalization` layer standardises the inputs with their
            mean and variance (mu(X_c) and h_T have different scales).
        learning_rate: Adam step size (Walter1218's 3e-4).

    Returns:
        A compiled `keras.Sequential` (binary cross-entropy, accuracy).

    Example:
    >>> classifier = build_sentiment_classifier(8)
    >>> classifier.output_shape
    (None, 1)
    """
    feature_dim = _positive_int("feature_dim", feature_dim)
    layers = [keras.Input((feature_dim,))]
    if train_features is not None:
        normalization = keras.layers.Normalization()
        normalization.adapt(np.asarray(train_features, np.float32))
        layers.append(normalization)
    layers += [keras.layers.Dense(_positive_int("hidden_units", hidden_units),
                                  activation="sigmoid", name="hidden"),
               keras.layers.Dense(1, activation="sigmoid", name="sentiment")]
    classifier = keras.Sequential(layers, name="topicrnn_sentiment")
    classifier.compile(optimizer=keras.optimizers.Adam(learning_rate),
                       loss="binary_crossentropy", metrics=["accuracy"])
    return classifier
