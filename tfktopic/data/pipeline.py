"""tf.data pipelines yielding the model-contract dicts of DESIGN.md §3.

Every dataset yields dicts with

* ``tokens`` int32 [B, T] -- inputs (``<bos>`` first), padded with 0;
* ``targets`` int32 [B, T] -- next tokens;
* ``mask`` float32 [B, T] -- 1 on real targets;
* ``context_bow`` float32 [B, V_c] -- the bag of words of the topic context
  (sentence examples), or [B, J, V_c] with tokens [B, J, T] (document
  sequences).

With ``document_targets=True`` the dicts also carry ``doc_targets`` float32
[B] (or [B, J]): the number of predicted tokens of each window's document,
which TopicRNN needs to charge its KL once per document.

Contexts travel through tf.data as ragged topic ids and become dense bags of
words only after batching (one `tf.math.bincount` per batch), so memory holds
at most `context_len` ids per example. Shuffling is seeded, so a pipeline is
deterministic: the same seed gives the same batches in the same order, epoch
after epoch.
"""

import numpy as np

__all__ = ["sentence_dataset", "document_dataset", "stream_dataset", "prefetched",
           "PREFETCH_BATCHES"]

#: Batches a pipeline of the package prepares ahead of the training step (`prefetched`).
PREFETCH_BATCHES = 2


def prefetched(dataset, batches=PREFETCH_BATCHES):
    """`dataset` with a fixed prefetch buffer and tf.data's autotuning off.

    Every pipeline of the package ends here. tf.data's autotuning (on by default) starts a
    model thread beside every iterator, which wakes to re-tune after 10 ms, 20 ms, 40 ms, ...
    (up to a minute); with TensorFlow 2.21 the iterator's destructor waits for that thread's
    current sleep to end (the main thread blocks in ``RootDataset::Iterator::~Iterator``, seen
    with ``py-spy dump --native``). So a Keras ``fit`` over an endless training stream, and
    every ``evaluate`` or validation pass, can end with a stall as long as the pass itself
    (200-step ``fit`` calls of the streamed document LSTM: 17-20 s after the last batch in
    some calls, each of those returning at exactly 40.96 s = 10 ms x (2^12 - 1)). Our
    pipelines have nothing to tune (in-memory tensors, one cheap map per batch), so the
    buffer is fixed instead; the step time is unchanged. Measured by
    ``python -m benchmarks.input_pipeline`` (`benchmarks/results/medium/input_pipeline.json`).

    Args:
        dataset: a `tf.data.Dataset` of batches.
        batches: the prefetch buffer, in batches.

    Returns:
        The dataset, prefetching `batches` batches, with ``options().autotune.enabled`` False.

    Example:
    >>> ds = prefetched(tf.data.Dataset.range(8).batch(4))
    >>> ds.options().autotune.enabled
    False
    """
    import tensorflow as tf
    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.prefetch(int(batches)).with_options(options)


def _ragged_contexts(values, splits):
    import tensorflow as tf
    return tf.RaggedTensor.from_row_splits(
        tf.constant(values, tf.int32), tf.constant(splits, tf.int64), validate=False)


def _bag_of_words(context_ids, vocab_size):
    """[B, None] ragged topic ids -> float32 [B, vocab_size] counts."""
    import tensorflow as tf
    bow = tf.math.bincount(context_ids, minlength=vocab_size, maxlength=vocab_size,
                           dtype=tf.float32, axis=-1)
    # bincount of a ragged batch has an unknown static shape; Keras needs it.
    return tf.ensure_shape(bow, [None, vocab_size])


def _shuffle_batch(dataset, size, batch_size, shuffle, seed, drop_remainder):
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if shuffle:
        dataset = dataset.shuffle(size, seed=seed, reshuffle_each_iteration=True)
    return dataset.batch(batch_size, drop_remainder=drop_remainder)


def sentence_dataset(examples, batch_size=64, shuffle=True, seed=0, drop_remainder=False,
                     document_targets=False):
    """A tf.data.Dataset of sentence windows.

    Args:
        examples: `SentenceExamples` from `sentence_examples`.
        batch_size: windows per batch.
        shuffle: shuffle the windows (seeded; reshuffled every epoch).
        seed: the shuffle seed.
        drop_remainder: drop the last incomplete batch (static batch shape).
        document_targets: add ``doc_targets`` float32 [B], the predicted
            tokens of each window's document (`SentenceExamples.document_targets`).

    Returns:
        A dataset of dicts ``tokens``, ``targets``, ``mask``, ``context_bow``
        (and ``doc_targets``).

    Example:
    >>> dataset = sentence_dataset(examples, batch_size=32)  # doctest: +SKIP
    >>> batch = next(iter(dataset))                          # doctest: +SKIP
    """
    import tensorflow as tf
    max_len = examples.tokens.shape[1]
    vocab_size = max(int(examples.topic_vocab_size), 1)
    columns = {
        "tokens": examples.tokens,
        "targets": examples.targets,
        "lengths": examples.lengths,
        "context": _ragged_contexts(examples.context_values, examples.context_splits),
    }
    if document_targets:
        columns["doc_targets"] = examples.document_targets
    dataset = tf.data.Dataset.from_tensor_slices(columns)
    dataset = _shuffle_batch(dataset, len(examples), batch_size, shuffle, seed, drop_remainder)

    def to_contract(batch):
        contract = {
            "tokens": batch["tokens"],
            "targets": batch["targets"],
            "mask": tf.sequence_mask(batch["lengths"], max_len, dtype=tf.float32),
            "context_bow": _bag_of_words(batch["context"], vocab_size),
        }
        if document_targets:
            contract["doc_targets"] = batch["doc_targets"]
        return contract

    # One cheap map per batch: run by the prefetch thread (no parallel calls to tune).
    return prefetched(dataset.map(to_contract))


def document_dataset(sequences, batch_size=8, shuffle=True, seed=0, drop_remainder=False,
                     document_targets=False):
    """A tf.data.Dataset of document chunks (rGBN-RNN's inputs).

    Args:
        sequences: `DocumentSequences` from `document_sequences`.
        batch_size: chunks per batch (B documents x J sentences).
        shuffle, seed, drop_remainder: as in `sentence_dataset`.
        document_targets: add ``doc_targets`` float32 [B, J]
            (`DocumentSequences.document_targets`).

    Returns:
        A dataset of dicts ``tokens``/``targets`` int32 [B, J, T], ``mask``
        float32 [B, J, T] and ``context_bow`` float32 [B, J, V_c].
    """
    import tensorflow as tf
    num_chunks, J, max_len = sequences.tokens.shape
    vocab_size = int(sequences.topic_vocab_size)
    contexts = tf.RaggedTensor.from_uniform_row_length(
        _ragged_contexts(sequences.context_values, sequences.context_splits), J)
    columns = {
        "tokens": sequences.tokens,
        "targets": sequences.targets,
        "lengths": sequences.lengths,
        "context": contexts,
    }
    if document_targets:
        columns["doc_targets"] = sequences.document_targets
    dataset = tf.data.Dataset.from_tensor_slices(columns)
    dataset = _shuffle_batch(dataset, num_chunks, batch_size, shuffle, seed, drop_remainder)

    def to_contract(batch):
        context = batch["context"]
        flat = context.merge_dims(0, 1)
        bow = _bag_of_words(flat, vocab_size)
        contract = {
            "tokens": batch["tokens"],
            "targets": batch["targets"],
            "mask": tf.sequence_mask(batch["lengths"], max_len, dtype=tf.float32),
            "context_bow": tf.reshape(bow, [-1, J, vocab_size]),
        }
        if document_targets:
            contract["doc_targets"] = batch["doc_targets"]
        return contract

    # One cheap map per batch: run by the prefetch thread (no parallel calls to tune).
    return prefetched(dataset.map(to_contract))


def stream_dataset(inputs, targets):
    """Successive minibatches for stateful LMs, in order (never shuffled).

    Args:
        inputs, targets: int32 [num_batches, B, T] from `stream_arrays`.

    Returns:
        A dataset of dicts ``tokens``, ``targets``, ``mask`` (all ones).
    """
    import tensorflow as tf
    inputs, targets = np.asarray(inputs, np.int32), np.asarray(targets, np.int32)
    if inputs.shape != targets.shape or inputs.ndim != 3:
        raise ValueError(f"inputs and targets must both be [num_batches, B, T], got "
                         f"{inputs.shape} and {targets.shape}")
    return prefetched(tf.data.Dataset.from_tensor_slices({
        "tokens": inputs,
        "targets": targets,
        "mask": np.ones(inputs.shape, np.float32),
    }))
