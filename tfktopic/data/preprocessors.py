"""What a model is fed: one preprocessor per data kind (corpus -> model inputs).

Each model states its data kind (`tfktopic.models.registry.ModelEntry.data_kind`):

* ``"windows"``: sentence windows ``[B, T]`` of at most ``max_len`` targets, each
  with the topic bag of words of its context (leak-free "preceding" sentences
  for scoring, "all_other" in training by default): the sentence LSTM, LDA+LSTM,
  TopicRNN, TCNLM.
* ``"chunks"``: document chunks ``[B, J, T]`` of J consecutive windows
  (``sentences_per_chunk``), the state carried within a chunk: rGBN-RNN,
  GBN-RNN and the chunked document LSTM (which is scored with one chunk per
  whole document and counts its batch in windows).
* ``"streams"``: parallel document streams cut into windows of ``bptt``
  targets, the state carried from window to window through each document
  (Zheng et al.): the streamed document LSTM and TopicRNN.

A preprocessor builds a corpus part's examples, makes their batches (tf.data
under TensorFlow, a numpy `keras.utils.PyDataset` under another backend, as
`tfktopic.data.batches`), counts the batches of an epoch, scores perplexity
with the model's protocol and labels that protocol. Training, evaluation and
`tfktopic.runs` use it through ``registry.get(name).preprocessor()``.

Holding a `tfktopic.tokenizer.Tokenizer`, it is also generation's text side
(keras-hub's ``generate_preprocess`` / ``generate_postprocess``): prompt and
context text -> the ids and bag of words `generate` feeds, generated ids ->
readable text. A model reaches it as ``model.preprocessor`` (its data kind,
with the attached ``model.tokenizer``).

Example:
>>> from tfktopic.data.preprocessors import WindowPreprocessor
>>> pre = WindowPreprocessor(topical=True)
>>> pre.kind, pre.unit, pre.protocol_label("preceding")
('windows', 'windows', 'preceding')
>>> WindowPreprocessor().protocol_label("preceding")
'sentence-level, no topic context'
"""

import dataclasses

import numpy as np

from tfktopic.tokenizer import detokenize

__all__ = ["Preprocessor", "WindowPreprocessor", "ChunkPreprocessor", "StreamPreprocessor",
           "StreamExamples", "KINDS", "for_kind", "WINDOW_TRAIN_CONTEXTS", "sentence_windows"]

#: The training contexts of the sentence-window and chunk models (`Preprocessor.train_protocol`).
WINDOW_TRAIN_CONTEXTS = ("all_other", "preceding")


@dataclasses.dataclass
class StreamExamples:
    """A corpus part as document streams, with how they are cut (streamed models).

    Attributes:
        streams: `tfktopic.data.streams.DocumentStreams` (one per document).
        bptt: targets per window.
        context: topic context of each window (`None` for the LSTM; one of
            `tfktopic.data.streams.CONTEXTS` for the streamed TopicRNN).
        context_len: topic words kept per context.
    """

    streams: object
    bptt: int = 30
    context: str = None
    context_len: int = None

    def __len__(self):
        return len(self.streams)

    @property
    def num_targets(self):
        return self.streams.num_targets


def _pipelines():
    """(document_dataset, sentence_dataset): tf.data under TensorFlow, else numpy batches."""
    from tfktopic import backend

    if backend.is_tensorflow():
        from tfktopic.data.pipeline import document_dataset, sentence_dataset
    else:  # numpy batches (keras.utils.PyDataset): no tf.data outside TensorFlow
        from tfktopic.data.batches import DocumentBatches as document_dataset
        from tfktopic.data.batches import SentenceBatches as sentence_dataset
    return document_dataset, sentence_dataset


def sentence_windows(corpus, lm_vocab, topic_vocab, data, protocol="preceding"):
    """The sentence windows of a corpus part: the targets every model predicts.

    The unigram baseline and the OOV rate are computed on them, whatever the
    model's data kind.

    Args:
        corpus: a `Corpus` (part).
        lm_vocab, topic_vocab: the run's vocabularies.
        data: data settings (``max_len``, ``context_len``).
        protocol: the topic context ("preceding", "all_other", "none").

    Returns:
        `tfktopic.data.SentenceExamples`.
    """
    from tfktopic.data import sentence_examples

    return sentence_examples(corpus, lm_vocab, topic_vocab, max_len=int(data["max_len"]),
                             context_len=int(data["context_len"]), protocol=protocol)


class Preprocessor:
    """Corpus part -> a model's examples, batches, perplexity and protocol label;
    text <-> ids of generation.

    Args:
        topical: the model reads a topic context (a topic model).
        name: the model's name, for messages.
        tokenizer: a `tfktopic.tokenizer.Tokenizer` for generation's text, or
            `None` (ids and bags of words only).

    Attributes:
        kind: the data kind ("windows", "chunks", "streams").
        unit: what one example is ("windows", "chunks", "documents").
    """

    kind = None
    unit = None

    def __init__(self, topical=False, name=None, tokenizer=None):
        self.topical = bool(topical)
        self.name = name or f"a {self.kind} model"
        self.tokenizer = tokenizer

    def __repr__(self):
        return f"{type(self).__name__}(topical={self.topical}, name={self.name!r})"

    # ---------------------------------------------------------------- generation
    def generate_preprocess(self, prompt=None, context_bow=None):
        """Text -> what `TopicLanguageModel.generate` feeds (ids and arrays pass through).

        Args:
            prompt: `None`, LM ids ([P] or [N, P], returned as given), or text:
                its LM ids, the final ``<eos>`` dropped (the sentence goes on).
            context_bow: `None`, a bag of words ([V_c] or [N, V_c], returned as
                given), or text: its topic bag of words (`Tokenizer.bow`).

        Returns:
            dict with ``prompt`` (int64 [P] ids of a text prompt, else the
            argument) and ``context_bow`` (float32 [V_c] of a text context,
            else the argument).

        Raises:
            ValueError: text without a tokenizer (the argument named).

        Example:
        >>> from tfktopic.data import TopicVocabulary, Vocabulary
        >>> docs = [[["the", "storm", "hit", "the", "coast"], ["rain", "fell"]]]
        >>> lm = Vocabulary.build(docs, min_count=1)
        >>> from tfktopic.tokenizer import Tokenizer
        >>> tokenizer = Tokenizer(lm, TopicVocabulary.build(docs, lm, stopwords="none",
        ...                                                 max_freq_fraction=0.0))
        >>> pre = WindowPreprocessor(topical=True, tokenizer=tokenizer)
        >>> inputs = pre.generate_preprocess("The storm", context_bow="rain, rain")
        >>> tokenizer.decode(inputs["prompt"]), int(inputs["context_bow"].sum())
        ('the storm', 2)
        """
        if isinstance(prompt, str):
            ids = self._text_tokenizer("prompt", "attach a tokenizer (model.tokenizer, or "
                                       "from_preset of a pretrained model) or pass LM ids"
                                       ).encode(prompt)
            eos = self.tokenizer.lm_vocab.eos_id
            prompt = np.asarray(ids[:-1] if ids and ids[-1] == eos else ids, np.int64)
        if isinstance(context_bow, str):
            context_bow = self._text_tokenizer("context_bow", "pass the tokenizer to turn it "
                                               "into a bag of words").bow(context_bow)
        return {"prompt": prompt, "context_bow": context_bow}

    def generate_postprocess(self, ids):
        """Generated LM ids -> readable text, one string per row.

        Each row is decoded up to its first ``<eos>`` (`Tokenizer.decode_batch`)
        and detokenised (`tfktopic.tokenizer.detokenize`: punctuation and
        clitics joined to the word before them).

        Args:
            ids: int [N, T] LM ids (`generate`'s output), or one row [T].

        Returns:
            A list of N strings.

        Raises:
            ValueError: no tokenizer (one line).

        Example:
        >>> from tfktopic.data import Vocabulary
        >>> from tfktopic.tokenizer import Tokenizer
        >>> pre = WindowPreprocessor(tokenizer=Tokenizer(Vocabulary.build(
        ...     [[["it", "'s", "over", "."]]], min_count=1)))
        >>> pre.generate_postprocess(pre.tokenizer.encode("It's over.") + [0, 0])
        ["it's over."]
        """
        if self.tokenizer is None:
            raise ValueError("generate_postprocess: ids -> text needs a tokenizer (attach one: "
                             "model.tokenizer, or generate(..., tokenizer=...))")
        return [detokenize(text) for text in self.tokenizer.decode_batch(ids)]

    def _text_tokenizer(self, argument, remedy):
        """The tokenizer, or a one-line error naming the `argument` whose text needs it."""
        if self.tokenizer is None:
            raise ValueError(f"{argument} is text: {remedy}")
        return self.tokenizer

    # ------------------------------------------------------------------- settings
    def train_protocol(self, data):
        """The training context, the data setting ``train_context``.

        "all_other" (the default: every other sentence of the document, as the
        papers trained) or "preceding" (the preceding sentences only, as every
        model is scored); a model without topics builds no context ("all_other").

        Args:
            data: the run's data settings.

        Returns:
            The context name.

        Raises:
            ValueError: a context the model's examples cannot be built with (named).
        """
        context = str(data.get("train_context", "all_other"))
        if not self.topical:      # no topic context is built
            return "all_other"
        if context not in WINDOW_TRAIN_CONTEXTS:
            raise ValueError(f"train_context: {self.name} trains with one of "
                             f"{', '.join(WINDOW_TRAIN_CONTEXTS)} (got {context!r}; "
                             "\"whole_document\" is for the streamed models)")
        return context

    def shares_examples(self, other):
        """Whether `other`'s examples serve this preprocessor unchanged (`RunData.for_model`)."""
        return self.kind == other.kind and self.kind != "streams"

    # -------------------------------------------------------------- examples, batches
    def examples(self, corpus, lm_vocab, topic_vocab, data, protocol="preceding",
                 whole_documents=False):
        """The examples of a corpus part.

        Args:
            corpus: a `Corpus` (part).
            lm_vocab, topic_vocab: the run's vocabularies.
            data: data settings (``max_len``, ``context_len``, ``sentences_per_chunk``,
                ``bptt``).
            protocol: "preceding" (leak-free), "all_other" (training; the papers'
                evaluation protocol) or "none" (empty contexts: an ablation).
            whole_documents: chunks: one chunk per document.

        Returns:
            `SentenceExamples`, `DocumentSequences` or `StreamExamples`.
        """
        raise NotImplementedError

    def dataset(self, examples, batch_size, shuffle=False, seed=0, drop_remainder=False,
                initial_epoch=0):
        """The batches of `examples` (tf.data, or numpy `PyDataset` outside TensorFlow).

        Args:
            examples: from `examples`.
            batch_size: the run's batch size.
            shuffle, seed: shuffle the examples with a seed.
            drop_remainder: fixed-shape batches (timing).
            initial_epoch: streams: the epoch an endless shuffled stream starts at.

        Returns:
            A dataset of ``(inputs, targets)`` batches.
        """
        raise NotImplementedError

    def steps(self, examples, batch_size, drop_remainder=False, training=False):
        """Batches of one epoch of `examples` (`training`: the streamed training epoch)."""
        rows = len(examples)
        batch_size = self._batch_rows(examples, batch_size)
        return rows // batch_size if drop_remainder else -(-rows // batch_size)

    def _batch_rows(self, examples, batch_size):
        return int(batch_size)

    # ------------------------------------------------------------------- scoring
    def protocol_label(self, protocol, data=None):
        """The protocol label recorded with a perplexity."""
        return protocol

    def perplexity_message(self, result):
        """The line printed with a test perplexity, naming its protocol."""
        if result.protocol == "preceding":
            how = "leak-free: topic context from preceding sentences only"
        elif result.protocol == "none":
            how = "no topic context: every sentence scored with an empty context (an ablation)"
        else:
            how = ("all_other: the papers' protocol, context = all other sentences; lets future "
                   "text in")
        return self._message(how, result)

    @staticmethod
    def _message(how, result):
        return f"test perplexity ({how}): {result.perplexity:.2f} over {result.num_tokens} tokens"

    def _scoring_examples(self, part, lm_vocab, topic_vocab, data, protocol, whole_documents):
        return self.examples(part, lm_vocab, topic_vocab, data, protocol=protocol,
                             whole_documents=bool(whole_documents))

    def _scoring_batches(self, model, part, examples, batch_size):
        return int(batch_size), (len(part), examples.document_index)

    def score_perplexity(self, model, part, lm_vocab, topic_vocab, data, protocol="preceding",
                         batch_size=64, whole_documents=None):
        """Perplexity of `model` on a corpus part (the one scoring of train and evaluate).

        Args:
            model: the Keras model.
            part: the `Corpus` part to score.
            lm_vocab, topic_vocab, data: the run's vocabularies and data settings.
            protocol: "preceding" (leak-free), "all_other" (the papers') or "none".
            batch_size: evaluation batch size (does not change the value).
            whole_documents: chunks: one chunk per document (default: the
                preprocessor's own scoring).

        Returns:
            (PerplexityResult with per-document sums ``document_nll`` /
            ``document_tokens`` over the documents of `part`, examples).
        """
        from tfktopic.evaluation import evaluate_perplexity

        examples = self._scoring_examples(part, lm_vocab, topic_vocab, data, protocol,
                                          whole_documents)
        batch_size, documents = self._scoring_batches(model, part, examples, batch_size)
        dataset = self.dataset(examples, batch_size, shuffle=False)
        # The streamed TopicRNN returns normalised log-probabilities (l_t marginalised); the
        # log-softmax of `from_logits` leaves them unchanged, so every model is scored alike.
        result = evaluate_perplexity(model, dataset, documents=documents,
                                     protocol=self.protocol_label(protocol, data))
        return result, examples


class WindowPreprocessor(Preprocessor):
    """Sentence windows ``[B, T]`` with leak-free topic contexts.

    Args:
        topical: the model reads the context's topic bag of words.
        document_targets: batches carry the context's bag of words as targets
            too (TopicRNN's ``doc_targets``).
        name: the model's name, for messages.
        tokenizer: a `tfktopic.tokenizer.Tokenizer` for generation's text, or `None`.

    Example:
    >>> WindowPreprocessor(topical=True, document_targets=True).kind
    'windows'
    """

    kind = "windows"
    unit = "windows"

    def __init__(self, topical=False, document_targets=False, name=None, tokenizer=None):
        super().__init__(topical, name, tokenizer)
        self.document_targets = bool(document_targets)

    def examples(self, corpus, lm_vocab, topic_vocab, data, protocol="preceding",
                 whole_documents=False):
        return sentence_windows(corpus, lm_vocab, topic_vocab, data, protocol)

    def dataset(self, examples, batch_size, shuffle=False, seed=0, drop_remainder=False,
                initial_epoch=0):
        _, sentence_dataset = _pipelines()
        return sentence_dataset(examples, batch_size=int(batch_size), shuffle=shuffle, seed=seed,
                                drop_remainder=drop_remainder,
                                document_targets=self.document_targets)

    def protocol_label(self, protocol, data=None):
        return protocol if self.topical else "sentence-level, no topic context"

    def perplexity_message(self, result):
        if not self.topical:
            return self._message("sentence-level, zero state per sentence window", result)
        return super().perplexity_message(result)


def _windows_per_document(corpus, max_len):
    """Sentence windows of each document (as `sentence_windows` cuts them)."""
    return [sum(-(-(len(sentence) + 1) // max_len) for sentence in document)
            for document in corpus]


class ChunkPreprocessor(Preprocessor):
    """Document chunks ``[B, J, T]`` of J consecutive sentence windows.

    Args:
        topical: the model reads the chunks' topic bags of words (rGBN / GBN).
        whole_documents: the document-level LSTM: the batch size counts sentence
            windows (``batch_size // J`` chunks), and scoring uses one chunk per
            whole document so the state is carried across it.
        name: the model's name, for messages.
        tokenizer: a `tfktopic.tokenizer.Tokenizer` for generation's text, or `None`.

    Example:
    >>> ChunkPreprocessor(whole_documents=True).unit
    'chunks'
    """

    kind = "chunks"
    unit = "chunks"

    def __init__(self, topical=False, whole_documents=False, name=None, tokenizer=None):
        super().__init__(topical, name, tokenizer)
        self.whole_documents = bool(whole_documents)

    def examples(self, corpus, lm_vocab, topic_vocab, data, protocol="preceding",
                 whole_documents=False):
        from tfktopic.data import document_sequences

        max_len, context_len = int(data["max_len"]), int(data["context_len"])
        J = int(data["sentences_per_chunk"])
        if whole_documents:
            J = max(_windows_per_document(corpus, max_len) + [1])
        return document_sequences(corpus, lm_vocab, topic_vocab, J, max_len, context_len,
                                  protocol=protocol)

    def _batch_rows(self, examples, batch_size):
        if self.whole_documents:
            # batch_size counts sentence windows, as for the sentence-level LSTM.
            return max(1, int(batch_size) // examples.tokens.shape[1])
        return int(batch_size)

    def dataset(self, examples, batch_size, shuffle=False, seed=0, drop_remainder=False,
                initial_epoch=0):
        document_dataset, _ = _pipelines()
        return document_dataset(examples, batch_size=self._batch_rows(examples, batch_size),
                                shuffle=shuffle, seed=seed, drop_remainder=drop_remainder)

    def _scoring_examples(self, part, lm_vocab, topic_vocab, data, protocol, whole_documents):
        if whole_documents is None:
            whole_documents = self.whole_documents
        return super()._scoring_examples(part, lm_vocab, topic_vocab, data, protocol,
                                         whole_documents)

    def protocol_label(self, protocol, data=None):
        if self.whole_documents:
            return ("document-level, chunked: trained on 8-sentence chunks from a zero state, "
                    "scored with the state carried across each whole document")
        return protocol

    def perplexity_message(self, result):
        if self.whole_documents:
            return self._message("document-level, chunked in training (zero state per "
                                 "8-sentence chunk), state carried across each whole test "
                                 "document", result)
        return super().perplexity_message(result)


class StreamPreprocessor(Preprocessor):
    """Parallel document streams cut into windows of ``bptt`` targets (state carried).

    Args:
        topical: the model reads a topic context per window (one of
            `tfktopic.data.streams.CONTEXTS`, including Zheng et al.'s
            "whole_document").
        name: the model's name, for messages.
        tokenizer: a `tfktopic.tokenizer.Tokenizer` for generation's text, or `None`.

    Example:
    >>> StreamPreprocessor().protocol_label("preceding", {"bptt": 30})[:33]
    'document-level, streamed: state c'
    """

    kind = "streams"
    unit = "documents"

    def train_protocol(self, data):
        return str(data.get("train_context", "all_other"))

    def examples(self, corpus, lm_vocab, topic_vocab, data, protocol="preceding",
                 whole_documents=False):
        from tfktopic.data.streams import CONTEXTS, document_streams

        if self.topical and protocol not in CONTEXTS:
            raise ValueError(f"{self.name}: the context must be one of {CONTEXTS}, got "
                             f"{protocol!r}")
        streams = document_streams(corpus, lm_vocab, topic_vocab if self.topical else None)
        return StreamExamples(streams, int(data.get("bptt", 30)),
                              protocol if self.topical else None,
                              int(data["context_len"]) if self.topical else None)

    def dataset(self, examples, batch_size, shuffle=False, seed=0, drop_remainder=False,
                initial_epoch=0):
        from tfktopic.data.streams import document_stream_dataset

        return document_stream_dataset(examples.streams, int(batch_size), examples.bptt,
                                       shuffle=shuffle, seed=seed, initial_epoch=initial_epoch,
                                       context=examples.context,
                                       context_len=examples.context_len)

    def steps(self, examples, batch_size, drop_remainder=False, training=False):
        from tfktopic.data.streams import num_batches, steps_per_epoch

        if training:
            return steps_per_epoch(examples.streams, int(batch_size), examples.bptt)
        return num_batches(examples.streams, int(batch_size), examples.bptt)

    def _scoring_batches(self, model, part, examples, batch_size):
        return min(int(batch_size), int(model.max_streams)), len(part)

    @staticmethod
    def _label(data):
        return (f"document-level, streamed: state carried through each document, truncated BPTT "
                f"of {int((data or {}).get('bptt', 30))} targets")

    def protocol_label(self, protocol, data=None):
        if self.topical:
            return f"{self._label(data)}; topic context {protocol}"
        return self._label(data)

    def perplexity_message(self, result):
        return self._message(result.protocol, result)


#: Data kind -> preprocessor class.
KINDS = {cls.kind: cls for cls in (WindowPreprocessor, ChunkPreprocessor, StreamPreprocessor)}


def for_kind(kind, **flags):
    """The preprocessor of a data kind (`KINDS`) with the model's flags.

    Raises:
        ValueError: an unknown kind (named).
    """
    if kind not in KINDS:
        raise ValueError(f"unknown data kind {kind!r}; choose from {', '.join(KINDS)}")
    return KINDS[kind](**flags)
