"""`TopicLanguageModel`: the one base class of every language model in tfktopic.

The training and evaluation loop, the metric reporting and the topic listing
are written here once (DESIGN.md §2a, §3); a model supplies

* `call(inputs, training)` -- next-token logits (or normalised
  log-probabilities) for the pipeline dict batch;
* `objective(data, training)` -- the loss terms of one batch (below);
* for topic models, `topic_word_matrix()` and `topic_proportions(bow)`;
* optionally `after_optimizer_step(data, terms)` (rGBN-RNN's TLASGR update of
  Phi and Pi runs there, after the gradient step of the networks);
* for generating models, `generation_conditioning`, `initial_generation_state`
  and `generation_step(token, state, conditioning)`: `generate` runs them in
  one compiled `keras.ops.while_loop` (`tfktopic.models.samplers` pick the tokens);
  its text in and out goes through the model's `preprocessor`
  (`tfktopic.data.preprocessors`, holding the attached tokenizer).

**The objective contract.** `objective` returns a dict of float32 scalars:

``loss``
    the minimised objective of the batch, a *mean over* ``units``
    (the model's own regularisation losses, `self.losses`, are added here once);
``units``
    what ``loss`` is a mean over: predicted tokens for the token-level
    objectives, documents for rGBN-RNN's per-document ELBO;
``nll_sum``, ``num_tokens``
    the summed negative log-likelihood of the predicted tokens and their
    number, from which ``nll`` and ``ppl`` are reported (a model chooses which
    NLL: e.g. TopicRNN reports the joint of (y_t, l_t) in training and the
    marginal over l_t in evaluation);
``report``
    ``{name: (value, weight)}`` for every name of the class's
    `reported_terms`: ``value`` a mean over ``weight`` units (e.g. the KL per
    token with the batch's token count); logged as the weighted mean over the
    epoch.

Any other key (e.g. rGBN's theta samples) is passed on to
`after_optimizer_step`.

**Backends.** `train_step` / `test_step` are written once per Keras backend
(TensorFlow, JAX) in `tfktopic.models.steps`; a model writes only `objective`.

**Distribution.** A hand-written mean loss is not rescaled by Keras under a
`tf.distribute` strategy: `train_step` weights it by this replica's share of
the global batch's ``units`` (`tfktopic.distribute.replica_share`), so the
summed replica gradients are the single-device gradient of the global batch.
Every logged quantity is a sum-aggregated metric state (weighted means,
perplexity sums), and the logs are computed from the states summed over the
replicas (`tfktopic.distribute.global_logs`), so they equal the
single-device values.

**Traits** (class attributes, read by the run code, export and the CLI):
`has_topics` (``topics()`` and ``topic_proportions()``), `simplex_topics`
(``topic_proportions()`` are mixing weights on the simplex), `chunked` (trained
on document chunks ``[B, J, T]``), `streamed` (windows of parallel document
streams, state carried), `hierarchical` (layers of topics, Phi and
Pi), `generates` (``generate()``).
"""

import inspect
import json
import pathlib
import zipfile

import keras
import numpy as np
from keras import ops
from keras.src.trainers.compile_utils import MetricsList as _KerasMetricsList

from tfktopic import backend, pretrained
from tfktopic.data.preprocessors import for_kind
from tfktopic.data.vocab import topic_words
from tfktopic.distribute import global_logs
from tfktopic.errors import TfktopicError
from tfktopic.evaluation.perplexity import Perplexity
from tfktopic.lda import LDA_PASSES, fit_lda
from tfktopic.models import samplers, steps
from tfktopic.models.decoding import GENERATION_METHODS
from tfktopic.tokenizer import LM_VOCAB_FILE, Tokenizer

__all__ = ["TopicLanguageModel"]

_PAD, _BOS, _EOS, _UNK = 0, 1, 2, 3


def _registered_name(path):
    """The registered class name (``"tfktopic>TCNLM"``) a ``.keras`` file's config names."""
    with zipfile.ZipFile(path) as archive:
        return json.loads(archive.read("config.json")).get("registered_name")


def _other_class(shipped, found, wanted):
    """The one-line error of a pretrained model loaded through a class it is not."""
    return (f"pretrained:{shipped} is a {found.__name__}, not a {wanted.__name__}: load it with "
            f"{found.__name__}.from_preset({shipped!r}) (or TopicLanguageModel.from_preset)")


class _MetricGroup(_KerasMetricsList):
    """The model's logged metrics as one Keras metrics list: Keras' callbacks look up a
    metric's direction (`Perplexity` is "down") only inside such lists, so that
    ``EarlyStopping(monitor="val_ppl")`` picks "min" without being told."""

    def result(self):
        return self.get_result()


class TopicLanguageModel(keras.Model):
    """Base class of the tfktopic language models (module docstring: the contract).

    Subclasses call ``super().__init__(**kwargs)`` first, create their layers,
    and implement `call` and `objective` (and, for topic models,
    `topic_word_matrix` and `topic_proportions`).

    Example (a minimal subclass: a bigram model):

    >>> from tfktopic.evaluation.perplexity import masked_token_nll
    >>> class Bigram(TopicLanguageModel):
    ...     def __init__(self, vocab_size, **kwargs):
    ...         super().__init__(**kwargs)
    ...         self.vocab_size = vocab_size
    ...         self.table = keras.layers.Embedding(vocab_size, vocab_size)
    ...     def call(self, inputs, training=False):
    ...         return self.table(inputs["tokens"])
    ...     def objective(self, data, training=False):
    ...         nll_sum, num_tokens = masked_token_nll(
    ...             data["targets"], self(data, training=training), data["mask"])
    ...         return {"loss": nll_sum / ops.maximum(num_tokens, 1.0), "units": num_tokens,
    ...                 "nll_sum": nll_sum, "num_tokens": num_tokens}
    >>> model = Bigram(5)
    >>> model.compile(optimizer="adam")
    >>> batch = {"tokens": np.array([[1, 3, 4]]), "targets": np.array([[3, 4, 2]]),
    ...          "mask": np.ones((1, 3), np.float32)}
    >>> sorted(model.test_on_batch(batch, return_dict=True))
    ['loss', 'nll', 'ppl']
    """

    #: ``topics()`` / ``topic_proportions()`` are defined.
    has_topics = False
    #: ``topic_proportions()`` lie on the simplex (how much of a document each topic
    #: explains), so their mean over a corpus is each topic's usage
    #: (`tfktopic.runs.usage`); TopicRNN's theta is an unconstrained Gaussian vector.
    simplex_topics = False
    #: Inputs are document chunks ``[B, J, T]`` (the state is carried across the J windows).
    chunked = False
    #: Inputs are windows of parallel document streams with a ``reset`` flag and a
    #: state carried across calls (`tfktopic.data.streams`).
    streamed = False
    #: Topics come in layers (Phi, Pi; `tfktopic.models.rgbn.topic_hierarchy`).
    hierarchical = False
    #: ``generate()`` is defined.
    generates = False
    #: Names of the extra logged terms of `objective`'s ``report`` (besides loss, nll, ppl).
    reported_terms = ()
    #: The family's presets: its ``tfktopic/models/<family>_presets.py`` entries
    #: (`tfktopic.presets` schema), read by `from_preset`.
    presets = {}

    def sampled_parameters(self):
        """The model's parameters that are not trained by gradient (none here).

        Models whose topics are fitted another way return those weights: LDA+LSTM's
        gensim LDA (topic-word matrix and alpha), rGBN-RNN's Phi and Pi (TLASGR-MCMC).
        The other non-trainable weights (carried LSTM states, preconditioners, step
        counters) are state, not parameters; `tfktopic.runs.parameter_counts` counts
        both kinds apart.

        Returns:
            list of `keras.Variable`.
        """
        return []

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        #: The attached `tfktopic.tokenizer.Tokenizer` (`from_preset`, `load_assets`) or
        #: `None`: with one, `generate` returns text and `topics` words.
        self.tokenizer = None
        self.loss_tracker = keras.metrics.Mean(name="loss")
        self.perplexity = Perplexity(name="ppl")
        self.term_trackers = [keras.metrics.Mean(name=name) for name in self.reported_terms]
        object.__setattr__(self, "_metrics_list", _MetricGroup([self.perplexity,
                                                                *self.term_trackers]))
        # The compiled generation loops, one per method (not tracked by Keras).
        object.__setattr__(self, "_generation_loops", {})

    # ----------------------------------------------------------------- training
    def objective(self, data, training=False):
        """The loss terms of one batch (see the module docstring for the keys).

        Args:
            data: a pipeline dict batch (``tokens``, ``targets``, ``mask``, ...).
            training: training mode (dropout, sampled latent variables).

        Returns:
            dict with ``loss``, ``units``, ``nll_sum``, ``num_tokens`` and
            ``report`` (``{name: (value, weight)}`` for `reported_terms`).
        """
        raise NotImplementedError(f"{type(self).__name__} must implement objective()")

    def _loss(self, terms):
        loss = terms["loss"]
        return loss + sum(self.losses) if self.losses else loss

    def train_step(self, *args):
        """One optimizer step on ``objective(...)["loss"]``, then `after_optimizer_step`.

        Written once per backend in `tfktopic.models.steps` (TensorFlow: ``(data)``;
        JAX: ``(state, data)`` -> ``(logs, state)``, as Keras' trainers call it).
        """
        return steps.train_step(self, *args)

    def test_step(self, *args):
        """The objective with ``training=False`` and the metric updates (`steps.test_step`)."""
        return steps.test_step(self, *args)

    def after_optimizer_step(self, data, terms):
        """Called in `train_step` after the optimizer step (default: nothing).

        Args:
            data: the batch.
            terms: the dict returned by `objective` for it.
        """

    def _report(self, loss, terms):
        self.loss_tracker.update_state(loss, sample_weight=terms["units"])
        self.perplexity.update_from_sums(terms["nll_sum"], terms["num_tokens"])
        report = terms.get("report", {})
        for tracker in self.term_trackers:
            value, weight = report[tracker.name]
            tracker.update_state(value, sample_weight=weight)
        return global_logs(self.metrics, lambda: {
            "loss": self.loss_tracker.result(), "nll": self.perplexity.nll(),
            "ppl": self.perplexity.result(),
            **{tracker.name: tracker.result() for tracker in self.term_trackers}})

    @property
    def metrics(self):
        return [self.loss_tracker, self._metrics_list]

    # --------------------------------------------------------------- generation
    def generation_conditioning(self, num_sentences, topic=None, context_bow=None, seed=None,
                                **options):
        """What every step is conditioned on (e.g. the topic vector), one row per sentence.

        Args:
            num_sentences: N (a model may make more rows, e.g. rGBN-RNN's
                num_sentences per context row; `generate` follows the rows).
            topic: the model's topic choice (an index, weights, ...), or `None`.
            context_bow: a context bag of words [V_c] or [N, V_c], or `None`.
            seed: seed of any draw (e.g. topics from the prior).
            **options: model-specific options (e.g. TopicRNN's ``topic_strength``).

        Returns:
            A tensor (or nested structure of tensors) with one row per
            generated sentence.
        """
        raise NotImplementedError(f"{type(self).__name__} does not generate")

    def initial_generation_state(self, num_sentences):
        """The recurrent state before ``<bos>`` (nested tensors with `num_sentences`
        rows: the rows of `generation_conditioning`)."""
        raise NotImplementedError(f"{type(self).__name__} does not generate")

    def generation_step(self, token, state, conditioning):
        """One step: (log-probabilities [N, V] of the next token, the new state).

        Args:
            token: int32 [N] the previous tokens.
            state: the state (`initial_generation_state` structure).
            conditioning: `generation_conditioning`'s output.
        """
        raise NotImplementedError(f"{type(self).__name__} does not generate")

    @property
    def data_kind(self):
        """What the model is fed (`tfktopic.data.preprocessors.KINDS`), from its traits:
        "chunks" (`chunked`), "streams" (`streamed`) or sentence "windows"."""
        return "chunks" if self.chunked else "streams" if self.streamed else "windows"

    @property
    def preprocessor(self):
        """The `tfktopic.data.preprocessors.Preprocessor` of the model's `data_kind`,
        holding the attached tokenizer (``model.tokenizer``, `None` if none): `generate`
        turns text into its inputs and its ids into text through it (keras-hub's
        ``task.preprocessor``). A fresh object on every access, so it always holds the
        tokenizer attached now; the kind's training flags (TopicRNN's document targets,
        the chunked document LSTM's whole-document scoring) are the registry's
        (``registry.get(name).preprocessor()``), not set here.

        Example:
        >>> from tfktopic.models import LSTMLanguageModel
        >>> LSTMLanguageModel(10, document_level=True).preprocessor
        ChunkPreprocessor(topical=False, name='LSTMLanguageModel')
        """
        return self._preprocessor(getattr(self, "tokenizer", None))

    def _preprocessor(self, tokenizer):
        """The model's `preprocessor`, holding `tokenizer` instead (`generate`'s argument)."""
        return for_kind(self.data_kind, topical=self.has_topics, name=type(self).__name__,
                        tokenizer=tokenizer)

    def compile(self, *args, sampler=None, **kwargs):
        """`keras.Model.compile`, plus the default `sampler` of `generate` (as
        keras-hub's CausalLM): a `tfktopic.models.samplers` instance, name or config."""
        if sampler is not None:
            object.__setattr__(self, "_default_sampler", samplers.get(sampler))
        return super().compile(*args, **kwargs)

    def generate(self, prompt=None, max_length=30, sampler=None, num_sentences=1, topic=None,
                 context_bow=None, seed=None, allow_unk=False, tokenizer=None, method=None,
                 temperature=1.0, top_k=10, max_len=None, **options):
        """Generate sentences from ``<bos>`` (one compiled `keras.ops.while_loop`).

        Every step feeds the previous token to `generation_step` and lets the
        `sampler` pick the next; ``<pad>`` and ``<bos>`` are never emitted,
        ``<unk>`` only with ``allow_unk=True``; a row stops at ``<eos>``. The
        prompt's tokens are fed first (teacher-forced), then generation
        continues. Random samplers draw counter-based noise keyed on (`seed`,
        step), so a seed gives the same sentences every time on a backend.

        Args:
            prompt: `None`; text (needs a tokenizer: `model.tokenizer` or
                `tokenizer=`; turned into LM ids, its final ``<eos>`` dropped, by
                the `preprocessor`'s ``generate_preprocess``); LM ids [P] or
                [N, P]. (An int here is the old positional `num_sentences`.)
            max_length: maximum tokens per sentence, prompt and ``<eos>`` included.
            sampler: a `tfktopic.models.samplers` sampler, name or config
                (`None`: the one set at `compile(sampler=...)`, else top-k).
            num_sentences: sentences to generate.
            topic: topic conditioning (see the model's `generation_conditioning`).
            context_bow: a context bag of words [V_c] / [N, V_c]; with a
                tokenizer, raw text is accepted too (``generate_preprocess``).
            seed: int seed (`None`: a fresh random one).
            allow_unk: True lets the model generate ``<unk>`` (id 3).
            tokenizer: a `tfktopic.tokenizer.Tokenizer` (default `model.tokenizer`);
                `False`: LM ids even when a tokenizer is attached.
            method, temperature, top_k: the old way to pick a sampler
                ("greedy", "sample", "top_k"); used only if `sampler` is `None`.
            max_len: old name of `max_length`.
            **options: model-specific conditioning options.

        Returns:
            int32 array [N, max_length] of LM ids, one row per generated sentence
            (N = num_sentences unless the model's conditioning makes more rows;
            each row ends at its first ``<eos>``, then ``<pad>``), or with a
            tokenizer the list of N detokenised strings (the `preprocessor`'s
            ``generate_postprocess``).

        Raises:
            ValueError: a bad argument (named).
        """
        if not self.generates:
            raise ValueError(f"{type(self).__name__} does not generate")
        if isinstance(prompt, (int, np.integer)) and not isinstance(prompt, bool):
            prompt, num_sentences = None, prompt              # generate(3, ...): the old API
        if max_len is not None:
            max_length = max_len
        for name, value in (("num_sentences", num_sentences), ("max_length", max_length),
                            ("top_k", top_k)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        if isinstance(temperature, bool) or not float(temperature) > 0.0:
            raise ValueError(f"temperature must be > 0, got {temperature!r}")
        if tokenizer is None:
            tokenizer = getattr(self, "tokenizer", None)
        preprocessor = self._preprocessor(None if tokenizer is False else tokenizer)  # False: ids
        sampler = self._resolve_sampler(sampler, method, temperature, top_k)
        if getattr(sampler, "num_beams", 1) > 1:
            raise ValueError("BeamSampler with num_beams > 1 is not supported by generate yet "
                             "(use num_beams=1, or greedy / top_k / top_p)")
        inputs = preprocessor.generate_preprocess(prompt, context_bow)
        prompt, context_bow = inputs["prompt"], inputs["context_bow"]
        if seed is None:
            seed = int(np.random.default_rng().integers(2 ** 31 - 1))
        conditioning = self.generation_conditioning(int(num_sentences), topic=topic,
                                                    context_bow=context_bow, seed=seed,
                                                    **options)
        # One row per generated sentence: num_sentences, or more (rGBN-RNN: per context row).
        rows = int(ops.shape(keras.tree.flatten(conditioning)[0])[0])
        prompt_ids = self._prompt_ids(prompt, rows, int(max_length))
        state = self.initial_generation_state(rows)
        banned = np.zeros(self.vocab_size, bool)
        banned[[_PAD, _BOS] if allow_unk else [_PAD, _BOS, _UNK]] = True
        key = (sampler, int(max_length), prompt_ids.shape[1])
        loops = self._generation_loops
        if key not in loops:
            loops[key] = backend.compile_function(
                lambda *args: self._generation_loop(sampler, int(max_length), *args))
        ids = loops[key](conditioning, state, ops.convert_to_tensor(banned),
                         ops.convert_to_tensor(prompt_ids),
                         ops.convert_to_tensor(np.int32(int(seed) % (2 ** 31 - 1))))
        ids = np.asarray(ops.convert_to_numpy(ids), np.int32)
        return ids if preprocessor.tokenizer is None else preprocessor.generate_postprocess(ids)

    def _resolve_sampler(self, sampler, method, temperature, top_k):
        """The sampler of one `generate` call (argument, `compile`'s, old `method`, top-k)."""
        if sampler is not None and method is not None:
            raise ValueError(f"give one of sampler ({sampler!r}) and the old method "
                             f"({method!r}), not both")
        if sampler is not None:
            return samplers.get(sampler)
        if method is not None:
            if method not in GENERATION_METHODS:
                raise ValueError(f"method must be one of {GENERATION_METHODS}, got {method!r}")
            if method == "greedy":
                return samplers.GreedySampler()
            if method == "sample":
                return samplers.RandomSampler(temperature=temperature)
            return samplers.TopKSampler(k=top_k, temperature=temperature)
        default = getattr(self, "_default_sampler", None)
        return default if default is not None else samplers.TopKSampler(
            k=top_k, temperature=temperature)

    def _prompt_ids(self, prompt, rows, max_length):
        """The prompt ids (`generate_preprocess`'s) as int32 [rows, P] (P = 0 without one)."""
        if prompt is None:
            return np.zeros((rows, 0), np.int32)
        prompt = np.asarray(prompt)
        if prompt.ndim == 1:
            prompt = np.broadcast_to(prompt, (rows, prompt.shape[0]))
        if prompt.ndim != 2 or prompt.shape[0] != rows or \
                not np.issubdtype(prompt.dtype, np.integer):
            raise ValueError(f"prompt ids must be integers of shape [P] or [{rows}, P], got "
                             f"{prompt.dtype} {prompt.shape}")
        if prompt.shape[1] >= max_length:
            raise ValueError(f"the prompt has {prompt.shape[1]} tokens: max_length="
                             f"{max_length} leaves no room to generate")
        if prompt.size and (prompt.min() < 0 or prompt.max() >= self.vocab_size):
            raise ValueError(f"prompt ids must be in [0, vocab_size={self.vocab_size})")
        return prompt.astype(np.int32)

    def _generation_loop(self, sampler, max_length, conditioning, state, banned, prompt, seed):
        """The per-token loop in keras.ops (compiled once per sampler, length and prompt
        width): int32 [N, max_length] ids, the prompt's first."""
        num = ops.shape(keras.tree.flatten(conditioning)[0])[0]     # N rows (the contract)
        prompt_len = int(prompt.shape[1])
        token = ops.full([num], _BOS, dtype="int32")
        done = ops.zeros([num], dtype="bool")
        ids = ops.zeros([num, max_length], dtype="int32")            # preallocated buffer
        minus_inf = ops.convert_to_tensor(-np.inf, "float32")

        def keep_going(step, token, state, done, ids):
            return ops.logical_and(step < max_length, ops.logical_not(ops.all(done)))

        def body(step, token, state, done, ids):
            log_probs, state = self.generation_step(token, state, conditioning)
            scores = ops.where(banned[None, :], minus_inf, ops.cast(log_probs, "float32"))
            chosen = sampler(scores, seed, step)
            if prompt_len:
                forced = ops.take(prompt, ops.minimum(step, prompt_len - 1), axis=1)
                chosen = ops.where(step < prompt_len, forced, chosen)
            chosen = ops.where(done, ops.zeros_like(chosen), chosen)
            ids = ops.slice_update(ids, [ops.zeros_like(step), step], chosen[:, None])
            done = ops.logical_or(done, ops.equal(chosen, _EOS))
            token = ops.where(done, ops.full_like(chosen, _EOS), chosen)
            return step + 1, token, state, done, ids

        loop_vars = (ops.convert_to_tensor(0, "int32"), token, state, done, ids)
        return ops.while_loop(keep_going, body, loop_vars)[4]

    #: Constructor arguments whose effect lives in the saved weights (e.g. an LDA
    #: start of the topic decoder): `from_config` rebuilds without them (the
    #: weights are restored next) and keeps their value as a label.
    saved_in_weights = ()

    @classmethod
    def from_config(cls, config):
        """`cls(**config)`, with the `saved_in_weights` arguments set as labels only."""
        config = dict(config)
        labels = {key: config.pop(key) for key in cls.saved_in_weights if key in config}
        model = cls(**config)
        for key, value in labels.items():
            setattr(model, key, value)
        return model

    # ------------------------------------------------------------------ presets
    #: Constructor arguments a `tfktopic.tokenizer.Tokenizer` supplies (`from_preset`'s
    #: ``tokenizer=``): argument name -> how it is read from the tokenizer.
    _TOKENIZER_ARGUMENTS = {
        "vocab_size": lambda tokenizer: tokenizer.vocab_size,
        "topic_vocab_size": lambda tokenizer: tokenizer.topic_vocab_size,
        "lm_to_topic": lambda tokenizer: tokenizer.topic_vocab.lm_to_topic,
    }

    @classmethod
    def from_preset(cls, preset, *args, tokenizer=None, documents=None, **overrides):
        """A model from a hyperparameter preset, or a shipped pretrained model.

        As keras-hub's ``from_preset``, one name space: a preset name of the
        family (`presets`, e.g. "small", "paper"), a `tfktopic.presets.Preset`,
        or a pretrained model (`tfktopic.pretrained.available`, optionally
        written ``pretrained:NAME``). A pretrained model comes back with its
        tokenizer attached (``model.tokenizer``, over its shipped vocabularies),
        so ``generate`` returns text and ``topics`` words. The base class loads
        a pretrained model of any family; a family class loads one of its own
        class or a subclass.

        Args:
            preset: the name (or `Preset`).
            *args: the constructor's positional arguments (vocabulary sizes,
                ``lm_to_topic``, ...) for a hyperparameter preset.
            tokenizer: a `tfktopic.tokenizer.Tokenizer` for a hyperparameter
                preset, instead of `args`: it gives ``vocab_size``,
                ``topic_vocab_size`` / ``lm_to_topic`` and is attached to the
                model (``model.tokenizer``).
            documents: training documents (lists of sentences of tokens, e.g. a
                `tfktopic.data.Corpus`) for a preset whose topic decoder starts
                from an LDA (``decoder_init="lda"``, e.g. TCNLM ``small``): an
                LDA of `tokenizer`'s topic vocabulary is fitted on them
                (`tfktopic.lda.fit_lda` with the preset's
                ``lda_passes``, default `tfktopic.lda.LDA_PASSES`,
                and the model's seed or 0, as ``tfktopic train``) unless
                ``topic_word_init=`` is given (LDA+LSTM: its LDA, unless ``lda=`` is given).
            **overrides: constructor arguments replacing the preset's.

        Returns:
            A new (untrained) model with the preset's ``model`` settings, or
            the loaded pretrained model (then no `args` / `overrides`).

        Raises:
            ValueError: an unknown name, a pretrained model of another class,
                arguments given with a pretrained model, or an LDA-started preset
                without ``topic_word_init=`` / ``documents=`` (one line each).

        Example (TCNLM ``small`` on the embedded Lee corpus, tiny sizes):
        >>> from tfktopic.data import TopicVocabulary, Vocabulary, load_corpus
        >>> from tfktopic.models import TCNLM
        >>> from tfktopic.tokenizer import Tokenizer
        >>> docs = load_corpus("lee")
        >>> lm_vocab = Vocabulary.build(docs, min_count=3)
        >>> tokenizer = Tokenizer(lm_vocab, TopicVocabulary.build(docs, lm_vocab,
        ...                                                       max_freq_fraction=0.005))
        >>> model = TCNLM.from_preset("small", tokenizer=tokenizer, documents=docs,
        ...                           num_topics=4, hidden_dim=8, embedding_dim=8,
        ...                           factor_dim=8, ntm_units=(8,))
        >>> model.vocab_size == tokenizer.vocab_size, model.tokenizer is tokenizer
        (True, True)
        >>> [len(topic) for topic in model.topics(3, weights=True)]
        [3, 3, 3, 3]
        >>> isinstance(model.generate("the storm", max_length=5, seed=0)[0], str)
        True
        >>> trained = TCNLM.from_preset("pretrained:tcnlm-apnews")    # doctest: +SKIP
        >>> trained.generate(topic=3, max_length=30)                    # doctest: +SKIP
        """
        shipped = cls._pretrained_name(preset)
        if shipped is not None:
            if args or overrides or tokenizer is not None or documents is not None:
                raise ValueError(f"{cls.__name__}.from_preset({str(preset)!r}): a pretrained "
                                 "model takes no constructor arguments, tokenizer or documents")
            return cls._load_pretrained(shipped)
        settings = cls._preset_settings(preset)
        if tokenizer is not None:
            overrides = {**cls._tokenizer_arguments(tokenizer, args, preset), **overrides}
        cls._check_settings(settings, overrides)      # before an LDA start reads documents
        overrides = cls._lda_start(settings, overrides, tokenizer, documents, preset)
        model = cls._from_settings(settings, args, overrides)
        if tokenizer is not None:
            model.tokenizer = tokenizer
        return model

    @classmethod
    def _pretrained_name(cls, preset):
        """The shipped model's name when `preset` names one (bare or ``pretrained:NAME``)
        and is not a preset of the family; else `None`."""
        if not isinstance(preset, str) or preset in cls.presets:
            return None
        shipped = preset[len("pretrained:"):] if preset.startswith("pretrained:") else preset
        if shipped in pretrained.available() or shipped in pretrained.REPLACED:
            return shipped                        # (a replaced name: `resolve` names its heir)
        return None

    @classmethod
    def _load_pretrained(cls, shipped):
        """The shipped model `shipped` with its tokenizer attached, checked to be a `cls`."""
        try:
            path = pretrained.resolve(shipped)
        except TfktopicError as error:
            raise ValueError(str(error)) from None
        # The class the file names (every family is registered by then: importing this
        # module imports `tfktopic.models`), checked before the weights are read.
        family = keras.saving.get_registered_object(_registered_name(path / "model.keras"))
        if family is not None and not issubclass(family, cls):
            raise ValueError(_other_class(shipped, family, cls))
        model = keras.saving.load_model(path / "model.keras")
        if not isinstance(model, cls):
            raise ValueError(_other_class(shipped, type(model), cls))
        model.tokenizer = Tokenizer.load(path)
        return model

    @classmethod
    def _preset_settings(cls, preset):
        """The ``model`` settings (a new dict) of a preset name or `Preset`.

        Raises:
            ValueError: an unknown name (the presets and pretrained models named).
        """
        if hasattr(preset, "model") and hasattr(preset, "training"):      # a Preset
            return dict(preset.model)
        if isinstance(preset, str) and preset in cls.presets:
            return dict(cls.presets[preset]["model"])
        raise ValueError(f"unknown preset {preset!r} for {cls.__name__}: preset must be one of "
                         f"its presets ({', '.join(sorted(cls.presets)) or 'none'}) or a "
                         f"pretrained model name "
                         f"({', '.join(sorted(pretrained.available())) or 'none'})")

    @classmethod
    def _check_settings(cls, settings, overrides):
        """Refuse settings the constructor would refuse, before any LDA is fitted (a
        family's check of what its constructor alone cannot see early; none here)."""

    @classmethod
    def _from_settings(cls, settings, args, overrides):
        """``cls(*args, **settings, **overrides)`` (rGBN-RNN also cuts per-layer lists)."""
        return cls(*args, **{**settings, **overrides})

    @classmethod
    def _tokenizer_arguments(cls, tokenizer, args, preset):
        """The constructor arguments `tokenizer` supplies (`_TOKENIZER_ARGUMENTS` that
        the constructor takes).

        Raises:
            ValueError: not a `Tokenizer`, positional arguments given as well, or a
                topic model's tokenizer without a topic vocabulary.
        """
        where = f"{cls.__name__}.from_preset({str(getattr(preset, 'name', preset))!r})"
        if not isinstance(tokenizer, Tokenizer):
            raise ValueError(f"{where}: tokenizer must be a tfktopic.tokenizer.Tokenizer, got "
                             f"{type(tokenizer).__name__}")
        if args:
            raise ValueError(f"{where}: with tokenizer= the vocabulary sizes come from it; "
                             "pass the other constructor arguments by keyword")
        taken = inspect.signature(cls.__init__).parameters
        names = [name for name in cls._TOKENIZER_ARGUMENTS if name in taken]
        if tokenizer.topic_vocab is None and set(names) & {"topic_vocab_size", "lm_to_topic"}:
            raise ValueError(f"{where}: the tokenizer has no topic vocabulary, which "
                             f"{cls.__name__} needs")
        return {name: cls._TOKENIZER_ARGUMENTS[name](tokenizer) for name in names}

    @classmethod
    def _lda_topics(cls, settings):
        """K of the LDA that starts the topic decoder (rGBN-RNN: K_1)."""
        return int(settings.get("num_topics", 50))

    @classmethod
    def _lda_start(cls, settings, overrides, tokenizer, documents, preset):
        """`overrides` with ``topic_word_init`` from an LDA fitted on `documents` when the
        settings start the topic decoder from an LDA and no matrix is given.

        Raises:
            ValueError: such a preset without ``topic_word_init=`` or ``documents=``, or
                `documents` without a tokenizer's topic vocabulary.
        """
        merged = {**settings, **overrides}
        where = f"{cls.__name__}.from_preset({str(getattr(preset, 'name', preset))!r})"
        if merged.get("decoder_init") != "lda" or merged.get("topic_word_init") is not None:
            if documents is not None:
                raise ValueError(f"{where}: documents= is only used to fit the LDA start of "
                                 "the topic decoder (decoder_init='lda' without "
                                 "topic_word_init)")
            return overrides
        if documents is None:
            raise ValueError(f"{where}: the preset starts the topic decoder from an LDA "
                             "(decoder_init='lda'): pass topic_word_init= (a [K, V_c] "
                             "topic-word matrix) or documents= (the tokenised training "
                             "documents, with tokenizer=)")

        lda = fit_lda(documents, cls._documents_vocabulary(tokenizer, preset),
                      num_topics=cls._lda_topics(merged),
                      passes=cls._preset_training(preset).get("lda_passes", LDA_PASSES),
                      seed=merged.get("seed") or 0)
        return {**overrides, "topic_word_init": lda.get_topics()}

    @classmethod
    def _preset_training(cls, preset):
        """The ``training`` settings of a preset name or `Preset` (else none)."""
        if hasattr(preset, "model") and hasattr(preset, "training"):
            return dict(preset.training)
        if isinstance(preset, str) and preset in cls.presets:
            return dict(cls.presets[preset].get("training", {}))
        return {}

    @classmethod
    def _documents_vocabulary(cls, tokenizer, preset):
        """The topic vocabulary that indexes an LDA of ``documents=`` (`tokenizer`'s).

        Raises:
            ValueError: no tokenizer with a topic vocabulary (one line).
        """
        if tokenizer is None or tokenizer.topic_vocab is None:
            raise ValueError(f"{cls.__name__}.from_preset("
                             f"{str(getattr(preset, 'name', preset))!r}): documents= needs "
                             "tokenizer= (its topic vocabulary indexes the LDA's words)")
        return tokenizer.topic_vocab

    # ------------------------------------------------------------------- topics
    def topic_word_matrix(self):
        """The topic-word weights, numpy ``[K, V_c]`` (larger = more typical word).

        Topic models override it; the rows need not be normalised (only their
        ranking is used by `topics`).
        """
        raise NotImplementedError(f"{type(self).__name__} has no topics")

    def topic_proportions(self, bow):
        """The document-topic vector of bags of words, at the posterior mean.

        Args:
            bow: float ``[B, V_c]`` topic-vocabulary counts.

        Returns:
            float ``[B, K]`` tensor (deterministic: no sampling, no dropout).
        """
        raise NotImplementedError(f"{type(self).__name__} has no topics")

    def topic_outputs(self, bow):
        """Everything a served model gives for bags of words (the export's
        ``topic_proportions`` signature): ``{"proportions": topic_proportions(bow)}``,
        plus model-specific entries (rGBN-RNN: ``theta_l`` of every layer)."""
        return {"proportions": self.topic_proportions(bow)}

    def topic_word_distribution(self, **options):
        """Each topic's word distribution, numpy ``[K, V_c]``, rows summing to 1.

        A nonnegative `topic_word_matrix` (TCNLM's beta, LDA+LSTM's LDA beta,
        rGBN-RNN's Phi^1 ... Phi^l) has its rows normalised; an unconstrained one
        (TopicRNN's B, whose row k is added to the logits of the topic words when
        theta = e_k, Dieng et al. eq. 4) is a softmax over each row.

        Args:
            **options: passed to `topic_word_matrix` (rGBN-RNN: ``layer``).
        """
        weights = np.asarray(self.topic_word_matrix(**options), np.float64)
        if (weights >= 0).all():
            return weights / np.maximum(weights.sum(axis=1, keepdims=True), 1e-300)
        shifted = np.exp(weights - weights.max(axis=1, keepdims=True))
        return shifted / shifted.sum(axis=1, keepdims=True)

    def topics(self, top_n=10, vocabulary=None, weights=False, **options):
        """The top words of every topic (rows of `topic_word_matrix`).

        Args:
            top_n: words per topic, 1 <= top_n <= V_c.
            vocabulary: optional `TopicVocabulary` (or list of the V_c topic words);
                default: the attached tokenizer's (``model.tokenizer``), if any.
            weights: also give each word's probability under the topic
                (`topic_word_distribution`: the normalised topic-word
                probabilities, decreasing along each list).
            **options: passed to `topic_word_matrix` (rGBN-RNN: ``layer``).

        Returns:
            int array ``[K, top_n]`` of topic-vocabulary ids (ties keep the
            lower id first), or K lists of words with a vocabulary; with
            `weights`, K lists of ``(word, probability)`` pairs (``(id,
            probability)`` without a vocabulary).

        Raises:
            ValueError: a model without topics, a bad `top_n`, or a vocabulary
                of the wrong size.
        """
        if not self.has_topics:
            raise ValueError(f"{type(self).__name__} has no topics")
        matrix = np.asarray(self.topic_word_matrix(**options))
        width = matrix.shape[1]
        if isinstance(top_n, bool) or not isinstance(top_n, (int, np.integer)) or \
                not 1 <= top_n <= width:
            raise ValueError(f"top_n must be an integer in [1, {width}] (the topic words), "
                             f"got {top_n!r}")
        ids = np.argsort(-matrix, axis=1, kind="stable")[:, :int(top_n)]
        if vocabulary is None:
            vocabulary = getattr(getattr(self, "tokenizer", None), "topic_vocab", None)
        if vocabulary is not None:
            size = len(getattr(vocabulary, "words", vocabulary))
            if size != width:
                raise ValueError(f"vocabulary has {size} words but the model's topic "
                                 f"vocabulary has {width}")
        words = ids if vocabulary is None else topic_words(vocabulary, ids)
        if not weights:
            return words
        probabilities = np.take_along_axis(self.topic_word_distribution(**options), ids, axis=1)
        return [[(word if vocabulary is not None else int(word), float(p))
                 for word, p in zip(row, row_p)] for row, row_p in zip(words, probabilities)]

    # ------------------------------------------------------------------ saving
    def save_assets(self, dir_path):
        """Keras saving: write the attached tokenizer's vocabularies (if any) into the
        ``.keras`` archive's assets, as keras-hub's tokenizers do."""
        tokenizer = getattr(self, "tokenizer", None)
        if tokenizer is not None:
            tokenizer.save(dir_path)

    def load_assets(self, dir_path):
        """Keras loading: attach the tokenizer saved by `save_assets` (none saved: none)."""
        if dir_path is not None and (pathlib.Path(dir_path) / LM_VOCAB_FILE).is_file():
            self.tokenizer = Tokenizer.load(dir_path)

    @staticmethod
    def _check_bow_width(bow, width):
        """`bow` as a float32 tensor, its last axis checked against `width`."""
        bow = ops.convert_to_tensor(bow, "float32")
        if bow.shape[-1] is not None and bow.shape[-1] != width:
            raise ValueError(f"context_bow has {bow.shape[-1]} columns but the model's topic "
                             f"vocabulary has topic_vocab_size={width} words")
        return bow
