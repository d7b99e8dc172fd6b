"""Numpy batches as `keras.utils.PyDataset`s: the data feeding without TensorFlow.

Under the TensorFlow backend the runs feed `tf.data` pipelines (`tfktopic.data.pipeline`,
`tfktopic.data.streams.document_stream_dataset`). Under another backend (JAX) `make_batches`
gives the same model-contract dicts (DESIGN.md §3) as numpy arrays from a
`keras.utils.PyDataset`, so that a TensorFlow-free install trains with ``model.fit``:

* `SentenceBatches` -- sentence windows (`SentenceExamples`): ``tokens`` / ``targets`` int32
  [B, T], ``mask`` float32 [B, T], ``context_bow`` float32 [B, V_c] (and ``doc_targets``);
* `DocumentBatches` -- document chunks (`DocumentSequences`): the same with a [B, J, ...]
  lead;
* `StreamBatches` -- B parallel document streams (`stream_batches`), in order; endless when
  training.

The bags of words are built per batch from the ragged context ids (``values`` / ``splits``),
as the tf.data pipelines do with `tf.math.bincount`. Shuffled batches are drawn from the
permutation ``numpy.random.default_rng([seed, epoch])`` of the examples -- a function of
(seed, epoch), so a run resumed at epoch k (`start_epoch`) sees the batches an uninterrupted
run sees. The order is not tf.data's shuffle order: the same seed gives other batches on the
two backends (the numbers of a run are equal across backends only up to that order).

Example:
>>> from tfktopic.data import load_corpus, Vocabulary, TopicVocabulary, sentence_examples
>>> corpus = load_corpus("lee").subset(range(10))
>>> lm_vocab = Vocabulary.build(corpus, min_count=1)
>>> topic_vocab = TopicVocabulary.build(corpus)
>>> batches = SentenceBatches(sentence_examples(corpus, lm_vocab, topic_vocab), 8, seed=0)
>>> batches[0]["tokens"].shape[0], batches[0]["mask"].dtype
(8, dtype('float32'))
"""

import math

import keras
import numpy as np

from tfktopic.data.contexts import bags_of_words  # numpy only: the shard readers use it too

__all__ = ["ShuffledBatches", "SentenceBatches", "DocumentBatches", "StreamBatches", "bags_of_words"]


class ShuffledBatches(keras.utils.PyDataset):
    """Batches of `batch_size` examples of `size`, reshuffled every epoch (seeded)."""

    def __init__(self, size, batch_size, shuffle, seed, drop_remainder):
        super().__init__()
        if int(batch_size) < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.size, self.batch_size = int(size), int(batch_size)
        self.shuffle, self.seed, self.drop_remainder = bool(shuffle), int(seed), drop_remainder
        self.epoch = 0
        self._order = None

    def start_epoch(self, epoch):
        """Draw the next batches from epoch `epoch`'s order (a resumed run)."""
        self.epoch, self._order = int(epoch), None

    def on_epoch_end(self):
        self.epoch, self._order = self.epoch + 1, None

    def __len__(self):
        whole = self.size // self.batch_size
        return whole if self.drop_remainder else math.ceil(self.size / self.batch_size)

    def _rows(self, index):
        if not 0 <= index < len(self):
            raise IndexError(f"batch {index} of {len(self)}")
        if self._order is None:
            self._order = (np.random.default_rng([self.seed, self.epoch]).permutation(self.size)
                           if self.shuffle else np.arange(self.size))
        return self._order[index * self.batch_size:(index + 1) * self.batch_size]


class SentenceBatches(ShuffledBatches):
    """`SentenceExamples` as batches of model-contract dicts (numpy).

    Args:
        examples: `SentenceExamples` (`sentence_examples`).
        batch_size: windows per batch.
        shuffle: a new seeded order every epoch.
        seed: the shuffle seed.
        drop_remainder: leave out the last incomplete batch.
        document_targets: add ``doc_targets`` float32 [B] (TopicRNN).
    """

    def __init__(self, examples, batch_size=64, shuffle=True, seed=0, drop_remainder=False,
                 document_targets=False):
        super().__init__(len(examples), batch_size, shuffle, seed, drop_remainder)
        self.examples, self.document_targets = examples, bool(document_targets)
        self.width = max(int(examples.topic_vocab_size), 1)

    def __getitem__(self, index):
        rows, ex = self._rows(index), self.examples
        max_len = ex.tokens.shape[1]
        batch = {
            "tokens": np.asarray(ex.tokens[rows], np.int32),
            "targets": np.asarray(ex.targets[rows], np.int32),
            "mask": (np.arange(max_len) < np.asarray(ex.lengths)[rows, None]).astype(np.float32),
            "context_bow": bags_of_words(ex.context_values, ex.context_splits, rows, self.width),
        }
        if self.document_targets:
            batch["doc_targets"] = np.asarray(ex.document_targets[rows], np.float32)
        return batch


class DocumentBatches(ShuffledBatches):
    """`DocumentSequences` as batches of model-contract dicts [B, J, ...] (numpy).

    Args:
        sequences: `DocumentSequences` (`document_sequences`).
        batch_size: chunks per batch.
        shuffle, seed, drop_remainder: as in `SentenceBatches`.
        document_targets: add ``doc_targets`` float32 [B, J].
    """

    def __init__(self, sequences, batch_size=8, shuffle=True, seed=0, drop_remainder=False,
                 document_targets=False):
        super().__init__(sequences.tokens.shape[0], batch_size, shuffle, seed, drop_remainder)
        self.sequences, self.document_targets = sequences, bool(document_targets)
        self.width = int(sequences.topic_vocab_size)

    def __getitem__(self, index):
        rows, seq = self._rows(index), self.sequences
        _, J, max_len = seq.tokens.shape
        # Sentence j of chunk c is row c J + j of the ragged contexts.
        flat = (rows[:, None] * J + np.arange(J)).reshape(-1)
        bow = bags_of_words(seq.context_values, seq.context_splits, flat, self.width)
        batch = {
            "tokens": np.asarray(seq.tokens[rows], np.int32),
            "targets": np.asarray(seq.targets[rows], np.int32),
            "mask": (np.arange(max_len) < np.asarray(seq.lengths)[rows][..., None]
                     ).astype(np.float32),
            "context_bow": bow.reshape(len(rows), J, self.width),
        }
        if self.document_targets:
            batch["doc_targets"] = np.asarray(seq.document_targets[rows], np.float32)
        return batch


class StreamBatches(keras.utils.PyDataset):
    """Batches of a generator read in order (`stream_batches`): the streamed models' input.

    Keras reads a PyDataset's batches 0, 1, ... in order (one worker); batch i is the
    generator's next one. An evaluation pass (`restart`) starts the generator again at
    batch 0; a training stream (not `restart`) is endless and epoch e is its batches
    [e S, (e + 1) S) with S = ``len(self)`` (``model.fit(steps_per_epoch=S)``).

    Args:
        batches: a function of no argument returning the generator of dicts.
        length: S, batches per epoch (pass).
        restart: start the generator again at every batch 0 (evaluation).
    """

    def __init__(self, batches, length, restart):
        super().__init__()
        self._make, self._length, self._restart = batches, int(length), bool(restart)
        self._iterator, self._next = None, 0

    def __len__(self):
        return self._length

    def __getitem__(self, index):
        if not 0 <= index < self._length:
            raise IndexError(f"batch {index} of {self._length}")
        if self._iterator is None or (self._restart and index == 0):
            self._iterator, self._next = iter(self._make()), 0
        if index != self._next % self._length:
            raise IndexError(f"StreamBatches are read in order: batch {index} asked, "
                             f"{self._next % self._length} next")
        batch = {key: np.asarray(value, np.int32 if value.dtype == np.int64 else value.dtype)
                 for key, value in next(self._iterator).items()}
        self._next += 1
        return batch
