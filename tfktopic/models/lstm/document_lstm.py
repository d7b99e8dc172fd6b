"""The streamed document-level LSTM language model (Zheng, Vafa & Blei, TMLR 2023).

Zheng, Vafa & Blei's LSTM-LM baseline (``carolinazheng/revisiting-tglms``,
``models/lstm_lm.py`` / ``train.py``), DESIGN.md §5a: every document is one
token stream, cut into windows of 30 targets (truncated BPTT); the LSTM state
is carried from window to window within a document and zeroed at a document's
first window, in training, validation and test alike; a batch holds B parallel
document streams (`tfktopic.data.streams`). Zheng et al. found that none of
the published topic-guided LMs beats this baseline.

Unlike ``LSTMLanguageModel(document_level=True)`` (the *chunked* variant,
which restarts every J sentence windows in training), the state here is never
cut inside a document.

Inputs: batches of `tfktopic.data.streams.document_stream_dataset`: ``tokens``
/ ``targets`` int32 [B, T], ``mask`` float32 [B, T] and ``reset`` float32 [B]
(without ``reset`` the state is carried, as a stateful layer). ``call``
returns next-token logits [B, T, V]; ``train_step`` / ``test_step`` report
``loss``, ``nll`` (per predicted token) and ``ppl`` (DESIGN.md §3).
"""

import keras
from keras import ops

from tfktopic.data.streams import stream_examples
from tfktopic.evaluation.perplexity import evaluate_perplexity, gathered_token_nll
from tfktopic.layers.carried_state_lstm import CarriedStateLSTM
from tfktopic.layers.initialization import (check_initialization, embedding_initializer,
                                            softmax_initializers)
from tfktopic.models.lstm import presets as lstm_presets
from tfktopic.models.base import TopicLanguageModel
from tfktopic.models.lstm.lstm_lm import PlainGeneration

__all__ = ["DocumentLSTMLanguageModel", "stream_inputs", "score_stream_perplexity"]


def stream_inputs(inputs):
    """(tokens, reset) of a stream batch dict (reset zeros when absent) or a token tensor."""
    tokens = inputs["tokens"] if isinstance(inputs, dict) else inputs
    tokens = ops.cast(tokens, "int32")
    if isinstance(inputs, dict) and "reset" in inputs:
        reset = ops.cast(inputs["reset"], "float32")
    else:
        reset = ops.zeros((ops.shape(tokens)[0],), "float32")
    if len(tokens.shape) != 2:
        raise ValueError(f"streamed models take tokens [B, T] (one window of B streams), got "
                         f"shape {tuple(tokens.shape)}")
    return tokens, reset


@keras.saving.register_keras_serializable(package="tfktopic")
class DocumentLSTMLanguageModel(PlainGeneration, TopicLanguageModel):
    """LSTM language model over parallel document streams with a carried state.

    Args:
        vocab_size: LM vocabulary size (softmax width).
        embedding_dim: word embedding size.
        hidden_dim: LSTM units per layer.
        num_layers: stacked LSTM layers.
        dropout: dropout on the embeddings, between layers and before the
            softmax (non-recurrent connections only, as Zheng et al.).
        max_streams: the most parallel streams of a batch (the training
            batch size; evaluation batches may be smaller).
        embeddings: optional ``[vocab_size, embedding_dim]`` initial matrix
            (saved with the weights, not in the config).
        initialization: "keras" (the Keras layers' defaults), "torch" (Zheng
            et al.'s: embedding and softmax weights U(±0.1), the LSTM at
            PyTorch's defaults) or a dict per part, e.g. ``{"lstm": "torch"}``
            (`tfktopic.layers.initialization`).

    Example:
    >>> from tfktopic.data.streams import document_streams, document_stream_dataset, steps_per_epoch
    >>> streams = document_streams(train, lm_vocab)                       # doctest: +SKIP
    >>> model = DocumentLSTMLanguageModel(len(lm_vocab), 64, 128, max_streams=32)  # doctest: +SKIP
    >>> model.compile(optimizer="adam")                                   # doctest: +SKIP
    >>> model.fit(document_stream_dataset(streams, 32, shuffle=True), epochs=5,
    ...           steps_per_epoch=steps_per_epoch(streams, 32))           # doctest: +SKIP
    """

    #: Inputs are parallel document streams with a ``reset`` flag (`tfktopic.data.streams`).
    streamed = True
    presets = lstm_presets.PRESETS

    def __init__(self, vocab_size, embedding_dim=300, hidden_dim=600, num_layers=1, dropout=0.0,
                 max_streams=64, embeddings=None, initialization="keras", **kwargs):
        super().__init__(**kwargs)
        for name, value in (("vocab_size", vocab_size), ("embedding_dim", embedding_dim),
                            ("hidden_dim", hidden_dim)):
            if int(value) < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        self.vocab_size = int(vocab_size)
        self.embedding_dim = int(embedding_dim)
        self.hidden_dim = int(hidden_dim)
        self.num_layers = int(num_layers)
        self.max_streams = int(max_streams)
        self.dropout = float(dropout)
        self.initialization = check_initialization(initialization)
        self.embedding = keras.layers.Embedding(
            self.vocab_size, self.embedding_dim,
            embeddings_initializer=embedding_initializer(self.initialization),
            weights=None if embeddings is None else [embeddings], name="embedding",
            dtype=self.dtype_policy)
        self.embedding_dropout = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy)
        self.rnn = CarriedStateLSTM(self.hidden_dim, self.num_layers, self.max_streams,
                                    dropout=self.dropout, initialization=self.initialization,
                                    name="carried_lstm", dtype=self.dtype_policy)
        self.softmax = keras.layers.Dense(
            self.vocab_size, name="softmax", dtype=self.dtype_policy,
            **softmax_initializers(self.initialization, self.hidden_dim))
        self.build()

    def build(self, input_shape=None):
        """Create every weight (shapes follow from the constructor arguments)."""
        if self.built:
            return
        self.embedding.build((None, None))
        self.rnn.build((None, None, self.embedding_dim))
        self.softmax.build((None, None, self.hidden_dim))
        self.built = True

    def call(self, inputs, training=False, carry=True, return_features=False):
        """Next-token logits [B, T, V] of one window of B streams (state carried;
        ``carry=False``: every row from a zero state, the carried state untouched;
        `return_features`: the softmax input [B, T, H] instead of the logits)."""
        tokens, reset = stream_inputs(inputs)
        x = self.embedding_dropout(self.embedding(tokens), training=training)
        features = self.rnn(x, reset, training=training, carry=carry)
        return features if return_features else self.softmax(features)

    def objective(self, data, training=False):
        """The mean token NLL of a window batch (`TopicLanguageModel`'s contract), the
        softmax applied at the predicted positions only (`gathered_token_nll`:
        idle streams and the padding after a document's last window are skipped)."""
        features = self(data, training=training, return_features=True)
        nll_sum, num_tokens = gathered_token_nll(self.softmax, features, data["targets"],
                                                 data["mask"])
        return {"loss": nll_sum / ops.maximum(num_tokens, 1.0), "units": num_tokens,
                "nll_sum": nll_sum, "num_tokens": num_tokens}

    def generation_cells(self):
        return [lstm.cell for lstm in self.rnn.lstms]

    def reset_states(self):
        """Zero the carried states (training and evaluation)."""
        self.rnn.reset_states()

    def get_config(self):
        return {**super().get_config(), "vocab_size": self.vocab_size,
                "embedding_dim": self.embedding_dim, "hidden_dim": self.hidden_dim,
                "num_layers": self.num_layers, "dropout": self.dropout,
                "max_streams": self.max_streams, "initialization": self.initialization}


def score_stream_perplexity(model, corpus, lm_vocab, topic_vocab=None, bptt=30, batch_size=None,
                            context_len=None):
    """Streamed document-level perplexity of a corpus part (validation and test alike).

    One pass in the fixed evaluation order; every target of every document
    scored once, the state carried within a document and zeroed at its start;
    a model with topics (``context_bow`` input, i.e. `DocumentTopicRNN`) gets
    the leak-free ``"preceding"`` contexts.

    Args:
        model: a `DocumentLSTMLanguageModel` or `DocumentTopicRNN`.
        corpus: a `Corpus` (part).
        lm_vocab, topic_vocab: the run's vocabularies (`topic_vocab` for a
            topic model).
        bptt: targets per window (30, as in training).
        batch_size: parallel streams (default and maximum: ``model.max_streams``;
            smaller batches waste fewer idle slots behind a very long document).
        context_len: topic words kept per context (`None`: all).

    Returns:
        (PerplexityResult, DocumentStreams).

    Example:
    >>> result, _ = score_stream_perplexity(model, parts["test"], lm_vocab)  # doctest: +SKIP
    >>> result.perplexity                                                  # doctest: +SKIP
    """
    batch_size = int(model.max_streams if batch_size is None else batch_size)
    if not 1 <= batch_size <= model.max_streams:
        raise ValueError(f"batch_size must be in [1, max_streams={model.max_streams}], "
                         f"got {batch_size}")
    topical = hasattr(model, "encoder")
    if topical and topic_vocab is None:
        raise ValueError("a topic model needs topic_vocab for its contexts")
    from_logits = not topical  # DocumentTopicRNN returns log-probabilities
    dataset, _, streams = stream_examples(
        corpus, lm_vocab, topic_vocab, bptt=bptt, batch_size=batch_size,
        context="preceding" if topical else None, context_len=context_len)
    label = ("document-level streamed: state carried over each document, windows of "
             f"{bptt}" + ("; topic context from the preceding text only" if topical else ""))
    return evaluate_perplexity(model, dataset, from_logits=from_logits, protocol=label), streams
