"""Documents as token streams, cut into truncated-BPTT windows of parallel streams.

The streamed document-level protocol of Zheng, Vafa & Blei, *Revisiting
Topic-Guided Language Models* (TMLR 2023; ``carolinazheng/revisiting-tglms``,
``data.py`` / ``train.py``), DESIGN.md §5a:

* every document is **one token stream**
  ``[<bos>] + s_1 + [<eos>] + s_2 + [<eos>] + ... + s_n + [<eos>]``: inputs are
  ``stream[:-1]``, targets ``stream[1:]``. The targets are exactly those of the
  sentence-level windows (`tfktopic.data.contexts.sentence_windows`: every
  word and one ``<eos>`` per sentence); only the *inputs* differ, since the
  first word of sentence j > 1 is predicted after the ``<eos>`` of sentence
  j - 1 (with the state of the whole document so far) instead of after a
  fresh ``<bos>`` from a zero state;
* a stream is cut into windows of `bptt` (30) consecutive targets; a
  recurrent model carries its state from one window to the next of the same
  document and zeroes it at a document's first window (the batch's ``reset``
  flag), in training and evaluation alike;
* a batch holds B parallel **slots**; when a slot's document ends, the next
  document of the order starts in that slot at the next batch, with
  ``reset = 1``. Windows are aligned to document starts: a document's last
  window is padded (mask 0), never shared with the next document.

Orders:

* training (`document_stream_dataset(..., shuffle=True)`): an endless stream
  over the documents in the orders perm(seed, 0), perm(seed, 1), ...
  (`numpy.random.default_rng((seed, epoch))`), one permutation after the
  other, so no slot ever idles; an "epoch" is `steps_per_epoch` batches
  (about one pass; documents straddle epoch boundaries) and the model keeps
  its training state across epochs (and across evaluations, which use their
  own state). ``initial_epoch`` restarts the same stream at epoch e.
* evaluation (``shuffle=False``): one pass in a fixed order (longest document
  first, a deterministic schedule that keeps the last batches short); slots
  without a document idle (mask 0, ``reset = 1``).

Differences from Zheng et al. (deliberate): they drop the ``<eos>`` between
sentences (sentence tabs become spaces, one ``<eos>`` per document), which
would change the target set; they cut the *concatenated* corpus into B
contiguous columns (a column starts mid-document from a zero state) and do not
shuffle; they evaluate with B = 1 and, through ``elif is_last:`` on a list,
drop the last target of every window. Here every target is scored once.

Topic contexts (the streamed TopicRNN): for the window whose targets are
``stream[p+1 : p+n+1]`` the context is the bag of topic words of

* ``"preceding"`` -- ``stream[1 : p+1]``: all the document's text before the
  window's first target, i.e. the targets of its earlier windows (the
  leak-free protocol, for evaluation; Zheng et al.'s ``cum_bows`` count the
  earlier windows' *inputs*, one token less);
* ``"all_other"`` -- every target of the document except the window's own
  (the project's training context);
* ``"whole_document"`` -- every target of the document (Zheng et al.'s
  training context ``all_bows``, which contains the predicted words);
* ``"none"`` -- no topic word (an ablation: the model without its topic context).

Example:
>>> from tfktopic.data import load_corpus, Vocabulary
>>> corpus = load_corpus("lee")
>>> streams = document_streams(corpus, Vocabulary.build(corpus, min_count=3))
>>> batch = next(stream_batches(streams, batch_size=4, bptt=30))
>>> batch["tokens"].shape, batch["reset"].tolist()
((4, 30), [1.0, 1.0, 1.0, 1.0])
"""

import dataclasses

import numpy as np

from tfktopic import backend
from tfktopic.data.pipeline import prefetched

__all__ = [
    "CONTEXTS",
    "DocumentStreams",
    "document_streams",
    "evaluation_order",
    "training_order",
    "stream_batches",
    "num_batches",
    "steps_per_epoch",
    "document_stream_dataset",
    "stream_batch_dataset",
    "stream_topics",
    "stream_examples",
]

CONTEXTS = ("preceding", "all_other", "whole_document", "none")


@dataclasses.dataclass
class DocumentStreams:
    """The token streams of a corpus part (one per document).

    Attributes:
        streams: list of int32 arrays, ``[<bos>] + s_1 + [<eos>] + ...``; a
            document without sentences has the stream ``[<bos>]`` (no target).
        topic_ids: `None`, or per document the int32 topic ids of its topic
            words among the targets ``stream[1:]``, in order.
        topic_counts: `None`, or per document the int64 array ``c`` of length
            ``len(stream)`` with ``c[k]`` = topic words among ``stream[1:k+1]``.
        topic_vocab_size: V_c (0 without a topic vocabulary).
    """

    streams: list
    topic_ids: list = None
    topic_counts: list = None
    topic_vocab_size: int = 0

    def __len__(self):
        return len(self.streams)

    @property
    def num_targets(self):
        """Predicted tokens of all documents (``<eos>`` included)."""
        return int(sum(max(len(s) - 1, 0) for s in self.streams))

    def document_targets(self):
        """int64 [D]: predicted tokens of each document."""
        return np.array([max(len(s) - 1, 0) for s in self.streams], np.int64)

    def num_windows(self, bptt):
        """Windows of `bptt` targets over all documents (each document starts a window)."""
        targets = self.document_targets()
        return int((-(-targets // int(bptt))).sum())

    def context_ids(self, document, start, length, context="preceding", context_len=None):
        """Topic ids of the context of the window with targets ``stream[start+1 : start+length+1]``.

        Args:
            document: document index.
            start: position of the window's first input in the stream.
            length: the window's number of targets.
            context: one of `CONTEXTS` (see the module docstring).
            context_len: keep the first `context_len` topic words (document
                order), or all (`None`).

        Returns:
            int32 array of topic ids.
        """
        if self.topic_ids is None:
            raise ValueError("these streams have no topic vocabulary: build them with "
                             "document_streams(corpus, lm_vocab, topic_vocab)")
        ids, counts = self.topic_ids[document], self.topic_counts[document]
        if context == "preceding":
            chosen = ids[:counts[start]]
        elif context == "all_other":
            chosen = np.concatenate([ids[:counts[start]], ids[counts[start + length]:]])
        elif context == "whole_document":
            chosen = ids
        elif context == "none":
            chosen = ids[:0]
        else:
            raise ValueError(f"context must be one of {CONTEXTS}, got {context!r}")
        return chosen if context_len is None else chosen[:int(context_len)]


def stream_topics(stream, lm_to_topic):
    """The topic words of a stream's targets: (int32 topic ids in order, int64 counts ``c``
    with ``c[k]`` = topic words among ``stream[1:k+1]``) -- `DocumentStreams`' columns."""
    mapped = np.asarray(lm_to_topic)[np.asarray(stream)[1:].astype(np.int64)]
    return (mapped[mapped >= 0].astype(np.int32),
            np.concatenate([[0], np.cumsum(mapped >= 0)]).astype(np.int64))


def document_streams(corpus, lm_vocab, topic_vocab=None):
    """Every document of `corpus` as one token stream (see the module docstring).

    Args:
        corpus: a `Corpus` or a list of documents (lists of token lists).
        lm_vocab: the `Vocabulary`.
        topic_vocab: the `TopicVocabulary` (for topic contexts), or `None`.

    Returns:
        A `DocumentStreams`.

    Example:
    >>> from tfktopic.data import Vocabulary
    >>> vocab = Vocabulary.build([[["a", "b"], ["c"]]], min_count=1)
    >>> document_streams([[["a", "b"], ["c"]]], vocab).streams[0].tolist()  # doctest: +SKIP
    [1, 4, 5, 2, 6, 2]
    """
    streams, topic_ids, topic_counts = [], [], []
    for document in corpus:
        stream = [lm_vocab.bos_id]
        for sentence in document:
            stream.extend(lm_vocab.encode(sentence))
            stream.append(lm_vocab.eos_id)
        stream = np.asarray(stream, np.int32)
        streams.append(stream)
        if topic_vocab is not None:
            ids, counts = stream_topics(stream, topic_vocab.lm_to_topic)
            topic_ids.append(ids)
            topic_counts.append(counts)
    if topic_vocab is None:
        return DocumentStreams(streams)
    return DocumentStreams(streams, topic_ids, topic_counts, len(topic_vocab))


def training_order(num_documents, seed, epoch):
    """The document order of training epoch `epoch`: a permutation seeded by (seed, epoch)."""
    return np.random.default_rng((int(seed), int(epoch))).permutation(int(num_documents))


def evaluation_order(streams):
    """The fixed evaluation order: longest document first (ties by index).

    Greedy slot filling in this order keeps the pass short (a long document
    starts at the first batch instead of extending the end of the pass).
    """
    lengths = streams.document_targets()
    return np.lexsort((np.arange(len(lengths)), -lengths))


def _check_window_args(batch_size, bptt, context, context_len):
    if int(batch_size) < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if int(bptt) < 1:
        raise ValueError(f"bptt must be >= 1, got {bptt}")
    if context is not None and context not in CONTEXTS:
        raise ValueError(f"context must be one of {CONTEXTS} or None, got {context!r}")
    if context_len is not None and int(context_len) < 0:
        raise ValueError(f"context_len must be >= 0 or None, got {context_len}")


def _schedule(streams, batch_size, bptt, order):
    """The slot schedule: per batch, a list of (slot, document, start, length, reset).

    Slot b takes the next document of `order` when its document ends (slots
    are visited in order 0..B-1 at each batch, so the schedule is a function
    of `order` alone). Idle slots are left out of the list.
    """
    B, T = int(batch_size), int(bptt)
    order = iter(order)
    doc = np.full(B, -1, np.int64)
    position = np.zeros(B, np.int64)
    exhausted = False
    while True:
        rows = []
        for b in range(B):
            reset = False
            if doc[b] < 0 or position[b] >= len(streams.streams[doc[b]]) - 1:
                doc[b], position[b], reset = -1, 0, True
                while not exhausted:
                    d = next(order, None)
                    if d is None:
                        exhausted = True
                    elif len(streams.streams[d]) > 1:
                        doc[b] = int(d)
                        break
                if doc[b] < 0:
                    continue
            p = int(position[b])
            n = min(T, len(streams.streams[doc[b]]) - 1 - p)
            rows.append((b, int(doc[b]), p, n, reset))
            position[b] = p + n
        if not rows:
            return
        yield rows


def num_batches(streams, batch_size, bptt=30, order=None):
    """Batches of one pass of `stream_batches` over a finite `order`."""
    order = evaluation_order(streams) if order is None else order
    return sum(1 for _ in _schedule(streams, batch_size, bptt, order))


def stream_batches(streams, batch_size, bptt=30, order=None, context=None, context_len=None,
                   skip=0):
    """Batches of B parallel document streams, `bptt` targets per window (a generator).

    Slot b takes the next document of `order` when its document ends (slots
    are visited in order 0..B-1 at each batch, so the schedule is a function
    of `order` alone). The generator stops when `order` is exhausted and every
    slot has finished; an endless `order` gives an endless stream.

    Args:
        streams: `DocumentStreams`.
        batch_size: B, parallel slots.
        bptt: targets per window (30).
        order: an iterable of document indices (default: `evaluation_order`).
            Documents without a target are skipped.
        context: `None` (no topic context) or one of `CONTEXTS`.
        context_len: topic words kept per context (`None`: all).
        skip: leave out the first `skip` batches (scheduled, not built).

    Yields:
        dicts of numpy arrays: ``tokens`` / ``targets`` int32 [B, bptt] (0 =
        padding), ``mask`` float32 [B, bptt], ``reset`` float32 [B] (1: zero
        the slot's state before this window; also 1 on idle slots),
        ``document`` int64 [B] (-1 for an idle slot), ``doc_targets`` float32
        [B] (the predicted tokens of the slot's document; 1 when idle) and,
        with a `context`, ``context_bow`` float32 [B, V_c].
    """
    _check_window_args(batch_size, bptt, context, context_len)
    B, T = int(batch_size), int(bptt)
    order = evaluation_order(streams) if order is None else order
    width = max(int(streams.topic_vocab_size), 1)
    for i, rows in enumerate(_schedule(streams, B, T, order)):
        if i < skip:
            continue
        tokens = np.zeros((B, T), np.int32)
        targets = np.zeros((B, T), np.int32)
        mask = np.zeros((B, T), np.float32)
        reset = np.ones(B, np.float32)
        document = np.full(B, -1, np.int64)
        doc_targets = np.ones(B, np.float32)
        bow = np.zeros((B, width), np.float32) if context is not None else None
        for b, d, p, n, is_first in rows:
            stream = streams.streams[d]
            tokens[b, :n] = stream[p:p + n]
            targets[b, :n] = stream[p + 1:p + n + 1]
            mask[b, :n] = 1.0
            reset[b] = float(is_first)
            document[b] = d
            doc_targets[b] = len(stream) - 1
            if context is not None:
                ids = streams.context_ids(d, p, n, context, context_len)
                bow[b] = np.bincount(ids, minlength=width)[:width]
        batch = {"tokens": tokens, "targets": targets, "mask": mask, "reset": reset,
                 "document": document, "doc_targets": doc_targets}
        if context is not None:
            batch["context_bow"] = bow
        yield batch


def steps_per_epoch(streams, batch_size, bptt=30):
    """Batches of one training epoch: ceil(windows / B), about one pass over the documents."""
    return max(1, -(-streams.num_windows(bptt) // int(batch_size)))


def _endless_training_order(num_documents, seed):
    epoch = 0
    while True:
        yield from training_order(num_documents, seed, epoch).tolist()
        epoch += 1


def document_stream_dataset(streams, batch_size=64, bptt=30, shuffle=False, seed=0,
                            initial_epoch=0, context=None, context_len=None):
    """A tf.data.Dataset of `stream_batches` (the model-contract dicts plus ``reset``).

    Args:
        streams: `DocumentStreams`.
        batch_size: B parallel document streams.
        bptt: targets per window (30).
        shuffle: training: an endless stream over the document orders
            perm(seed, 0), perm(seed, 1), ... one after the other; epoch e is
            its batches [e S, (e + 1) S) with S = `steps_per_epoch`; use it
            with ``model.fit(..., steps_per_epoch=S)``. Evaluation (False):
            one pass in `evaluation_order`.
        seed: the shuffle seed.
        initial_epoch: training: the epoch the stream starts at; the stream
            restarts exactly where epoch `initial_epoch` began (the earlier
            epochs' batches are generated and skipped, so that a resumed run
            sees the same batches).
        context, context_len: topic contexts (see `stream_batches`).

    Returns:
        A `tf.data.Dataset` of dicts (`stream_batches`), never reordered; under another
        backend than TensorFlow the same batches as numpy from a `StreamBatches`
        (`keras.utils.PyDataset`; ``document`` int32).

    Example:
    >>> train = document_stream_dataset(streams, batch_size=32, shuffle=True)  # doctest: +SKIP
    >>> model.fit(train, epochs=5, steps_per_epoch=steps_per_epoch(streams, 32))  # doctest: +SKIP
    """
    _check_window_args(batch_size, bptt, context, context_len)
    if streams.num_targets == 0:
        raise ValueError("the documents hold no target token (empty documents)")
    B, T = int(batch_size), int(bptt)
    num_documents = len(streams)
    skip = steps_per_epoch(streams, B, T) * int(initial_epoch) if shuffle else 0

    def generate():
        order = _endless_training_order(num_documents, seed) if shuffle else None
        yield from stream_batches(streams, B, T, order, context, context_len, skip=skip)

    return stream_batch_dataset(
        generate, B, T, steps_per_epoch(streams, B, T) if shuffle else num_batches(streams, B, T),
        endless=shuffle,
        context_width=None if context is None else max(int(streams.topic_vocab_size), 1))


def stream_batch_dataset(generate, batch_size, bptt, length, endless, context_width=None):
    """The dataset of a generator of `stream_batches` dicts (TensorFlow or numpy).

    Args:
        generate: a function of no argument returning the generator.
        batch_size, bptt: B and T of the batches.
        length: batches per epoch (training) or of the one pass (evaluation).
        endless: a training stream (else one evaluation pass of `length` batches).
        context_width: V_c of ``context_bow`` (`None`: no topic context).

    Returns:
        A `tf.data.Dataset`, or under another backend a `StreamBatches` `PyDataset`.
    """
    B, T = int(batch_size), int(bptt)
    if not backend.is_tensorflow():
        # Numpy batches (a keras.utils.PyDataset): no tf.data outside TensorFlow.
        from tfktopic.data.batches import StreamBatches
        return StreamBatches(generate, int(length), restart=not endless)
    import tensorflow as tf
    signature = {
        "tokens": tf.TensorSpec((B, T), tf.int32),
        "targets": tf.TensorSpec((B, T), tf.int32),
        "mask": tf.TensorSpec((B, T), tf.float32),
        "reset": tf.TensorSpec((B,), tf.float32),
        "document": tf.TensorSpec((B,), tf.int64),
        "doc_targets": tf.TensorSpec((B,), tf.float32),
    }
    if context_width is not None:
        signature["context_bow"] = tf.TensorSpec((B, int(context_width)), tf.float32)
    dataset = tf.data.Dataset.from_generator(generate, output_signature=signature)
    if not endless:  # a known length: Keras then knows where an evaluation pass ends
        dataset = dataset.apply(tf.data.experimental.assert_cardinality(int(length)))
    return prefetched(dataset)


def stream_examples(corpus, lm_vocab, topic_vocab=None, bptt=30, batch_size=64, shuffle=False,
                    seed=0, initial_epoch=0, context=None, context_len=None):
    """A corpus part as a streamed dataset: the one call a run needs.

    Args:
        corpus: a `Corpus` (part).
        lm_vocab, topic_vocab: the run's vocabularies (`topic_vocab` only with
            a `context`).
        bptt: targets per window (30).
        batch_size: B parallel document streams (the model's `max_streams`
            must be at least B).
        shuffle, seed, initial_epoch: training stream (see
            `document_stream_dataset`); False: one evaluation pass.
        context, context_len: topic contexts (`None` for the LSTM; the
            streamed TopicRNN trains on "all_other" (or Zheng et al.'s
            "whole_document") and is evaluated on "preceding").

    Returns:
        (dataset, steps, streams): steps is `steps_per_epoch` for training
        (pass it to ``fit(steps_per_epoch=...)``) or the batches of the pass.

    Example:
    >>> train_ds, steps, _ = stream_examples(parts["train"], lm_vocab, batch_size=64,
    ...                                      shuffle=True, seed=0)   # doctest: +SKIP
    >>> valid_ds, _, _ = stream_examples(parts["valid"], lm_vocab, batch_size=64)  # doctest: +SKIP
    >>> model.fit(train_ds, epochs=20, steps_per_epoch=steps,
    ...           validation_data=valid_ds)                          # doctest: +SKIP
    """
    if context is not None and topic_vocab is None:
        raise ValueError(f"context={context!r} needs a topic_vocab")
    streams = document_streams(corpus, lm_vocab, topic_vocab if context is not None else None)
    dataset = document_stream_dataset(streams, batch_size, bptt, shuffle=shuffle, seed=seed,
                                      initial_epoch=initial_epoch, context=context,
                                      context_len=context_len)
    steps = (steps_per_epoch(streams, batch_size, bptt) if shuffle
             else num_batches(streams, batch_size, bptt))
    return dataset, steps, streams
