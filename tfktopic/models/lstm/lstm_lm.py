"""LSTM language-model baselines: sentence-level and document-level.

* Sentence-level (the papers' "basic-LSTM"): every sentence window starts from
  a zero state; its `keras.layers.LSTM` layers run over the window by
  `HoistedLSTM`'s path on a CPU (`run_lstm`: the same values and gradients,
  1.34x the training tokens/s at the medium size on one thread).
* Document-level, **chunked**: the J windows of a document chunk ``[B, J, T]``
  are laid end to end and the hidden state is carried across its sentences
  (padding steps are masked, so the state passes through them unchanged); each
  chunk starts from a zero state. This is not the streamed baseline of Zheng,
  Vafa & Blei (*Revisiting Topic-Guided Language Models*, TMLR 2023), which
  carries the state through whole documents with truncated BPTT: that is
  `tfktopic.models.lstm.document_lstm.DocumentLSTMLanguageModel`.

Both follow the model contract of DESIGN.md §3: a dict batch in, next-token
logits out; `train_step` / `test_step` (`tfktopic.models.base`) report
``loss``, ``nll`` (mean per predicted token) and ``ppl``.
"""

import keras
from keras import ops

from tfktopic.evaluation.perplexity import gathered_token_nll
from tfktopic.layers.hoisted_lstm import run_lstm
from tfktopic.layers.initialization import (check_initialization, embedding_initializer,
                                            lstm_initializers, softmax_initializers)
from tfktopic.models.lstm import presets as lstm_presets
from tfktopic.models.base import TopicLanguageModel
from tfktopic.models.decoding import stacked_cell_step

__all__ = ["LSTMLanguageModel", "ResetStates", "CELLS", "PlainGeneration"]

CELLS = {"lstm": keras.layers.LSTM, "gru": keras.layers.GRU, "rnn": keras.layers.SimpleRNN}


class PlainGeneration:
    """`TopicLanguageModel.generate` for a language model without topics.

    Sentences from ``<bos>`` and a zero state (a document's first sentence for
    the streamed model; its carried states are not touched), one recurrent cell
    step at a time through the model's ``embedding``, `generation_cells` and
    ``softmax``; nothing to condition on.

    Example:
    >>> model = LSTMLanguageModel(len(lm_vocab), 64, 128)             # doctest: +SKIP
    >>> model.generate(3, max_len=20, method="top_k", seed=0, tokenizer=tokenizer)  # doctest: +SKIP
    """

    generates = True

    def generation_cells(self):
        """The recurrent cells, bottom first."""
        raise NotImplementedError

    def generation_conditioning(self, num_sentences, topic=None, context_bow=None, seed=None):
        """An empty [N, 0] tensor: one row per sentence, no topic.

        Raises:
            ValueError: a `topic` or `context_bow` was given.
        """
        if topic is not None or context_bow is not None:
            raise ValueError(f"{type(self).__name__} has no topics: generate without topic "
                             "or context_bow")
        return ops.zeros([int(num_sentences), 0])

    def initial_generation_state(self, num_sentences):
        return [[ops.convert_to_tensor(s) for s in cell.get_initial_state(num_sentences)]
                for cell in self.generation_cells()]

    def generation_step(self, token, state, conditioning):
        """log p(next token | previous tokens) [N, V] and the new state."""
        x, new_state = stacked_cell_step(self.generation_cells(), self.embedding(token), state)
        return ops.log_softmax(ops.cast(self.softmax(x), "float32"), axis=-1), new_state


@keras.saving.register_keras_serializable(package="tfktopic")
class LSTMLanguageModel(PlainGeneration, TopicLanguageModel):
    """A stacked LSTM language model trained on the masked token NLL.

    Args:
        vocab_size: LM vocabulary size (softmax width).
        embedding_dim: word embedding size.
        hidden_dim: LSTM units per layer.
        num_layers: stacked LSTM layers.
        dropout: Zaremba-style dropout on the embeddings, between layers and
            before the softmax (non-recurrent connections only).
        document_level: carry the state across the J sentences of a ``[B, J, T]``
            batch (document-level baseline) instead of restarting every window.
        stateful: carry the recurrent state from one batch to the next
            (Zaremba et al.'s "successive minibatches" over a `stream_dataset`;
            the batch size must stay fixed). Reset it with `reset_states()`
            or the `ResetStates` callback (every epoch and evaluation).
        cell: "lstm" (default), "gru" or "rnn" (a simple tanh RNN), all fused
            Keras recurrent layers (the char-level comparison of Gan et al.).
        embeddings: optional ``[vocab_size, embedding_dim]`` matrix (e.g. from
            `tfktopic.data.embeddings.embedding_matrix`) to initialise the
            embedding; it is saved with the weights, not in the config.
        initialization: "keras" (the Keras layers' defaults), "torch" (PyTorch's,
            as Zheng, Vafa & Blei's LSTM-LM), or a dict of parts
            (`tfktopic.layers.initialization`).

    Example:
    >>> model = LSTMLanguageModel(vocab_size=len(lm_vocab), embedding_dim=64,
    ...                           hidden_dim=128)                       # doctest: +SKIP
    >>> model.compile(optimizer="adam")                                 # doctest: +SKIP
    >>> model.fit(sentence_dataset(train_examples), epochs=5)           # doctest: +SKIP
    """

    presets = lstm_presets.PRESETS

    def __init__(self, vocab_size, embedding_dim=300, hidden_dim=600, num_layers=1, dropout=0.0,
                 document_level=False, embeddings=None, cell="lstm", stateful=False,
                 initialization="keras", **kwargs):
        super().__init__(**kwargs)
        for name, value in (("vocab_size", vocab_size), ("embedding_dim", embedding_dim),
                            ("hidden_dim", hidden_dim), ("num_layers", num_layers)):
            if int(value) < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        if cell not in CELLS:
            raise ValueError(f"cell must be one of {sorted(CELLS)}, got {cell!r}")
        self.cell = cell
        if stateful and document_level:
            raise ValueError("stateful=True carries the state across batches; it cannot be "
                             "combined with document_level=True")
        self.stateful = bool(stateful)
        self.vocab_size = int(vocab_size)
        self.embedding_dim = int(embedding_dim)
        self.hidden_dim = int(hidden_dim)
        self.num_layers = int(num_layers)
        self.dropout = float(dropout)
        self.document_level = bool(document_level)
        self.initialization = check_initialization(initialization)
        # The document-level baseline takes document chunks [B, J, T] (the trait).
        self.chunked = self.document_level
        self.embedding = keras.layers.Embedding(
            self.vocab_size, self.embedding_dim, mask_zero=self.document_level,
            weights=None if embeddings is None else [embeddings], name="embedding",
            embeddings_initializer=embedding_initializer(self.initialization),
            dtype=self.dtype_policy)
        self.lstms = [CELLS[cell](self.hidden_dim, return_sequences=True, stateful=self.stateful,
                                  name=f"{cell}_{i}", dtype=self.dtype_policy,
                                  **lstm_initializers(self.initialization, self.hidden_dim, cell))
                      for i in range(self.num_layers)]
        self.dropouts = [keras.layers.Dropout(self.dropout, dtype=self.dtype_policy)
                         for _ in range(self.num_layers + 1)]
        self.softmax = keras.layers.Dense(
            self.vocab_size, name="softmax", dtype=self.dtype_policy,
            **softmax_initializers(self.initialization, self.hidden_dim))

    def call(self, inputs, training=False, return_features=False):
        """Next-token logits [B, T, V] (document level: [B, J, T, V]).

        Args:
            inputs: the pipeline dict (``tokens``) or a token tensor.
            training: dropout on/off.
            return_features: return the softmax input ([..., T, H]: the top
                layer's output after dropout) instead of the logits; the
                objective applies the softmax at the predicted positions only.
        """
        tokens = inputs["tokens"] if isinstance(inputs, dict) else inputs
        if self.document_level:
            shape = ops.shape(tokens)
            tokens = ops.reshape(tokens, (shape[0], shape[1] * shape[2]))
        # The chunked variant masks padding (the state passes through it unchanged).
        mask = ops.not_equal(tokens, 0) if self.document_level else None
        x = self.dropouts[0](self.embedding(tokens), training=training)
        for lstm, dropout in zip(self.lstms, self.dropouts[1:]):
            x = dropout(run_lstm(lstm, x, training=training, mask=mask), training=training)
        if return_features:
            if not self.softmax.built:  # built here, as the full call does
                self.softmax.build(x.shape)
            return ops.reshape(x, (shape[0], shape[1], shape[2], ops.shape(x)[-1])) \
                if self.document_level else x
        logits = self.softmax(x)
        if self.document_level:
            logits = ops.reshape(logits, (shape[0], shape[1], shape[2], self.vocab_size))
        return logits

    def objective(self, data, training=False):
        """The mean token NLL of a batch (`TopicLanguageModel`'s contract).

        The softmax runs on the predicted positions only
        (`tfktopic.evaluation.perplexity.gathered_token_nll`): the same
        sums as `masked_token_nll` of the full logits ``self(data)``.

        Returns:
            dict: ``loss`` = nll_sum / num_tokens, ``units`` = num_tokens,
            ``nll_sum``, ``num_tokens``.
        """
        features = self(data, training=training, return_features=True)
        nll_sum, num_tokens = gathered_token_nll(self.softmax, features, data["targets"],
                                                 data["mask"])
        return {"loss": nll_sum / ops.maximum(num_tokens, 1.0), "units": num_tokens,
                "nll_sum": nll_sum, "num_tokens": num_tokens}

    def get_config(self):
        return {**super().get_config(), "vocab_size": self.vocab_size,
                "embedding_dim": self.embedding_dim, "hidden_dim": self.hidden_dim,
                "num_layers": self.num_layers, "dropout": self.dropout,
                "document_level": self.document_level, "cell": self.cell,
                "stateful": self.stateful, "initialization": self.initialization}

    def generation_cells(self):
        return [layer.cell for layer in self.lstms]

    def reset_states(self):
        """Zero the carried recurrent state (``stateful=True``)."""
        for layer in self.lstms:
            if layer.stateful and getattr(layer, "states", None) is not None:
                layer.reset_state()


class ResetStates(keras.callbacks.Callback):
    """Resets a stateful model at the start of every epoch and evaluation.

    Successive minibatches (Zaremba et al.) carry the state within one pass
    over a stream; each new pass (training epoch, validation, `evaluate`)
    starts from a zero state.
    """

    def on_epoch_begin(self, epoch, logs=None):
        self.model.reset_states()

    def on_test_begin(self, logs=None):
        self.model.reset_states()
