"""rGBN-RNN and GBN-RNN (Guo, Chen, Lu, Zhou, ICML 2020).

A recurrent gamma belief network (rGBN) over the J sentences of a document
chunk guides a stacked LSTM language model:

* **Topic model** (eqs. 1-2; reference rgbn_rnn.md §1.1): global Phi^l
  (word/topic loadings) and Pi^l (topic transitions) with columns on the
  simplex, and per sentence a gamma chain theta^l_j over layers and sentences
  (`tfktopic.models.rgbn.prior`). GBN-RNN (``recurrent=False``) drops every Pi
  term. Phi and Pi are sampled by TLASGR-MCMC
  (`tfktopic.bayes.tlasgr.TLASGRTopics`) inside `train_step`.
* **Inference** (eq. 9): `RecurrentWeibullEncoder`, q(theta^l_j) Weibull.
* **Language model** (eq. 4; reference §3): `TopicGatedLSTMStack` -- per layer a
  fused LSTM whose outputs are coupled with theta^l_j / max_k theta^l_{jk} by
  the GRU-like gate; the concatenated gate outputs of all layers feed one
  softmax.
* **Objective** (eq. 7; `tfktopic.models.rgbn.objective`), per document chunk:
  lm_nll + tm_weight * (-log p(d | Phi^1 theta^1) + sum_l kl_weights[l] * KL^l),
  KL^l = KL(Weibull(k, lambda) || Gam(tau0 e^l_j, tau0)) in closed form.

Model contract (DESIGN.md §3): batches of `tfktopic.data.pipeline.document_dataset`
(``tokens``/``targets``/``mask`` [B, J, T], ``context_bow`` [B, J, V_c]);
`call` returns next-token logits [B, J, T, V] (theta at its Weibull mean), so
`tfktopic.evaluation.evaluate_perplexity` works unchanged; `fit` / `evaluate`
report ``loss``, ``nll``, ``ppl``, ``kl`` and ``tm_nll``. `train_step` /
`test_step` apply the softmax only at the real (mask > 0) tokens: the softmax
over the concatenated sum_l H_l gate outputs is most of a step's cost.

Evaluation protocol: build validation/test sequences with
``document_sequences(..., protocol="preceding")`` (context of sentence j = the
preceding sentences of the document; leak-free, the paper's S_{<j} for
rGBN-RNN). The papers' GBN-RNN numbers use ``protocol="all_other"``, which lets
future text in; label such numbers.

Topic quality: the paper's TLASGR steps (eps_0 = 1) keep Phi below LDA's topics;
preset ``coherent`` (LDA start of Phi^1 + eps_0 = 0.02) reaches LDA's NPMI at no
perplexity cost (measured: docs/results/study.md, "rGBN-RNN topic quality").
"""

import math
import warnings

import keras
import numpy as np
from keras import ops

from tfktopic import backend
from tfktopic.bayes.tlasgr import TLASGRTopics
from tfktopic.evaluation.perplexity import PerplexityResult, masked_token_nll
from tfktopic.layers.initialization import (check_initialization, embedding_initializer,
                                            softmax_initializers)
from tfktopic.layers.topic_decoder import check_decoder_init
from tfktopic.models.rgbn.topic_gated_lstm import GATE_ORIENTATIONS, TopicGatedLSTMStack
from tfktopic.models.base import TopicLanguageModel
from tfktopic.models.rgbn.encoder import RecurrentWeibullEncoder
from tfktopic.models.rgbn.generation import conditioning_thetas, normalize_theta
from tfktopic.models.rgbn.presets import (PAPER_HIDDEN_SIZES, PAPER_TOPIC_SIZES, PRESETS,
                                          cut_layers)
from tfktopic.models.rgbn.objective import negative_elbo

__all__ = ["RGBNRNN"]

@keras.saving.register_keras_serializable(package="tfktopic")
class RGBNRNN(TopicLanguageModel):
    """rGBN-RNN (``recurrent=True``) or GBN-RNN (``recurrent=False``).

    Args:
        vocab_size: LM vocabulary size V (softmax width).
        topic_vocab_size: topic vocabulary size V_c (BoW width).
        num_documents: training document chunks (the TLASGR mini-batch
            scaling: counts are scaled by num_documents / batch size).
        num_layers: L, 1 to 3 with the paper's sizes, or any L with explicit
            `hidden_sizes` and `topic_sizes`.
        recurrent: rGBN (topic transitions Pi, eq. 2) or GBN (no Pi).
        hidden_sizes: LSTM widths per layer; `None`: the paper's 600 / 600-512
            / 600-512-256.
        topic_sizes: K_l per layer; `None`: the paper's 100 / 100-80 / 100-80-50.
        encoder_units: hidden widths of the inference network; `None` = K_l.
        embedding_dim: word embedding size (300 = word2vec).
        encoder_recurrent: sentence-level recurrence in the encoder (eq. 9)
            or not (the released joint code).
        scalar_k: one Weibull shape per (document, sentence, layer) (code)
            instead of one per topic (paper).
        k_range: clip of the Weibull shape k.
        dropout: on the word embeddings and on every gate output (0.4).
        locked_dropout: share the gate-output dropout mask over time steps.
        gate_orientation: "paper" (eq. 4) or "code" (z and 1 - z swapped).
        gate_bias_init: initial (b_z, b_r, b_h); `None` = the code's start.
        tm_weight: weight of the topic-model part of the loss (paper 1,
            code 0.001).
        kl_weights: per-layer KL weights (paper 1, code 0.1/0.01/0.001).
        tau0: gamma rate of the rGBN priors (1).
        embeddings: optional [vocab_size, embedding_dim] matrix (word2vec,
            `tfktopic.data.embeddings.embedding_matrix`); saved with the
            weights, not in the config.
        tlasgr: dict of extra keyword arguments for `TLASGRTopics`
            (schedule, priors, preconditioner floor, a separate MCMC ``seed``).
        seed: seed of initializers, dropout, Weibull noise and the MCMC.
        decoder_init: "random" (the paper's U(0, 1) Phi^1) or "lda": Phi^1
            starts at `topic_word_init` (preset ``coherent``).
        topic_word_init: with "lda", an LDA's [K_1, topic_vocab_size] topic-word
            matrix (`tfktopic.runs.build_model` fits it); saved in Phi only.
        initialization: of the language-model part: "keras" (the default: Keras'
            embedding, LSTMs and softmax), "torch" (PyTorch's convention, as Zheng
            et al.'s recipe: embedding and softmax U(±0.1), the LSTMs' weights and
            biases U(±1/sqrt(H)) without a forget-gate offset) or a dict of parts
            (`tfktopic.layers.initialization`); the topic gates keep the released
            code's U(±0.05), the encoder and the topics theirs.

    Example:
    >>> model = RGBNRNN(len(lm_vocab), len(topic_vocab), num_documents=len(train_seqs),
    ...                 num_layers=3)                                  # doctest: +SKIP
    >>> model.compile(optimizer=adam_optimizer(PRESETS["paper"]["training"]))  # doctest: +SKIP
    >>> model.fit(document_dataset(train_seqs, batch_size=8), epochs=5)  # doctest: +SKIP
    >>> model.evaluate(document_dataset(test_seqs, shuffle=False))     # doctest: +SKIP
    """

    has_topics = True
    simplex_topics = True
    saved_in_weights = ("decoder_init",)  # the LDA start of Phi^1 is in the saved Phi
    chunked = True
    hierarchical = True
    generates = True
    reported_terms = ("kl", "tm_nll")
    presets = PRESETS

    def __init__(self, vocab_size, topic_vocab_size, num_documents, num_layers=3, recurrent=True,
                 hidden_sizes=None, topic_sizes=None, encoder_units=None, embedding_dim=300,
                 encoder_recurrent=True, scalar_k=False, k_range=(0.1, 100.0), dropout=0.4,
                 locked_dropout=False, gate_orientation="paper", gate_bias_init=None,
                 tm_weight=1.0, kl_weights=None, tau0=1.0, embeddings=None, tlasgr=None,
                 seed=None, decoder_init="random", topic_word_init=None, initialization="keras",
                 **kwargs):
        super().__init__(**kwargs)
        self.initialization = check_initialization(initialization)
        for name, value in (("vocab_size", vocab_size), ("topic_vocab_size", topic_vocab_size),
                            ("num_documents", num_documents), ("num_layers", num_layers),
                            ("embedding_dim", embedding_dim)):
            if value is None or int(value) < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        num_layers = int(num_layers)
        if hidden_sizes is None:
            if num_layers not in PAPER_HIDDEN_SIZES:
                raise ValueError(f"num_layers={num_layers} has no paper sizes (1-3): "
                                 f"give hidden_sizes and topic_sizes")
            hidden_sizes = PAPER_HIDDEN_SIZES[num_layers]
        if topic_sizes is None:
            if num_layers not in PAPER_TOPIC_SIZES:
                raise ValueError(f"num_layers={num_layers} has no paper sizes (1-3): "
                                 f"give hidden_sizes and topic_sizes")
            topic_sizes = PAPER_TOPIC_SIZES[num_layers]
        self.hidden_sizes = tuple(int(h) for h in hidden_sizes)
        self.topic_sizes = tuple(int(k) for k in topic_sizes)
        if len(self.hidden_sizes) != num_layers or min(self.hidden_sizes) < 1:
            raise ValueError(f"hidden_sizes must give {num_layers} positive sizes "
                             f"(num_layers={num_layers}), got {hidden_sizes}")
        if len(self.topic_sizes) != num_layers or min(self.topic_sizes) < 1:
            raise ValueError(f"topic_sizes must give {num_layers} positive sizes "
                             f"(num_layers={num_layers}), got {topic_sizes}")
        kl_weights = (1.0,) * num_layers if kl_weights is None else tuple(
            float(w) for w in kl_weights)
        if len(kl_weights) != num_layers or min(kl_weights) < 0:
            raise ValueError(f"kl_weights must give {num_layers} non-negative weights, "
                             f"got {kl_weights}")
        if not float(tm_weight) >= 0:
            raise ValueError(f"tm_weight must be >= 0, got {tm_weight}")
        if not float(tau0) > 0:
            raise ValueError(f"tau0 must be > 0, got {tau0}")
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        if gate_orientation not in GATE_ORIENTATIONS:
            raise ValueError(f"gate_orientation must be one of {GATE_ORIENTATIONS}, "
                             f"got {gate_orientation!r}")
        if embeddings is not None and tuple(np.shape(embeddings)) != (int(vocab_size),
                                                                     int(embedding_dim)):
            raise ValueError(f"embeddings must have shape (vocab_size, embedding_dim) = "
                             f"({vocab_size}, {embedding_dim}), got {np.shape(embeddings)}")
        self.vocab_size = int(vocab_size)
        self.topic_vocab_size = int(topic_vocab_size)
        self.num_documents = int(num_documents)
        self.num_layers = num_layers
        self.recurrent = bool(recurrent)
        self.encoder_units = None if encoder_units is None else tuple(int(u) for u in encoder_units)
        self.embedding_dim = int(embedding_dim)
        self.encoder_recurrent = bool(encoder_recurrent)
        self.scalar_k = bool(scalar_k)
        self.k_range = tuple(float(v) for v in k_range)
        self.dropout = float(dropout)
        self.locked_dropout = bool(locked_dropout)
        self.gate_orientation = gate_orientation
        self.gate_bias_init = None if gate_bias_init is None else tuple(
            float(b) for b in gate_bias_init)
        self.tm_weight = float(tm_weight)
        self.kl_weights = kl_weights
        self.tau0 = float(tau0)
        tlasgr = dict(tlasgr or {})
        for key, argument in (("tau0", "tau0"), ("phi_init", "topic_word_init")):
            if key in tlasgr:
                raise ValueError(f"tlasgr: pass {key} as the model's own {argument} argument")
        self.decoder_init = check_decoder_init(decoder_init, topic_word_init)
        self.seed = seed

        self.encoder = RecurrentWeibullEncoder(
            self.topic_sizes, hidden_units=self.encoder_units, recurrent=self.encoder_recurrent,
            scalar_k=self.scalar_k, k_range=self.k_range, seed=seed, name="encoder",
            dtype="float32")  # Weibull special functions and KLs stay float32 (any policy)
        mcmc_seed = tlasgr.pop("seed", seed)
        self.topic_model = TLASGRTopics(self.topic_vocab_size, self.topic_sizes,
                                        self.num_documents, recurrent=self.recurrent,
                                        seed=mcmc_seed, tau0=self.tau0, name="topic_model",
                                        phi_init=topic_word_init, dtype="float32",
                                        **tlasgr)  # counts, Phi, Pi
        # The MCMC seed actually used (drawn when seed is None) goes into the
        # config, so a reloaded model continues the same MCMC stream.
        self.tlasgr = {**tlasgr, "seed": self.topic_model.seed}
        self.embedding = keras.layers.Embedding(
            self.vocab_size, self.embedding_dim, name="embedding",
            weights=None if embeddings is None else [np.asarray(embeddings, np.float32)],
            embeddings_initializer=embedding_initializer(self.initialization),
            dtype=self.dtype_policy)
        # Its own stream: a seed shared with a gate-output dropout of the same
        # width would repeat that layer's masks (the TF1 artefact of §3.5).
        self.embedding_dropout = keras.layers.Dropout(
            self.dropout, seed=None if seed is None else seed + 7919, dtype=self.dtype_policy)
        self.stack = TopicGatedLSTMStack(
            self.hidden_sizes, self.topic_sizes, dropout=self.dropout,
            locked_dropout=self.locked_dropout, orientation=self.gate_orientation,
            bias_init=self.gate_bias_init, seed=seed, initialization=self.initialization,
            name="stack", dtype=self.dtype_policy)
        self.softmax = keras.layers.Dense(
            self.vocab_size, name="softmax", dtype=self.dtype_policy,
            **softmax_initializers(self.initialization, sum(self.hidden_sizes)))
        # TensorFlow's TLASGR kernels expand counts to ragged (dynamic) shapes, which XLA
        # cannot compile, so `compile(jit_compile="auto")` stays off there (GPU too). Under
        # JAX the augmentation is the static-shape reference (while loops over the
        # occurrence index): the whole step compiles (measured: 5.4 s -> 6 ms a step).
        self.supports_jit = not backend.is_tensorflow()
        # All weights exist from the start (no shape is data dependent), so
        # `compile` can build the optimizer: variables created while `fit`
        # traces its first step would make TensorFlow trace it twice.
        self.build()

    # ------------------------------------------------------------------ model
    def build(self, input_shape=None):
        """Create every weight; none depends on B, J or T."""
        bow_shape = (None, None, self.topic_vocab_size)
        sublayers = ((self.encoder, bow_shape), (self.topic_model, bow_shape),
                     (self.embedding, (None, None)),
                     (self.stack, (None, None, self.embedding_dim)),
                     (self.softmax, (None, None, sum(self.hidden_sizes))))
        for layer, shape in sublayers:
            if not layer.built:
                layer.build(shape)
        self.built = True

    @property
    def phis(self):
        """The Phi^l variables (bottom first), owned by `topic_model`."""
        return list(self.topic_model.phi)

    @property
    def pis(self):
        """The Pi^l variables (empty for GBN-RNN), owned by `topic_model`."""
        return list(self.topic_model.pi) if self.recurrent else []

    def _softmax_inputs(self, tokens, normalized_thetas, training):
        """The softmax input [N, T, sum_l H_l] of N sentences given their
        normalised thetas [N, K_l]: the concatenated gate outputs."""
        x = self.embedding_dropout(self.embedding(tokens), training=training)
        gated = self.stack(x, normalized_thetas, training=training)
        return ops.concatenate(gated, axis=-1) if len(gated) > 1 else gated[0]

    def call(self, inputs, training=False, sample=None, return_topics=False,
             return_features=False):
        """Next-token logits of every sentence of every document chunk.

        Args:
            inputs: a batch dict with ``tokens`` [B, J, T] and ``context_bow``
                [B, J, V_c].
            training: dropout and Weibull sampling.
            sample: override for theta only: True samples, False uses the
                Weibull mean (e.g. sampled evaluation without dropout).
            return_topics: also return the encoder's outputs.
            return_features: with `return_topics`, return the softmax input
                ``features`` [N, T, sum_l H_l] of the N sentence windows that
                hold a target (``mask`` > 0 somewhere; all B J windows when the
                batch has no ``mask``) and their flat indices ``windows``
                [N, 1] into the B J windows, instead of the logits. The
                training objective applies the softmax at the real tokens only,
                and the empty windows that pad a document's last chunk (~13%
                of the windows on APNEWS) skip the LSTM stack altogether.

        Returns:
            logits [B, J, T, V]; with `return_topics` a dict of ``logits`` (or
            ``features`` and ``windows``) and lists over layers of ``thetas`` /
            ``ks`` / ``lams`` [B, J, K_l].
        """
        tokens = ops.cast(inputs["tokens"], "int32")
        shape = ops.shape(tokens)
        thetas, ks, lams = self.encoder(inputs["context_bow"], training=training, sample=sample)
        flat = [ops.reshape(normalize_theta(t), (-1, k)) for t, k in zip(thetas, self.topic_sizes)]
        tokens = ops.reshape(tokens, (-1, shape[-1]))
        topics = {"thetas": thetas, "ks": ks, "lams": lams}
        if return_topics and return_features:
            # Sentences are independent given theta (zero LSTM state per
            # window), so dropping the empty windows changes no real token.
            if "mask" in inputs and backend.is_tensorflow():
                # Dropping windows gives a data-dependent shape: TensorFlow only (jax.jit
                # needs static shapes; under JAX every window runs and the mask zeroes
                # the empty ones' tokens).
                used = ops.any(ops.reshape(inputs["mask"], (-1, shape[-1])) > 0, axis=-1)
                # Keep at least one window (the first used one, else window 0):
                # Keras LSTMs cannot run on an empty batch.
                first = ops.argmax(ops.cast(used, "int32"))
                used = ops.logical_or(used, ops.arange(ops.shape(used)[0]) == first)
                import tensorflow as tf
                windows = tf.where(used)
                tokens = ops.take(tokens, windows[:, 0], axis=0)
                flat = [ops.take(t, windows[:, 0], axis=0) for t in flat]
            else:
                windows = ops.expand_dims(ops.arange(shape[0] * shape[1], dtype="int32"), -1)
            features = self._softmax_inputs(tokens, flat, training)
            return {"features": features, "windows": windows, **topics}
        features = self._softmax_inputs(tokens, flat, training)
        logits = ops.reshape(self.softmax(features),
                             (shape[0], shape[1], shape[2], self.vocab_size))
        if not return_topics:
            return logits
        return {"logits": logits, **topics}

    def forward(self, inputs, training=False, sample=None, features=False):
        """`call` with ``return_topics=True``: a dict of ``logits``, ``thetas``,
        ``ks``, ``lams`` (``features``, the softmax input of the non-empty
        windows, and ``windows`` instead of ``logits`` with `features`;
        `negative_elbo` takes either)."""
        return self(inputs, training=training, sample=sample, return_topics=True,
                    return_features=features)

    # -------------------------------------------------------------- objective
    def _objective(self, data, outputs):
        """`tfktopic.models.rgbn.objective.negative_elbo` of a forward pass's outputs."""
        return negative_elbo(data, outputs, self.topic_model, self.softmax, self.kl_weights,
                             self.tm_weight)

    def objective(self, data, training=False):
        """The negative ELBO of eq. 7 per document (`TopicLanguageModel`'s contract).

        Returns:
            `_objective`'s terms with ``units`` = the batch's documents (the
            loss is a mean per document), ``report`` (kl and tm_nll per
            document) and ``thetas`` (the forward pass's samples, for the
            TLASGR update in `after_optimizer_step`).
        """
        outputs = self.forward(data, training=training, features=True)
        terms = self._objective(data, outputs)
        docs = terms["num_docs"]
        return {**terms, "units": docs, "thetas": outputs["thetas"],
                "report": {"kl": (terms["kl"], docs), "tm_nll": (terms["tm_nll"], docs)}}

    def after_optimizer_step(self, data, terms):
        """Algorithm 1: after the optimizer step on the networks, one TLASGR-MCMC
        update of Phi and Pi with the theta samples of the same forward pass
        (drawn before the step)."""
        self.topic_model.update(ops.cast(data["context_bow"], "float32"),
                                [ops.stop_gradient(t) for t in terms["thetas"]])

    def compile(self, optimizer="adam", **kwargs):
        """`keras.Model.compile`, then the optimizer's variables are created
        (the first traced `fit` step would otherwise be traced twice)."""
        super().compile(optimizer=optimizer, **kwargs)
        self.optimizer.build(self.trainable_variables)

    def compile_from_config(self, config):
        # `.keras` loading: compile as saved (optimizer state is restored next).
        self.compile(**keras.saving.deserialize_keras_object(config))

    # ------------------------------------------------------------- evaluation
    def evaluate_sampled_perplexity(self, dataset, num_samples=10, protocol="preceding"):
        """Perplexity with p(y) averaged over `num_samples` Weibull draws of theta.

        log p(y_t) = log (1/S) sum_s p(y_t | theta^(s)), no dropout (reference
        §6.1 [REC]); `model.evaluate` / `evaluate_perplexity` give the
        Weibull-mean plug-in instead.

        Args:
            dataset: batches of `document_dataset`.
            num_samples: S.
            protocol: the context protocol of `dataset`, recorded in the result
                ("preceding" is leak-free; "all_other" is the papers' GBN-RNN
                protocol and lets future text in).

        Returns:
            A `PerplexityResult`.
        """
        if int(num_samples) < 1:
            raise ValueError(f"num_samples must be >= 1, got {num_samples}")
        num_samples = int(num_samples)

        def log_probs(batch):
            return ops.log_softmax(self(batch, training=False, sample=True), axis=-1)

        def batch_sums(batch):
            # log sum_s p_s accumulated in a loop (one traced forward pass on TensorFlow;
            # other backends run the S passes eagerly, drawing from Keras' global seed).
            if backend.is_tensorflow():
                return traced_batch_sums(batch)
            log_sum = log_probs(batch)
            for _ in range(num_samples - 1):
                log_sum = ops.logaddexp(log_sum, log_probs(batch))
            return batch_nll(batch, log_sum)

        def batch_nll(batch, log_sum):
            log_mean = log_sum - math.log(num_samples)
            return masked_token_nll(batch["targets"], log_mean, batch["mask"], from_logits=False)

        if backend.is_tensorflow():
            import tensorflow as tf

            @tf.function
            def traced_batch_sums(batch):
                _, log_sum = tf.while_loop(
                    lambda s, acc: s < num_samples,
                    lambda s, acc: (s + 1, ops.logaddexp(acc, log_probs(batch))),
                    (tf.constant(1), log_probs(batch)))
                return batch_nll(batch, log_sum)

        total, count = 0.0, 0.0
        for batch in dataset:
            nll_sum, num = batch_sums(batch)
            total += float(nll_sum)
            count += float(num)
        return PerplexityResult(total, int(round(count)), f"{protocol}, {num_samples} samples")

    # ----------------------------------------------------------------- topics
    def topic_word_matrix(self, layer=0):
        """The loadings of every topic of a layer on the words (through Phi^1 ...
        Phi^l), numpy [K_layer, V_c]; ``topics(top_n, vocabulary, layer=l + 1)``
        ranks its rows.

        Args:
            layer: 0-based index of the layer (0 = the word-level topics; `topics`
                and `generate` take the 1-based ``layer``).
        """
        if not 0 <= int(layer) < self.num_layers:
            raise ValueError(f"layer must be in [0, {self.num_layers}), got {layer}")
        return np.asarray(self.topic_model.phi_products()[int(layer)]).T

    def topics(self, top_n=10, vocabulary=None, weights=False, layer=1):
        """The top words of every topic of a layer (`TopicLanguageModel.topics`).

        Args:
            top_n, vocabulary, weights: as in `TopicLanguageModel.topics` (the
                weights: column k of Phi^1 ... Phi^l, a distribution over the
                topic words).
            layer: 1-based layer (1 = the word-level topics), as the CLI's
                ``--layer``.
        """
        return super().topics(top_n, vocabulary, weights, layer=self._layer_index(layer))

    def _layer_index(self, layer, name="layer"):
        """The 0-based index of the 1-based `layer` (checked: one line naming `name`)."""
        if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)) or \
                not 1 <= layer <= self.num_layers:
            raise ValueError(f"{name}={layer!r}: layers are 1-based, 1 (word-level topics) to "
                             f"{self.num_layers}")
        return int(layer) - 1

    def sampled_parameters(self):
        """Phi^1..L and (rGBN-RNN) Pi^1..L, sampled by TLASGR-MCMC, not by gradient."""
        return [*self.topic_model.phi, *self.topic_model.pi]

    def topic_proportions(self, bow):
        """theta^1 at its Weibull mean, normalised to sum to one: [..., K_1] for
        bags of words [B, J, V_c] (or [B, V_c])."""
        thetas = self.topic_outputs(bow)
        return thetas["proportions"]

    def topic_outputs(self, bow):
        """``proportions`` (see `topic_proportions`) and ``theta_l``, the Weibull
        mean of every layer's theta, for bags of words [B, J, V_c] (or [B, V_c])."""
        bow = self._check_bow_width(bow, self.topic_vocab_size)
        single = len(bow.shape) == 2
        thetas, _, _ = self.encoder(bow[:, None] if single else bow, training=False)
        if single:
            thetas = [theta[:, 0] for theta in thetas]
        outputs = {f"theta_{l + 1}": theta for l, theta in enumerate(thetas)}
        outputs["proportions"] = thetas[0] / ops.maximum(
            ops.sum(thetas[0], axis=-1, keepdims=True), 1e-30)
        return outputs

    # ------------------------------------------------------------- generation
    def generation_conditioning(self, num_sentences, topic=None, context_bow=None, seed=None,
                                topic_layer=0, sample_theta=False, paragraph=False):
        """The LM's topic input of every generated sentence (reference rgbn_rnn.md §6.3).

        One theta per sentence and layer, max-normalised (`normalize_theta`,
        eq. 4) and fixed while the sentence is generated; see `generate` and
        `generate_paragraph` for where it comes from
        (`tfktopic.models.rgbn.generation.conditioning_thetas`).

        Args:
            num_sentences: N (per context row with `context_bow`; the paragraph's
                sentences with `paragraph`).
            topic, topic_layer, context_bow, sample_theta: as in `generate`.
            seed: seed of the theta draws (a numpy Generator).
            paragraph: thetas of a paragraph: a chain through Pi (eq. 2).

        Returns:
            list over layers of float32 [N', K_l] tensors, one row per sentence
            (N' = J * num_sentences for J context rows without `paragraph`).

        Raises:
            ValueError: a bad topic, layer or context (named).
        """
        return conditioning_thetas(self, num_sentences, topic=topic, context_bow=context_bow,
                                   rng=np.random.default_rng(seed), topic_layer=topic_layer,
                                   sample_theta=sample_theta, paragraph=paragraph)

    def initial_generation_state(self, num_sentences):
        """Zero (h, c) of every LSTM layer: each sentence starts from zero states."""
        return [cell.get_initial_state(num_sentences) for cell in self._step_cells()]

    def generation_step(self, token, state, conditioning):
        """log p(next token | previous token, state, theta): one step of the
        topic-gated LSTM stack (eq. 4) with the stack's weights, no dropout.

        Args:
            token: int32 [N] the previous tokens.
            state: list over layers of [h, c].
            conditioning: `generation_conditioning`'s normalised thetas.

        Returns:
            (float [N, V] log-probabilities, the new state).
        """
        x = self.embedding(token)
        gated, new_state = [], []
        for cell, theta, layer_state in zip(self._step_cells(), conditioning, state):
            x, layer_state = cell(ops.concatenate([x, theta], axis=-1), layer_state)
            gated.append(x)
            new_state.append(layer_state)
        logits = self.softmax(ops.concatenate(gated, axis=-1) if len(gated) > 1 else gated[0])
        return ops.log_softmax(logits, axis=-1), new_state

    def _step_cells(self):
        """The stack's step cells (`TopicGatedLSTMStack.cells`: its weights, no
        copies), made once and not tracked by Keras."""
        cells = self.__dict__.get("_generation_cells")
        if cells is None:
            cells = self.stack.cells()
            object.__setattr__(self, "_generation_cells", cells)
        return cells

    def generate(self, prompt=None, max_length=30, sampler=None, num_sentences=1, topic=None,
                 context_bow=None, seed=None, allow_unk=False, tokenizer=None, method=None,
                 temperature=1.0, top_k=10, max_len=None, layer=None, sample_theta=False,
                 topic_layer=None):
        """Generate sentences guided by topics (reference rgbn_rnn.md §6.3).

        The theta of each sentence comes from (in this order of precedence):

        * ``context_bow`` -- a document: [J, V_c] per-sentence contexts (or one
          [V_c] context; with a `tokenizer`, text) encoded by the inference
          network; one sentence per context row (``num_sentences`` per row);
        * ``topic`` -- an int (one topic of layer `layer`), a weight
          vector over that layer's topics (a combination), or a dict
          ``{index: int | weights}`` mixing topics across layers (keys: 0-based
          layer indices, 0 = word level); the other
          layers follow Phi (see `tfktopic.models.rgbn.prior.topic_thetas`);
        * otherwise noise: theta^L ~ Gam(tau0, tau0), theta^l ~
          Gam(tau0 Phi^{l+1} theta^{l+1}, tau0) top-down, one draw per sentence.

        Each theta is max-normalised; the LM runs from zero states, starting at
        ``<bos>`` and stopping at ``<eos>`` or `max_length` tokens; ``<pad>`` and
        ``<bos>`` are never produced. The tokens are chosen by the base class's
        compiled loop (`TopicLanguageModel.generate` over `generation_step`).

        Args:
            prompt, max_length, sampler, allow_unk, tokenizer, method,
                temperature, top_k, max_len: as in `TopicLanguageModel.generate`
                (the authors' code samples at temperature 0.75).
            num_sentences: sentences (per context row when `context_bow`).
            topic: see above.
            layer: the 1-based layer of an int or vector `topic` (1 = word-level
                topics, the default), as the CLI's ``--layer``.
            topic_layer: deprecated: the 0-based layer (``layer=topic_layer + 1``);
                warns with a `DeprecationWarning`.
            context_bow: see above.
            seed: seed of theta draws and token sampling.
            sample_theta: with `context_bow`, draw theta from q instead of
                using its mean.

        Returns:
            int32 [N, max_length] LM ids; each row ends at its ``<eos>`` (kept),
            followed by ``<pad>`` = 0; with a `tokenizer` the N strings.
        """
        return super().generate(prompt, max_length, sampler, num_sentences, topic=topic,
                                context_bow=context_bow, seed=seed, allow_unk=allow_unk,
                                tokenizer=tokenizer, method=method, temperature=temperature,
                                top_k=top_k, max_len=max_len,
                                topic_layer=self._topic_layer_index(layer, topic_layer),
                                sample_theta=sample_theta)

    def _topic_layer_index(self, layer, topic_layer):
        """The 0-based layer index of `generate`'s 1-based `layer` or deprecated 0-based
        `topic_layer` (default: the word-level topics)."""
        if topic_layer is None:
            return self._layer_index(1 if layer is None else layer)
        if layer is not None:
            raise ValueError("give layer= (1-based) or the deprecated topic_layer= "
                             "(0-based), not both")
        warnings.warn("topic_layer= (0-based) is deprecated: use layer= (1-based, 1 = word-"
                      f"level topics), here layer={int(topic_layer) + 1}", DeprecationWarning,
                      stacklevel=3)
        if not 0 <= int(topic_layer) < self.num_layers:
            raise ValueError(f"topic_layer must be in [0, {self.num_layers}) (0-based; use "
                             f"layer=, 1-based), got {topic_layer}")
        return int(topic_layer)

    def generate_paragraph(self, num_sentences=5, max_length=30, sampler=None, context_bow=None,
                           seed=None, allow_unk=False, tokenizer=None, method=None,
                           temperature=1.0, top_k=10, max_len=None):
        """Generate a paragraph whose topics evolve through Pi (rGBN only).

        Sentence 1's theta is drawn top-down from the prior (or, with
        `context_bow`, continues a document: theta_1 ~ the transition from the
        encoded last sentence of the document); then theta^L_j ~
        Gam(tau0 Pi^L theta^L_{j-1}, tau0) and theta^l_j ~ Gam(tau0 (Phi^{l+1}
        theta^{l+1}_j + Pi^l theta^l_{j-1}), tau0). For GBN-RNN the sentences
        are independent draws (no Pi). Given its theta, every sentence is
        generated as in `generate` (the same compiled loop, all at once).

        Args:
            num_sentences: sentences of the paragraph.
            context_bow: optional [J, V_c] contexts of a document to continue
                (rGBN-RNN only).
            max_length, sampler, seed, allow_unk, tokenizer, method, temperature,
                top_k, max_len: as in `generate`.

        Returns:
            int32 [num_sentences, max_length] (with a `tokenizer`, the sentences' text).
        """
        return super().generate(None, max_length, sampler, num_sentences,
                                context_bow=context_bow, seed=seed, allow_unk=allow_unk,
                                tokenizer=tokenizer, method=method, temperature=temperature,
                                top_k=top_k, max_len=max_len, paragraph=True)

    # ---------------------------------------------------------------- config
    def get_config(self):
        return {**super().get_config(), "vocab_size": self.vocab_size,
                "topic_vocab_size": self.topic_vocab_size, "num_documents": self.num_documents,
                "num_layers": self.num_layers, "recurrent": self.recurrent,
                "hidden_sizes": list(self.hidden_sizes), "topic_sizes": list(self.topic_sizes),
                "encoder_units": None if self.encoder_units is None else list(self.encoder_units),
                "embedding_dim": self.embedding_dim, "encoder_recurrent": self.encoder_recurrent,
                "scalar_k": self.scalar_k, "k_range": list(self.k_range), "dropout": self.dropout,
                "locked_dropout": self.locked_dropout, "gate_orientation": self.gate_orientation,
                "gate_bias_init": None if self.gate_bias_init is None
                else list(self.gate_bias_init),
                "tm_weight": self.tm_weight, "kl_weights": list(self.kl_weights),
                "tau0": self.tau0, "tlasgr": dict(self.tlasgr), "seed": self.seed,
                "decoder_init": self.decoder_init, "initialization": self.initialization}

    @classmethod
    def from_preset(cls, preset, *args, tokenizer=None, documents=None, **overrides):
        """A model of a preset's model settings, its per-layer sizes cut to ``num_layers``.

        `TopicLanguageModel.from_preset` (pretrained names, ``tokenizer=``,
        ``documents=`` for the LDA start of the ``coherent`` presets), where
        `preset` may also be a dict of model settings (constructor arguments,
        e.g. a run's ``settings["model"]``).

        Args:
            preset: a name in `PRESETS`, a `tfktopic.presets.Preset`, a dict of
                model settings or a pretrained model name.
            *args: ``vocab_size, topic_vocab_size, num_documents`` as in the
                constructor (with `tokenizer`, give ``num_documents=`` by keyword).
            tokenizer, documents: as in `TopicLanguageModel.from_preset`.
            **overrides: constructor arguments replacing the preset's. The
                preset's per-layer lists (not the overridden ones) are cut to
                ``num_layers`` by `tfktopic.models.rgbn.presets.cut_layers`.

        Returns:
            An `RGBNRNN` (compile it with
            `tfktopic.runs.training.adam_optimizer` of the preset's ``training``).
        """
        return super().from_preset(preset, *args, tokenizer=tokenizer, documents=documents,
                                   **overrides)

    @classmethod
    def _preset_settings(cls, preset):
        if isinstance(preset, dict):
            return dict(preset)
        return super()._preset_settings(preset)

    @classmethod
    def _lda_topics(cls, settings):
        # K_1: the first of the (uncut) topic sizes, the paper's 100 for every L by default.
        return int((settings.get("topic_sizes") or (100,))[0])

    @classmethod
    def _cut(cls, settings, overrides):
        num_layers = int(overrides.get("num_layers", settings.get("num_layers", 3)))
        return cut_layers({k: v for k, v in settings.items() if k not in overrides}, num_layers)

    @classmethod
    def _check_settings(cls, settings, overrides):
        cls._cut(settings, overrides)            # num_layers beyond the preset's lists

    @classmethod
    def _from_settings(cls, settings, args, overrides):
        return cls(*args, **{**settings, **cls._cut(settings, overrides), **overrides})
