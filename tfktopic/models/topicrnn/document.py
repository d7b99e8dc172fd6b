"""The streamed document-level TopicRNN (Dieng et al. 2017 on Zheng et al.'s streams).

The topic component measured on top of the strong baseline, as Zheng, Vafa &
Blei (TMLR 2023; ``carolinazheng/revisiting-tglms``, ``models/trnn.py``) do:
the streamed document LSTM of `tfktopic.models.lstm.document_lstm` (one token
stream per document, truncated BPTT of 30 targets, the LSTM state carried
across a document's windows and zeroed at its first) with TopicRNN's output
layer (Dieng, Wang, Gao & Paisley, ICLR 2017, §3):

    theta ~ N(0, I_K);  q(theta | X_c) = N(mu, diag sigma^2)  (GaussianTopicEncoder)
    l_t ~ Bernoulli(sigmoid(Gamma^T h_t))                     (StopwordGate)
    p(y_t | h_t, theta, l_t) ∝ exp(V h_t + (1 - l_t) B^T theta)

with X_c the window's ``context_bow`` from `tfktopic.data.streams`:

* evaluation: ``context="preceding"`` -- the topic words of the document's
  text before the window (its earlier windows' targets), never the window or
  anything after it; theta = mean of q and l_t marginalised, so ``call``
  returns normalised log-probabilities. Zheng et al. evaluate with the
  same kind of context (``cum_bows``: the earlier windows' *input* tokens, one
  token less than here);
* training: Zheng et al. use the whole document's bag of words (``all_bows``,
  which contains the predicted words); the project's sentence-level models
  train on ``"all_other"`` (every other window), the recommended training
  context of `tfktopic.data.streams.stream_examples` for this model; ``"whole_document"``
  reproduces Zheng et al.

The ELBO per token (as `tfktopic.models.topicrnn.model.TopicRNN`, with the KL of
q charged once per document: a window with n of its document's N targets
carries (n / N) KL, N = the batch's ``doc_targets``):

    [sum_t (NLL_t + BCE_t) + sum_windows (n_w / N_w) KL_w] / #targets
"""

import keras
import numpy as np
from keras import ops

from tfktopic.layers.carried_state_lstm import CarriedStateLSTM
from tfktopic.layers.initialization import check_initialization, embedding_initializer
from tfktopic.layers.topic_decoder import check_decoder_init, check_lda_scale
from tfktopic.layers.topic_encoders import BOW_NORMALIZATIONS
from tfktopic.models.topicrnn.stopword_gate import VARIANTS, check_lm_to_topic
from tfktopic.models.topicrnn import presets as topicrnn_presets
from tfktopic.models.base import TopicLanguageModel
from tfktopic.models.decoding import stacked_cell_step
from tfktopic.models.lstm.document_lstm import stream_inputs
from tfktopic.models.topicrnn.model import (elbo_terms, generation_theta, start_topic_bias,
                                            topic_layers)

__all__ = ["DocumentTopicRNN"]


@keras.saving.register_keras_serializable(package="tfktopic")
class DocumentTopicRNN(TopicLanguageModel):
    """TopicLSTM over parallel document streams with a carried LSTM state.

    Args:
        vocab_size: C, the LM vocabulary size.
        lm_to_topic: `TopicVocabulary.lm_to_topic` (-1 for stop words).
        num_topics: K.
        hidden_dim: LSTM units per layer.
        embedding_dim: word embedding size (`None`: `hidden_dim`).
        num_layers: stacked LSTM layers.
        encoder_units: ReLU layers of the inference network.
        variant: "paper" or "disjoint" (see `StopwordGate`; Zheng et al.'s is
            "disjoint").
        dropout: dropout on the embeddings, between layers and before the
            output.
        bow_normalization: scaling of X_c before the inference network.
        max_streams: the most parallel streams of a batch.
        seed: seed of the reparameterisation noise.
        embeddings: optional ``[vocab_size, embedding_dim]`` initial matrix.
        initialization: of the language-model part (embedding, LSTM, vocabulary
            softmax): "keras" (the Keras layers' defaults) or "torch" (Zheng et
            al.'s; `tfktopic.layers.initialization`); the inference network and
            the topic matrix keep theirs.
        decoder_init, topic_word_init, lda_scale: the start of B, as `TopicRNN`'s
            (``"lda"``: ``lda_scale`` x the centred log topic-word matrix of an LDA of
            the training split, which `tfktopic.runs` fits).

    Example:
    >>> streams = document_streams(train, lm_vocab, topic_vocab)          # doctest: +SKIP
    >>> model = DocumentTopicRNN(len(lm_vocab), topic_vocab.lm_to_topic, num_topics=50,
    ...                          hidden_dim=128, max_streams=32)          # doctest: +SKIP
    >>> model.compile(optimizer="adam")                                   # doctest: +SKIP
    >>> model.fit(document_stream_dataset(streams, 32, shuffle=True, context="all_other"),
    ...           epochs=5, steps_per_epoch=steps_per_epoch(streams, 32))  # doctest: +SKIP
    """

    has_topics = True
    saved_in_weights = ("decoder_init",)  # the LDA start of B is in its saved weights
    #: Inputs are parallel document streams with a ``reset`` flag (`tfktopic.data.streams`).
    streamed = True
    generates = True
    reported_terms = ("token_nll", "stop_nll", "kl")
    presets = topicrnn_presets.STREAMED_PRESETS

    def __init__(self, vocab_size, lm_to_topic, num_topics=50, hidden_dim=200, embedding_dim=None,
                 num_layers=1, encoder_units=(200, 200), variant="paper", dropout=0.0,
                 bow_normalization="total", max_streams=64, seed=None, embeddings=None,
                 initialization="keras", decoder_init="random", topic_word_init=None,
                 lda_scale=1.0, **kwargs):
        super().__init__(**kwargs)
        for name, value in (("vocab_size", vocab_size), ("num_topics", num_topics),
                            ("hidden_dim", hidden_dim)):
            if int(value) < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        if variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
        if bow_normalization not in BOW_NORMALIZATIONS:
            raise ValueError(f"bow_normalization must be one of {BOW_NORMALIZATIONS}, "
                             f"got {bow_normalization!r}")
        self.vocab_size = int(vocab_size)
        self.lm_to_topic = check_lm_to_topic(lm_to_topic, self.vocab_size)
        self.num_topics = int(num_topics)
        self.hidden_dim = int(hidden_dim)
        self.embedding_dim = self.hidden_dim if embedding_dim is None else int(embedding_dim)
        self.num_layers = int(num_layers)
        self.encoder_units = tuple(int(u) for u in encoder_units)
        self.variant = variant
        self.dropout = float(dropout)
        self.bow_normalization = bow_normalization
        self.max_streams = int(max_streams)
        self.seed = seed
        self.initialization = check_initialization(initialization)
        self.decoder_init = check_decoder_init(decoder_init, topic_word_init)
        self.lda_scale = check_lda_scale(lda_scale)
        self.num_content = int((self.lm_to_topic >= 0).sum())
        self.topic_vocab_size = self.num_content  # V_c, as every topic model
        self.embedding = keras.layers.Embedding(
            self.vocab_size, self.embedding_dim,
            embeddings_initializer=embedding_initializer(self.initialization),
            weights=None if embeddings is None else [np.asarray(embeddings, np.float32)],
            name="embedding", dtype=self.dtype_policy)
        self.embedding_dropout = keras.layers.Dropout(self.dropout, seed=seed,
                                                      dtype=self.dtype_policy)
        self.rnn = CarriedStateLSTM(self.hidden_dim, self.num_layers, self.max_streams,
                                    dropout=self.dropout, initialization=self.initialization,
                                    name="carried_lstm", dtype=self.dtype_policy)
        self.encoder, self.gate = topic_layers(self, variant, bow_normalization, seed)
        self.build()
        start_topic_bias(self, topic_word_init)

    def build(self, input_shape=None):
        """Create every weight (shapes follow from the constructor arguments)."""
        if self.built:
            return
        self.embedding.build((None, None))
        self.rnn.build((None, None, self.embedding_dim))
        self.encoder.build((None, self.num_content))
        self.gate.build((None, None, self.hidden_dim), (None, self.num_topics))
        self.built = True

    # ----------------------------------------------------------------- forward
    def hidden_states(self, inputs, training=False, carry=True):
        """Top-layer LSTM states h_t [B, T, H] of one window (state carried, reset per row;
        ``carry=False``: from a zero state, the carried state untouched)."""
        tokens, reset = stream_inputs(inputs)
        x = self.embedding_dropout(self.embedding(tokens), training=training)
        return self.rnn(x, reset, training=training, carry=carry)

    def infer_topics(self, context_bow, training=False):
        """q(theta | X_c): (theta, mean, log_std); theta sampled when training."""
        context_bow = ops.convert_to_tensor(context_bow, "float32")
        width = context_bow.shape[-1]
        if width is not None and width != self.num_content:
            raise ValueError(f"context_bow has {width} columns but the topic vocabulary of "
                             f"lm_to_topic has {self.num_content} words")
        return self.encoder(context_bow, training=training)

    def call(self, inputs, training=False, carry=True):
        """Marginal log-probabilities log p(y_t | y_<t, theta) [B, T, C] (§3, l_t marginalised)."""
        hidden = self.hidden_states(inputs, training=training, carry=carry)
        theta, _, _ = self.infer_topics(inputs["context_bow"], training=training)
        return self.gate(hidden, theta)["log_probs"]

    # --------------------------------------------------------------- objective
    def objective(self, data, training=False):
        """The ELBO's terms over a batch of windows, as sums (nats).

        Returns:
            dict of float32 scalars ``token_nll``, ``stop_nll``, ``kl`` (sum of
            (n_w / N_w) KL_w), ``num_tokens`` and, when not training,
            ``marginal_nll`` (l_t marginalised, theta = mean of q); and the
            `TopicLanguageModel` contract: ``loss`` = (token_nll + stop_nll +
            kl) / num_tokens (the negative ELBO per token), ``units`` =
            num_tokens, ``nll_sum`` (training: the joint token_nll + stop_nll;
            evaluation: marginal_nll) and ``report``.
        """
        targets, mask = data["targets"], ops.cast(data["mask"], "float32")
        hidden = self.hidden_states(data, training=training)
        theta, mean, log_std = self.infer_topics(data["context_bow"], training=training)
        share = ops.sum(mask, axis=-1) / ops.maximum(ops.cast(data["doc_targets"], "float32"), 1.0)
        terms = elbo_terms(self.gate, self.encoder, hidden, theta, mean, log_std, targets, mask,
                           share, training)
        num_tokens = terms["num_tokens"]
        per_token = lambda value: value / ops.maximum(num_tokens, 1.0)
        terms["units"] = num_tokens
        terms["nll_sum"] = (terms["token_nll"] + terms["stop_nll"] if training
                            else terms["marginal_nll"])
        terms["loss"] = per_token(terms["token_nll"] + terms["stop_nll"] + terms["kl"])
        terms["report"] = {name: (per_token(terms[name]), num_tokens)
                           for name in self.reported_terms}
        return terms

    def reset_states(self):
        """Zero the carried LSTM states (training and evaluation)."""
        self.rnn.reset_states()

    def topic_word_matrix(self):
        """B [K, V_c], the topic-word weights of the stop-word gate."""
        return np.asarray(self.gate.topic_word)

    def topic_proportions(self, bow):
        """theta at the mean of q(theta | X_c), float [B, K]."""
        return self.infer_topics(self._check_bow_width(bow, self.num_content), training=False)[1]

    # -------------------------------------------------------------- generation
    def generation_conditioning(self, num_sentences, topic=None, context_bow=None, seed=None,
                                topic_strength=3.0):
        """theta of each sentence for `generate`, as `TopicRNN.generation_conditioning`
        (a document's first sentence: the LSTM starts from a zero state at ``<bos>``).

        Args:
            num_sentences: N.
            topic: `None`, a topic index k (theta = topic_strength * e_k), a vector of K
                weights or an array [N, K].
            context_bow: a bag of words [V_c] or [N, V_c] (theta = the mean of q).
            seed: unused (theta is deterministic).
            topic_strength: length of theta along a chosen topic.

        Returns:
            float32 [N, K] tensor.
        """
        posterior_mean = lambda bow: self.infer_topics(bow, training=False)[1]
        return ops.convert_to_tensor(generation_theta(posterior_mean, self.num_topics, self.num_content,
                                            num_sentences, topic, context_bow,
                                            float(topic_strength)))

    def initial_generation_state(self, num_sentences):
        """A zero state per LSTM layer (the carried states are not touched)."""
        return [[ops.convert_to_tensor(s) for s in lstm.cell.get_initial_state(num_sentences)]
                for lstm in self.rnn.lstms]

    def generation_step(self, token, state, conditioning):
        """The marginal over l_t of the next token given the previous one and theta."""
        x, new_state = stacked_cell_step([lstm.cell for lstm in self.rnn.lstms],
                                         self.embedding(token), state)
        return self.gate(x[:, None, :], conditioning)["log_probs"][:, 0], new_state

    def get_config(self):
        return {**super().get_config(), "vocab_size": self.vocab_size,
                "lm_to_topic": self.lm_to_topic.tolist(), "num_topics": self.num_topics,
                "hidden_dim": self.hidden_dim, "embedding_dim": self.embedding_dim,
                "num_layers": self.num_layers, "encoder_units": list(self.encoder_units),
                "variant": self.variant, "dropout": self.dropout,
                "bow_normalization": self.bow_normalization, "max_streams": self.max_streams,
                "seed": self.seed, "initialization": self.initialization,
                "decoder_init": self.decoder_init, "lda_scale": self.lda_scale}
