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

**Topic quality.** With a random start the rows of B fill with rare, document-specific
words (APNEWS, K = 50: NPMI 0.70 x LDA); ``decoder_init="lda"`` with ``lda_scale=0.1``
(the ``coherent`` preset) keeps corpus-level topics (1.15-1.37 x LDA) and lowers the test
perplexity (the measurements: docs/models/topicrnn.md, "Topic quality").
"""

import warnings

import keras
import numpy as np
from keras import ops

from tfktopic.distributions import bernoulli_log_prob_from_logits
from tfktopic.evaluation.cross_entropy import row_bucket
from tfktopic.evaluation.perplexity import gather_real_positions, masked_token_nll
from tfktopic.layers.hoisted_lstm import run_lstm
from tfktopic.layers.initialization import (check_initialization, embedding_initializer,
                                            lstm_initializers)
from tfktopic.models.topicrnn.stopword_gate import VARIANTS, StopwordGate, check_lm_to_topic
from tfktopic.layers.topic_decoder import check_decoder_init, check_lda_scale, lda_logits
from tfktopic.layers.topic_encoders import BOW_NORMALIZATIONS, GaussianTopicEncoder
from tfktopic.models.topicrnn import presets as topicrnn_presets
from tfktopic.models.base import TopicLanguageModel
from tfktopic.models.decoding import GENERATION_METHODS, stacked_cell_step
from tfktopic.models.schedules import annealing_weight, check_steps, optimizer_step

__all__ = ["TopicRNN", "CELLS", "GENERATION_METHODS", "build_sentiment_classifier",
           "elbo_terms"]

CELLS = {"rnn": keras.layers.SimpleRNN, "lstm": keras.layers.LSTM, "gru": keras.layers.GRU}


def _positive_int(name, value):
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a positive int, got {value!r}") from None
    if number < 1 or number != value:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return number


def elbo_terms(gate, encoder, hidden, theta, mean, log_std, targets, mask, kl_weights,
               training):
    """TopicRNN's ELBO terms (eq. 5) over a batch of windows, as sums (nats).

    Written once for the sentence-level `TopicRNN` and the streamed
    `tfktopic.models.topicrnn.document.DocumentTopicRNN`. The output layer
    runs at the predicted positions only (`gather_real_positions`: the topic
    bias B^T theta of each window, computed once per window, is gathered to
    its positions), which skips the padding's softmaxes; padded positions add
    exactly 0 to every sum, so the terms are those of the full [B, T, C]
    outputs up to float rounding.

    Args:
        gate: the `StopwordGate`.
        encoder: the `GaussianTopicEncoder` (its `kl`).
        hidden: [..., T, H] RNN outputs.
        theta, mean, log_std: the topic sample and q's parameters, [..., K].
        targets, mask: [..., T] target ids and float mask.
        kl_weights: [...] share of its document's KL each window is charged.
        training: observed l_t only (True), or also the marginal over l_t.

    Returns:
        dict: ``token_nll`` (-sum log p(y_t | h_t, l_t, theta)), ``stop_nll``
        (-sum log p(l_t | h_t)), ``kl`` (sum of kl_weights * KL), ``num_tokens``
        and, when not training, ``marginal_nll`` (l_t marginalised).
    """
    real = gather_real_positions(mask, targets, per_position=(hidden,),
                                 per_row=(gate.topic_bias(theta),), bucket=row_bucket())
    stop = gate.stop_indicator(real.targets)
    outputs = gate(real.per_position[0], stop_indicator=stop, marginal=not training,
                   bias=real.per_row[0])
    token_nll, num_tokens = masked_token_nll(real.targets, outputs["logits"], real.mask)
    stop_log_prob = bernoulli_log_prob_from_logits(
        stop, ops.cast(outputs["stop_logits"], "float32"))
    kl = ops.cast(encoder.kl(mean, log_std), "float32")
    terms = {"token_nll": token_nll, "stop_nll": -ops.sum(stop_log_prob * real.mask),
             "kl": ops.sum(kl_weights * kl), "num_tokens": num_tokens}
    if not training:
        terms["marginal_nll"], _ = masked_token_nll(real.targets, outputs["log_probs"],
                                                    real.mask, from_logits=False)
    return terms


def generation_theta(posterior_mean, num_topics, num_content, num_sentences, topic=None,
                     context_bow=None, topic_strength=3.0):
    """theta of each generated sentence of a TopicRNN (§3, §B6): [N, K] float32.

    Args:
        posterior_mean: bow [n, V_c] -> the mean of q(theta | bow), [n, K].
        num_topics, num_content: K and V_c.
        num_sentences: N.
        topic: `None`, a topic index k (theta = topic_strength * e_k), a vector
            of K weights (theta = topic_strength * weights) or an array [N, K].
        context_bow: a bag of words [V_c] or [N, V_c]; theta = the mean of
            q(theta | context_bow). With neither, the mean of q for an empty context.
        topic_strength: length of theta along a chosen topic (theta ~ N(0, I)
            a priori, so 3 is three prior standard deviations).

    Raises:
        ValueError: both `topic` and `context_bow`, or a bad shape or index (named).
    """
    if topic is not None and context_bow is not None:
        raise ValueError("pass topic or context_bow, not both")
    if context_bow is not None:
        bow = np.asarray(context_bow, np.float32)
        if bow.ndim == 1:
            bow = bow[None]
        if bow.ndim != 2 or bow.shape[-1] != num_content:
            raise ValueError(f"context_bow must have {num_content} columns, got "
                             f"shape {bow.shape}")
        theta = np.asarray(posterior_mean(bow), np.float32)
    elif topic is None:
        theta = np.asarray(posterior_mean(np.zeros((1, num_content), np.float32)), np.float32)
    elif np.ndim(topic) == 0:
        if not (isinstance(topic, (int, np.integer)) and 0 <= topic < num_topics):
            raise ValueError(f"topic must be an int in [0, {num_topics}) or a vector "
                             f"of {num_topics} weights, got {topic!r}")
        theta = np.zeros((1, num_topics), np.float32)
        theta[0, int(topic)] = topic_strength
    else:
        weights = np.asarray(topic, np.float32)
        if weights.shape[-1] != num_topics or weights.ndim > 2:
            raise ValueError(f"topic must be an int in [0, {num_topics}) or a vector "
                             f"of {num_topics} weights, got shape {weights.shape}")
        theta = topic_strength * weights.reshape(-1, num_topics)
    if len(theta) not in (1, num_sentences):
        raise ValueError(f"got {len(theta)} topic vectors for num_sentences={num_sentences}")
    return np.broadcast_to(theta, (num_sentences, num_topics)).astype(np.float32)


def topic_layers(model, variant, bow_normalization, seed):
    """TopicRNN's inference network q(theta | X_c) (§3.1) and its stop-word gate with the
    topic bias B (eq. 3), as `TopicRNN` and `DocumentTopicRNN` build them.

    Args:
        model: the model (its ``num_topics``, ``encoder_units``, ``vocab_size``,
            ``lm_to_topic``, ``initialization`` and dtype policy).
        variant, bow_normalization, seed: the model's constructor arguments.

    Returns:
        (`GaussianTopicEncoder`, `StopwordGate`).
    """
    encoder = GaussianTopicEncoder(model.num_topics, model.encoder_units,
                                   normalization=bow_normalization, seed=seed,
                                   name="encoder", dtype="float32")  # KL
    gate = StopwordGate(model.vocab_size, model.lm_to_topic, model.num_topics,
                        variant=variant, initialization=model.initialization,
                        name="stopword_gate", dtype=model.dtype_policy)
    return encoder, gate


def start_topic_bias(model, topic_word_init):
    """``decoder_init="lda"``: B starts at ``lda_scale`` x the centred log topic-word matrix
    of an LDA (`lda_logits`); nothing without `topic_word_init`."""
    if topic_word_init is not None:
        model.gate.topic_word.assign(model.lda_scale * lda_logits(
            topic_word_init, model.num_topics, model.num_content))


@keras.saving.register_keras_serializable(package="tfktopic")
class TopicRNN(TopicLanguageModel):
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
        kl_warmup_steps: KL annealing: the KL term is weighted by
            min(1, step / kl_warmup_steps) over the first optimizer steps (0,
            the default and the paper: full weight from the start).
        decoder_init: "random" (glorot B, the default) or "lda": B starts at
            the centred log beta of an LDA (`topic_word_init`, which
            `tfktopic.runs.build_model` fits on the training split).
        topic_word_init: with ``decoder_init="lda"``, the [num_topics, V_c]
            topic-word matrix (rows on the simplex; saved with the weights,
            not the config).
        lda_scale: with ``decoder_init="lda"``, B starts at ``lda_scale`` x the
            centred log beta (1.0, the default: log beta itself). A row of
            centred log beta spans tens of nats between a topic's top and
            bottom words, and theta is Gaussian, not on the simplex; a smaller
            scale keeps each topic's ranking of the words with smaller logit
            offsets (softmax of a row: beta_k ** lda_scale, renormalised).
        initialization: of the language-model part (embedding, RNN, vocabulary
            softmax V): "keras" (the Keras layers' defaults), "torch" (PyTorch's,
            as Zheng et al.'s TRNN) or a dict of parts
            (`tfktopic.layers.initialization`); the inference network and the
            topic matrix B keep theirs.

    Example:
    >>> model = TopicRNN(len(lm_vocab), topic_vocab.lm_to_topic, num_topics=50,
    ...                  hidden_dim=100, cell="gru")                     # doctest: +SKIP
    >>> model.compile(optimizer="adam")                                  # doctest: +SKIP
    >>> model.fit(sentence_dataset(train_examples, document_targets=True),
    ...           epochs=15)                                             # doctest: +SKIP
    >>> evaluate_perplexity(model, sentence_dataset(test_preceding, shuffle=False),
    ...                     protocol="preceding")                        # doctest: +SKIP
    """

    has_topics = True
    saved_in_weights = ("decoder_init",)  # the LDA start of B is in its saved weights
    generates = True
    reported_terms = ("token_nll", "stop_nll", "kl")
    presets = topicrnn_presets.PRESETS

    def __init__(self, vocab_size, lm_to_topic, num_topics=50, hidden_dim=200, embedding_dim=None,
                 cell="lstm", num_layers=1, encoder_units=(200, 200), variant="paper", dropout=0.0,
                 embeddings=None, bow_normalization="total", tokens_per_document=None, seed=None,
                 kl_warmup_steps=0, decoder_init="random", topic_word_init=None, lda_scale=1.0,
                 initialization="keras", **kwargs):
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
        self.kl_warmup_steps = check_steps("kl_warmup_steps", kl_warmup_steps)
        self.decoder_init = check_decoder_init(decoder_init, topic_word_init)
        self.lda_scale = check_lda_scale(lda_scale)
        self.initialization = check_initialization(initialization)
        self.num_content = int((self.lm_to_topic >= 0).sum())
        #: V_c, the width of ``context_bow`` (the name every topic model shares).
        self.topic_vocab_size = self.num_content

        self.embedding = keras.layers.Embedding(
            self.vocab_size, self.embedding_dim,
            weights=None if embeddings is None else [embeddings], name="embedding",
            embeddings_initializer=embedding_initializer(self.initialization),
            dtype=self.dtype_policy)
        self.rnns = [CELLS[cell](self.hidden_dim, return_sequences=True, name=f"{cell}_{i}",
                                 dtype=self.dtype_policy,
                                 **lstm_initializers(self.initialization, self.hidden_dim, cell))
                     for i in range(self.num_layers)]
        self.dropouts = [keras.layers.Dropout(self.dropout, seed=None if seed is None else seed + i,
                                              dtype=self.dtype_policy)
                         for i in range(self.num_layers + 1)]
        self.encoder, self.gate = topic_layers(self, variant, bow_normalization, seed)
        self.build()
        start_topic_bias(self, topic_word_init)

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
            x = dropout(run_lstm(rnn, x, training=training, mask=mask), training=training)
        if chunked:
            x = ops.reshape(x, (shape[0], shape[1], shape[2], self.hidden_dim))
        return x

    def topic_posterior(self, context_bow, training=False):
        """q(theta | X_c): (theta, mean, log_std), theta sampled when training."""
        return self.encoder(self._check_bow_width(context_bow, self.num_content),
                            training=training)

    def topic_proportions(self, bow):
        """theta at the mean of q(theta | X_c), float [B, K] (an unconstrained
        Gaussian vector: TopicRNN's theta is not on the simplex)."""
        return self.topic_posterior(bow, training=False)[1]

    def call(self, inputs, training=False):
        """Marginal log-probabilities log p(y_t | y_<t, theta) [..., T, C] (§3, eq. of §B6).

        theta is the mean of q (a sample when training) of ``context_bow``.
        """
        hidden = self.hidden_states(inputs["tokens"], training=training)
        theta, _, _ = self.topic_posterior(inputs["context_bow"], training=training)
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
            (-sum log p(y_t | h_t, theta) with l_t marginalised); and the
            `TopicLanguageModel` contract: ``loss`` = (token_nll + stop_nll +
            kl) / num_tokens, the negative ELBO per token, ``units`` =
            num_tokens, ``nll_sum`` (training: the joint token_nll + stop_nll,
            for "disjoint" the marginal, for "paper" an upper bound of it;
            evaluation: marginal_nll, what `evaluate_perplexity` computes) and
            ``report`` (token_nll, stop_nll and kl per token).
        """
        targets, mask = data["targets"], ops.cast(data["mask"], "float32")
        hidden = self.hidden_states(data["tokens"], training=training)
        theta, mean, log_std = self.topic_posterior(data["context_bow"], training=training)
        kl_weights = self._kl_weights(data, ops.sum(mask, axis=-1))
        terms = elbo_terms(self.gate, self.encoder, hidden, theta, mean, log_std, targets, mask,
                           kl_weights, training)
        token_nll, stop_nll, kl_charged = terms["token_nll"], terms["stop_nll"], terms["kl"]
        num_tokens = terms["num_tokens"]
        terms["units"] = num_tokens
        terms["nll_sum"] = terms["marginal_nll"] if not training else token_nll + stop_nll
        per_token = lambda value: value / ops.maximum(num_tokens, 1.0)
        if training and self.kl_warmup_steps:
            kl_charged = annealing_weight(optimizer_step(self), self.kl_warmup_steps) * kl_charged
        terms["loss"] = per_token(token_nll + stop_nll + kl_charged)
        terms["report"] = {name: (per_token(terms[name]), num_tokens)
                           for name in self.reported_terms}
        return terms

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
        _, mean, _ = self.topic_posterior(inputs["context_bow"], training=False)
        return np.asarray(ops.concatenate([ops.cast(mean, "float32"),
                                           ops.cast(h_last, "float32")], axis=-1))

    # ------------------------------------------------------------------ topics
    def topic_word_matrix(self):
        """B [K, V_c], the topic-word weights of the stop-word gate (Table 1's topics
        are the top words of its rows)."""
        return np.asarray(self.gate.topic_word)

    # -------------------------------------------------------------- generation
    def generation_conditioning(self, num_sentences, topic=None, context_bow=None, seed=None,
                                topic_strength=3.0):
        """theta of each sentence for `generate` (the marginal predictive, §3, §B6).

        Args:
            num_sentences: N.
            topic: `None`, a topic index k (theta = topic_strength * e_k), a
                vector of K weights (theta = topic_strength * weights) or an
                array [N, K].
            context_bow: a bag of words [V_c] or [N, V_c]; theta = mean of
                q(theta | context_bow). With neither, theta = the mean of q for
                an empty context.
            seed: unused (theta is deterministic).
            topic_strength: length of theta along a chosen topic (theta ~ N(0, I)
                a priori, so 3 is three prior standard deviations).

        Returns:
            float32 [N, K] tensor.
        """
        posterior_mean = lambda bow: self.topic_posterior(bow, training=False)[1]
        return ops.convert_to_tensor(generation_theta(posterior_mean, self.num_topics, self.num_content,
                                            num_sentences, topic, context_bow,
                                            float(topic_strength)))

    def initial_generation_state(self, num_sentences):
        return [[ops.convert_to_tensor(s) for s in rnn.cell.get_initial_state(num_sentences)]
                for rnn in self.rnns]

    def generation_step(self, token, state, conditioning):
        """The marginal over l_t of the next token given the previous one and theta."""
        x, new_state = stacked_cell_step([rnn.cell for rnn in self.rnns],
                                         self.embedding(token), state)
        return self.gate(x[:, None, :], conditioning)["log_probs"][:, 0], new_state

    def get_config(self):
        return {**super().get_config(), "vocab_size": self.vocab_size,
                "lm_to_topic": self.lm_to_topic.tolist(), "num_topics": self.num_topics,
                "hidden_dim": self.hidden_dim, "embedding_dim": self.embedding_dim,
                "cell": self.cell, "num_layers": self.num_layers,
                "encoder_units": list(self.encoder_units), "variant": self.variant,
                "dropout": self.dropout, "bow_normalization": self.bow_normalization,
                "tokens_per_document": self.tokens_per_document, "seed": self.seed,
                "kl_warmup_steps": self.kl_warmup_steps, "decoder_init": self.decoder_init,
                "lda_scale": self.lda_scale, "initialization": self.initialization}


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
