"""Sentence windows with their topic contexts, document sequences, LM streams.

Sentence windows (reference tcnlm_and_evaluation.md §2.3, rgbn_rnn.md §5.4):
every sentence becomes ``[<bos>, w_1, ..., w_n, <eos>]``; a sentence of more
than `max_len` predicted tokens is cut into windows ``seq[k*L : (k+1)*L + 1]``
(one token of overlap provides the window's first input); input = window[:-1],
target = window[1:]. Every real token and ``<eos>`` is the target of exactly
one window, so a window *owns* the topic words among its targets.

Topic context of a window (a list of topic ids, turned into a bag of words by
the pipeline), under a named **protocol**:

* ``"preceding"`` -- the leak-free default: the topic words of the *preceding
  sentences* of the document only; no word of the current sentence (any of its
  windows) or of a later sentence.
* ``"all_other"`` -- the training context and the papers' evaluation protocol:
  the topic words of every other window of the document (TDLM removes only the
  current window). At evaluation it lets future text in; reports must say so.
* ``"none"`` -- an empty context for every window: the model scored without its
  topic information (an ablation; the difference from ``"preceding"`` is what the
  topic context is worth to it).

The context keeps `context_len` topic words (300 in TDLM / TCNLM / rGBN-RNN):
the first ones in document order (``truncate="first"``, as TDLM) or the most
recent (``truncate="last"``).
"""

import dataclasses

import numpy as np

__all__ = [
    "PROTOCOLS",
    "SentenceExamples",
    "DocumentSequences",
    "sentence_windows",
    "sentence_examples",
    "document_sequences",
    "document_examples",
    "stream_arrays",
    "bags_of_words",
]

PROTOCOLS = ("preceding", "all_other", "none")


def _check_protocol(protocol, truncate):
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")
    if truncate not in ("first", "last"):
        raise ValueError(f"truncate must be 'first' or 'last', got {truncate!r}")


def sentence_windows(token_ids, bos_id, eos_id, max_len=30):
    """Cut ``[<bos>] + ids + [<eos>]`` into windows of at most `max_len` targets.

    Args:
        token_ids: the sentence's LM ids.
        bos_id, eos_id: ids of ``<bos>`` and ``<eos>``.
        max_len: maximum number of predicted tokens per window (30).

    Returns:
        A list of int lists, each of length 2..max_len+1; consecutive windows
        overlap by one token; later windows start mid-sentence.

    Example:
    >>> sentence_windows([5, 6, 7], bos_id=1, eos_id=2, max_len=2)
    [[1, 5, 6], [6, 7, 2]]
    """
    if max_len < 1:
        raise ValueError(f"max_len must be >= 1, got {max_len}")
    sequence = [bos_id] + list(token_ids) + [eos_id]
    windows = [sequence[k:k + max_len + 1] for k in range(0, len(sequence) - 1, max_len)]
    return [w for w in windows if len(w) > 1]


def _document_windows(document, lm_vocab, topic_vocab, max_len):
    """Windows of one document with the topic ids each window owns."""
    windows, sentence_of, owned = [], [], []
    for s, sentence in enumerate(document):
        for window in sentence_windows(lm_vocab.encode(sentence), lm_vocab.bos_id,
                                       lm_vocab.eos_id, max_len):
            windows.append(window)
            sentence_of.append(s)
            owned.append(topic_vocab.topic_ids(window[1:]) if topic_vocab is not None
                         else np.zeros(0, np.int32))
    return windows, np.asarray(sentence_of, np.int64), owned


def _window_contexts(sentence_of, owned, protocol, context_len, truncate):
    """Topic-id context of every window of a document (see module docstring)."""
    sizes = np.array([len(o) for o in owned], dtype=np.int64)
    flat = np.concatenate(owned).astype(np.int32) if owned else np.zeros(0, np.int32)
    ends = np.cumsum(sizes)
    starts = ends - sizes
    if context_len is None:
        context_len = len(flat)
    contexts = []
    first = truncate == "first" or context_len == 0
    for w in range(len(owned)):
        if protocol == "all_other":
            # the kept part of flat[:start] + flat[end:], without building the whole
            # concatenation (a per-window copy of the document: quadratic in its length)
            before, after = flat[:starts[w]], flat[ends[w]:]
            if first:
                head = before[:context_len]
                context = np.concatenate([head, after[:context_len - len(head)]])
            else:
                tail = after[len(after) - min(len(after), context_len):]
                keep = context_len - len(tail)
                context = np.concatenate([before[len(before) - min(len(before), keep):], tail])
        elif protocol == "none":
            context = flat[:0]
        else:
            first_of_sentence = np.searchsorted(sentence_of, sentence_of[w], side="left")
            context = flat[:starts[first_of_sentence]]
            context = (context[:context_len] if first
                       else context[len(context) - min(len(context), context_len):])
        contexts.append(context)
    return contexts


def _pad_windows(windows, max_len):
    tokens = np.zeros((len(windows), max_len), np.int32)
    targets = np.zeros((len(windows), max_len), np.int32)
    lengths = np.zeros(len(windows), np.int32)
    for i, window in enumerate(windows):
        n = len(window) - 1
        tokens[i, :n] = window[:-1]
        targets[i, :n] = window[1:]
        lengths[i] = n
    return tokens, targets, lengths


def _ragged(contexts):
    lengths = np.array([len(c) for c in contexts], dtype=np.int64)
    splits = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    values = np.concatenate(contexts).astype(np.int32) if contexts else np.zeros(0, np.int32)
    return values, splits


@dataclasses.dataclass
class SentenceExamples:
    """Sentence windows of a corpus with their topic contexts (columnar).

    Attributes:
        tokens, targets: int32 [N, max_len] inputs and next-token targets,
            padded with ``<pad>`` = 0.
        lengths: int32 [N] number of real targets per window (the mask).
        context_values, context_splits: ragged topic-id contexts; window i's
            context is ``context_values[context_splits[i]:context_splits[i+1]]``.
        document_index, sentence_index: int64 [N] position of each window.
        protocol: the context protocol ("preceding" or "all_other").
        topic_vocab_size: size of the topic vocabulary (BoW width).
    """

    tokens: np.ndarray
    targets: np.ndarray
    lengths: np.ndarray
    context_values: np.ndarray
    context_splits: np.ndarray
    document_index: np.ndarray
    sentence_index: np.ndarray
    protocol: str
    topic_vocab_size: int

    def __len__(self):
        return len(self.lengths)

    @property
    def mask(self):
        """float32 [N, max_len]: 1 on real targets."""
        return (np.arange(self.tokens.shape[1])[None, :] < self.lengths[:, None]).astype(np.float32)

    @property
    def num_targets(self):
        """Number of predicted tokens (``<eos>`` included)."""
        return int(self.lengths.sum())

    @property
    def document_targets(self):
        """float32 [N]: predicted tokens of each window's *document* (all its windows).

        TopicRNN charges the KL of q(theta | context) once per document by
        weighting each window's KL by lengths / document_targets.
        """
        per_document = np.bincount(self.document_index, weights=self.lengths)
        return per_document[self.document_index].astype(np.float32)

    def context(self, i):
        """Topic ids of window `i`'s context."""
        return self.context_values[self.context_splits[i]:self.context_splits[i + 1]]

    def context_bow(self, i):
        """float32 [topic_vocab_size] bag of words of window `i`'s context."""
        return np.bincount(self.context(i), minlength=self.topic_vocab_size).astype(np.float32)


def sentence_examples(corpus, lm_vocab, topic_vocab=None, max_len=30, context_len=300,
                      protocol="preceding", truncate="first"):
    """Sentence-level LM examples with per-window topic contexts.

    Args:
        corpus: a `Corpus` (or list of documents).
        lm_vocab: the `Vocabulary`.
        topic_vocab: the `TopicVocabulary`, or `None` for no context.
        max_len: predicted tokens per window (30).
        context_len: topic words kept per context (300).
        protocol: "preceding" (leak-free, the default), "all_other" (training;
            at evaluation the papers' protocol, which lets future text in) or
            "none" (every context empty: an ablation).
        truncate: keep the "first" (TDLM) or the "last" `context_len` words.

    Returns:
        A `SentenceExamples`.

    Example:
    >>> from tfktopic.data import load_corpus, Vocabulary, TopicVocabulary
    >>> corpus = load_corpus("lee")
    >>> lm = Vocabulary.build(corpus, min_count=3)
    >>> examples = sentence_examples(corpus, lm, TopicVocabulary.build(corpus, lm))
    >>> examples.tokens.shape[1]
    30
    """
    _check_protocol(protocol, truncate)
    all_windows, contexts, doc_index, sent_index = [], [], [], []
    for d, document in enumerate(corpus):
        windows, sentence_of, owned = _document_windows(document, lm_vocab, topic_vocab, max_len)
        all_windows.extend(windows)
        contexts.extend(_window_contexts(sentence_of, owned, protocol, context_len, truncate))
        doc_index.extend([d] * len(windows))
        sent_index.extend(sentence_of.tolist())
    tokens, targets, lengths = _pad_windows(all_windows, max_len)
    values, splits = _ragged(contexts)
    return SentenceExamples(tokens, targets, lengths, values, splits,
                            np.asarray(doc_index, np.int64), np.asarray(sent_index, np.int64),
                            protocol, len(topic_vocab) if topic_vocab is not None else 0)


@dataclasses.dataclass
class DocumentSequences:
    """Documents as chunks of J windows (rGBN-RNN's sentence sequences).

    A document's windows are padded with empty windows to a multiple of J and
    cut into chunks of J (reference rgbn_rnn.md §5.5); each chunk is one
    example. Context j of a chunk follows the same protocol as
    `sentence_examples` over the *whole* document (it does not restart at a
    chunk boundary).

    Attributes:
        tokens, targets: int32 [M, J, max_len].
        lengths: int32 [M, J]; 0 for padding windows.
        context_values, context_splits: ragged contexts of the M*J windows in
            row-major order.
        document_index: int64 [M] document of each chunk.
        protocol, topic_vocab_size: as in `SentenceExamples`.
    """

    tokens: np.ndarray
    targets: np.ndarray
    lengths: np.ndarray
    context_values: np.ndarray
    context_splits: np.ndarray
    document_index: np.ndarray
    protocol: str
    topic_vocab_size: int

    def __len__(self):
        return len(self.lengths)

    @property
    def num_targets(self):
        return int(self.lengths.sum())

    @property
    def document_targets(self):
        """float32 [M, J]: predicted tokens of the document of each window (all
        chunks of the document), as `SentenceExamples.document_targets`."""
        per_document = np.bincount(self.document_index, weights=self.lengths.sum(axis=1))
        chunk_totals = per_document[self.document_index].astype(np.float32)
        return np.repeat(chunk_totals[:, None], self.lengths.shape[1], axis=1)

    def context(self, chunk, j):
        """Topic ids of the context of window `j` of `chunk`."""
        i = chunk * self.tokens.shape[1] + j
        return self.context_values[self.context_splits[i]:self.context_splits[i + 1]]


def document_sequences(corpus, lm_vocab, topic_vocab, sentences_per_chunk=8, max_len=30,
                       context_len=300, protocol="preceding", truncate="first"):
    """Documents as sequences of J sentence windows with per-window contexts.

    Args:
        corpus: a `Corpus`.
        lm_vocab, topic_vocab: the vocabularies.
        sentences_per_chunk: J (8 in rGBN-RNN).
        max_len, context_len, protocol, truncate: as in `sentence_examples`.

    Returns:
        A `DocumentSequences`.
    """
    _check_protocol(protocol, truncate)
    J = int(sentences_per_chunk)
    if J < 1:
        raise ValueError(f"sentences_per_chunk must be >= 1, got {sentences_per_chunk}")
    all_windows, contexts, doc_index = [], [], []
    for d, document in enumerate(corpus):
        windows, sentence_of, owned = _document_windows(document, lm_vocab, topic_vocab, max_len)
        window_contexts = _window_contexts(sentence_of, owned, protocol, context_len, truncate)
        padding = (-len(windows)) % J
        all_windows.extend(windows + [None] * padding)
        contexts.extend(window_contexts + [np.zeros(0, np.int32)] * padding)
        doc_index.extend([d] * ((len(windows) + padding) // J))
    real = [w if w is not None else [0] for w in all_windows]
    tokens, targets, lengths = _pad_windows(real, max_len)
    values, splits = _ragged(contexts)
    M = len(doc_index)
    return DocumentSequences(tokens.reshape(M, J, max_len), targets.reshape(M, J, max_len),
                             lengths.reshape(M, J), values, splits,
                             np.asarray(doc_index, np.int64), protocol, len(topic_vocab))


def document_examples(corpus, lm_vocab, topic_vocab, max_len=400, context_len=None):
    """Every document as one example: its token stream and its whole bag of words.

    The stream is ``[<bos>] + s_1 + [<eos>] + s_2 + [<eos>] + ...`` cut to its
    first `max_len` predicted tokens (one sequence per document, as TopicRNN's
    IMDB setup with reviews truncated at 400 tokens); the context is the topic
    words of the **whole** document (protocol ``"whole_document"``). This is
    the input of document features (TopicRNN's inference-network output and
    last RNN state) and of training on whole documents, where q(theta | X_c)
    sees the full document. It is *not* a leak-free perplexity protocol: the
    context contains the predicted words.

    Args:
        corpus: a `Corpus` (or list of documents).
        lm_vocab: the `Vocabulary`.
        topic_vocab: the `TopicVocabulary`.
        max_len: predicted tokens kept per document.
        context_len: keep only the first `context_len` topic words of the
            context (`None`: all).

    Returns:
        A `SentenceExamples` with one row per document (``sentence_index`` 0).

    Example:
    >>> from tfktopic.data import load_corpus, Vocabulary, TopicVocabulary
    >>> corpus = load_corpus("lee")
    >>> lm = Vocabulary.build(corpus, min_count=3)
    >>> examples = document_examples(corpus, lm, TopicVocabulary.build(corpus, lm), max_len=50)
    >>> len(examples) == len(corpus), examples.tokens.shape[1]
    (True, 50)
    """
    if max_len < 1:
        raise ValueError(f"max_len must be >= 1, got {max_len}")
    if context_len is not None and context_len < 0:
        raise ValueError(f"context_len must be >= 0 or None, got {context_len}")
    windows, contexts = [], []
    for document in corpus:
        stream = [lm_vocab.bos_id]
        for sentence in document:
            stream.extend(lm_vocab.encode(sentence))
            stream.append(lm_vocab.eos_id)
        windows.append(stream[:max_len + 1])
        context = topic_vocab.topic_ids(stream[1:])
        contexts.append(context if context_len is None else context[:context_len])
    tokens, targets, lengths = _pad_windows(windows, max_len)
    values, splits = _ragged(contexts)
    num = len(windows)
    return SentenceExamples(tokens, targets, lengths, values, splits,
                            np.arange(num, dtype=np.int64), np.zeros(num, np.int64),
                            "whole_document", len(topic_vocab))


def stream_arrays(corpus, lm_vocab, batch_size, num_steps):
    """Successive-minibatch LM arrays (Zaremba et al.'s PTB reader).

    The corpus is one stream of ids, every sentence followed by ``<eos>``;
    it is cut into `batch_size` parallel rows, and batch i holds columns
    ``[i*num_steps, (i+1)*num_steps)`` so that the state of row b at the end of
    batch i continues into batch i+1.

    Args:
        corpus: a `Corpus` (documents are concatenated in order).
        lm_vocab: the `Vocabulary`.
        batch_size: parallel rows B.
        num_steps: unrolled steps T.

    Returns:
        (inputs, targets): int32 arrays [num_batches, B, T].
    """
    if batch_size < 1 or num_steps < 1:
        raise ValueError(f"batch_size and num_steps must be >= 1, got {batch_size}, {num_steps}")
    ids = []
    for document in corpus:
        for sentence in document:
            ids.extend(lm_vocab.encode(sentence))
            ids.append(lm_vocab.eos_id)
    ids = np.asarray(ids, np.int32)
    batch_len = len(ids) // batch_size
    num_batches = (batch_len - 1) // num_steps
    if num_batches < 1:
        raise ValueError(
            f"a stream of {len(ids)} tokens is too short for batch_size={batch_size}, "
            f"num_steps={num_steps}"
        )
    data = ids[: batch_size * batch_len].reshape(batch_size, batch_len)
    span = num_batches * num_steps
    inputs = data[:, :span].reshape(batch_size, num_batches, num_steps).transpose(1, 0, 2)
    targets = data[:, 1:span + 1].reshape(batch_size, num_batches, num_steps).transpose(1, 0, 2)
    return np.ascontiguousarray(inputs), np.ascontiguousarray(targets)


def bags_of_words(values, splits, rows, width):
    """Dense bags of words of some rows of ragged ids.

    Args:
        values: int [n] the ids of every row, concatenated.
        splits: int [num_rows + 1] row r is ``values[splits[r]:splits[r + 1]]``.
        rows: int [R] the rows wanted.
        width: V_c, the bag's width (ids >= width are dropped, as by
            ``tf.math.bincount(maxlength=width)``).

    Returns:
        float32 [R, width] counts.
    """
    rows = np.asarray(rows, np.int64)
    starts = np.asarray(splits, np.int64)[rows]
    lengths = np.asarray(splits, np.int64)[rows + 1] - starts
    offsets = np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    ids = np.asarray(values, np.int64)[np.repeat(starts, lengths) + offsets]
    owner = np.repeat(np.arange(len(rows)), lengths)
    keep = (ids >= 0) & (ids < width)
    counts = np.bincount(owner[keep] * width + ids[keep], minlength=len(rows) * width)
    return counts.reshape(len(rows), width).astype(np.float32)
