"""A run's data from a prepared directory (``tfktopic prepare``): `load_prepared`.

``tfktopic train MODEL --prepared DIR`` trains from the shards that
``tfktopic prepare CORPUS --out DIR`` wrote (`tfktopic.data.shards`) instead of
reading the corpus into memory. `PreparedData` is a `RunData` whose pieces come
from the shards, so `train_run` has no branch on where its data came from:

* vocabularies: ``DIR/train/lm_vocab.json`` / ``topic_vocab.json``;
* training batches: a shuffled `ShardReader` over ``DIR/train`` (a bounded
  buffer; epoch k's order is a function of (seed, k), so a run resumed from
  its epoch-k checkpoint sees the same batches as one never interrupted);
* the chunk models (rGBN-RNN, GBN-RNN, the chunked document LSTM): the same
  sentence shards read as chunks of ``sentences_per_chunk`` windows by a
  `ChunkReader` (the chunks of `document_sequences`, shuffled by chunk); the
  chunked document LSTM is scored with one chunk per whole test document;
* validation and test: ``DIR/valid`` / ``DIR/test`` in file order, scored with
  the leak-free "preceding" contexts the shards were written with;
* the training documents (`ShardDocuments`): re-read from the shards on every
  pass, never held as a list -- the LDA of ``decoder_init="lda"`` is fitted on
  their streamed bags of words (`ShardDocuments.topic_bows`), the NPMI
  reference and the topic usage are counted over them.

Several processes split the directory by shard file (`PreparedData.split_by_worker`,
`tfktopic.distribute.input_workers`): pipeline i of n reads the training shard files
i, i + n, ... (under JAX the validation files too, B / n rows per step, the same steps on
every process: `PreparedData.steps`); every process scores the whole test split.

Settings the shards fix (``max_len``, ``context_len``, the training context and
the vocabulary thresholds) are read from the manifests; an explicit setting
that conflicts with them is refused in one line naming it.
"""

import dataclasses
import math
import pathlib
import types

import numpy as np

from tfktopic.data.pipeline import prefetched
from tfktopic.data.shards import (ChunkReader, ShardReader, chunk_documents, document_windows,
                                  read_manifest)
from tfktopic.errors import TfktopicError
from tfktopic.runs.data import RunData, preprocessor

__all__ = ["PreparedData", "ShardDocuments", "load_prepared", "shard_kind", "FIXED_SETTINGS",
           "SHUFFLE_BUFFER"]

#: The shard kind each data kind trains from (`tfktopic.data.shards.KINDS`); a data kind
#: not listed has no shards yet.
#: Chunks are read from the sentence windows (`ChunkReader`: J is a run setting).
_SHARD_KINDS = {"windows": "sentences", "chunks": "sentences", "streams": "streams"}

#: Data settings a prepared directory fixes, with where its manifest records them.
FIXED_SETTINGS = ("max_len", "context_len", "train_context", "min_count", "max_size",
                  "stopwords", "max_freq_fraction", "min_doc_freq", "sentences_per_document")

#: Examples in the training reader's shuffle buffer (memory: this many examples and one
#: loaded shard).
SHUFFLE_BUFFER = 10000


def shard_kind(model_name, directory=None):
    """The shard kind a model trains from; refuses a data kind without shards (one line).

    Args:
        model_name: a registered model.
        directory: the prepared directory (for the message only).

    Raises:
        TfktopicError: the model's data kind has no shards.
    """
    pre = preprocessor(model_name)
    kind = _SHARD_KINDS.get(pre.kind)
    if kind is None:
        raise TfktopicError(
            f"--prepared{' ' + str(directory) if directory else ''}: {model_name} trains on "
            f"document {pre.kind}, which `tfktopic prepare` does not write yet (it writes "
            f"{' and '.join(sorted(set(_SHARD_KINDS.values())))}); train {model_name} from the "
            "corpus "
            "instead (tfktopic train CORPUS ...)")
    return kind


def _column(path, name):
    with np.load(path) as arrays:
        return arrays[name]


class ShardDocuments:
    """The documents of one prepared part, read back from its shards on every iteration.

    A re-iterable, like a gensim streamed corpus: no document list is kept. A
    document is the tokens its examples predict (sentence windows: the targets
    of its windows; streams: the stream after ``<bos>``), without ``<eos>``,
    ``<bos>`` and ``<pad>``, one list per sentence window (streams: one list) --
    what the NPMI reference, the topic usage and the LDA's bags of words read.
    Out-of-vocabulary words come back as ``<unk>`` (no topic word is one).

    Args:
        directory: the part's folder (``DIR/train``).
        kind: "sentences" or "streams".
        lm_vocab, topic_vocab: the prepared vocabularies.
        count: the number of documents.
    """

    def __init__(self, directory, kind, lm_vocab, topic_vocab, count):
        self.directory, self.kind = pathlib.Path(directory), kind
        self.lm_vocab, self.topic_vocab, self.count = lm_vocab, topic_vocab, int(count)
        self.source = str(self.directory)
        self._special = np.array([lm_vocab.pad_id, lm_vocab.bos_id, lm_vocab.eos_id])

    def __len__(self):
        return self.count

    def id_documents(self):
        """Yield each document as a list of int32 arrays of LM ids (one per window)."""
        manifest = read_manifest(self.directory)
        current, pieces = None, []
        for shard in manifest["kinds"][self.kind]["shards"]:
            path = self.directory / shard["file"]
            if self.kind == "streams":
                with np.load(path) as arrays:
                    splits, values = arrays["stream_splits"], arrays["stream_values"]
                for a, b in zip(splits[:-1], splits[1:]):
                    ids = values[a:b]
                    yield [ids[~np.isin(ids, self._special)]]
                continue
            with np.load(path) as arrays:
                targets, lengths = arrays["targets"], arrays["lengths"]
                documents = arrays["document_index"]
            for row, n, d in zip(targets, lengths, documents):
                if d != current and pieces:
                    yield pieces
                    pieces = []
                current = d
                ids = row[:n]
                pieces.append(ids[~np.isin(ids, self._special)])
        if pieces:
            yield pieces

    def __iter__(self):
        tokens = self.lm_vocab.tokens
        for document in self.id_documents():
            yield [[tokens[i] for i in ids.tolist()] for ids in document]

    def topic_bows(self):
        """A re-iterable of gensim bags of words ``[(topic_id, count), ...]`` per document
        (the same as `tfktopic.lda.lda_bow_corpus` of the documents), streamed."""
        return _TopicBows(self)


class _TopicBows:
    def __init__(self, documents):
        self.documents = documents

    def __iter__(self):
        lm_to_topic = np.asarray(self.documents.topic_vocab.lm_to_topic)
        for document in self.documents.id_documents():
            ids = lm_to_topic[np.concatenate(document).astype(np.int64)] if document else []
            ids = np.asarray(ids)
            values, counts = np.unique(ids[ids >= 0], return_counts=True)
            yield [(int(v), int(c)) for v, c in zip(values, counts)]

    def __len__(self):
        return len(self.documents)


class _Examples:
    """What `train_run` asks of a part's examples: their count and predicted tokens.

    With `sentences_per_chunk` (a chunk model) the examples are the chunks of J
    windows a `ChunkReader` makes of the sentence shards: their count and document
    index are the chunks'.
    """

    def __init__(self, directory, kind, manifest, sentences_per_chunk=None):
        self.directory, self.kind = pathlib.Path(directory), kind
        self.shards = manifest["kinds"][kind]["shards"]
        self.sentences_per_chunk = sentences_per_chunk
        self._num_targets, self._chunk_documents = None, None

    def __len__(self):
        if self.sentences_per_chunk is not None:
            return len(self.document_index)
        return sum(int(s["count"]) for s in self.shards)

    @property
    def num_targets(self):
        """Predicted tokens (one pass over the shards' lengths, then cached)."""
        if self._num_targets is None:
            total = 0
            for shard in self.shards:
                path = self.directory / shard["file"]
                if self.kind == "sentences":
                    total += int(_column(path, "lengths").sum())
                else:  # a stream of n ids predicts n - 1 tokens
                    splits = _column(path, "stream_splits")
                    total += int((np.diff(splits) - 1).sum())
            self._num_targets = total
        return self._num_targets

    def num_windows(self, bptt):
        """Streams: windows of `bptt` targets over all documents (`DocumentStreams.num_windows`)."""
        total = 0
        for shard in self.shards:
            targets = np.maximum(np.diff(_column(self.directory / shard["file"],
                                                 "stream_splits")) - 1, 0)
            total += int((-(-targets // int(bptt))).sum())
        return total

    @property
    def document_index(self):
        """int64 [examples]: the document of every example (window or chunk), in file order."""
        if self.sentences_per_chunk is not None:
            if self._chunk_documents is None:  # one pass over the document_index columns
                self._chunk_documents = chunk_documents(self.directory,
                                                        self.sentences_per_chunk)
            return self._chunk_documents
        return np.concatenate([_column(self.directory / s["file"], "document_index")
                               for s in self.shards]) if self.shards else np.zeros(0, np.int64)


@dataclasses.dataclass
class PreparedData(RunData):
    """A `RunData` read from a prepared directory (`load_prepared`).

    Attributes (besides `RunData`'s, whose ``parts`` are `ShardDocuments` and
    ``examples`` count their shards' examples and targets):
        directory: the prepared directory.
        kind: the shard kind ("sentences" or "streams"; a chunk model reads
            "sentences" shards as chunks of ``sentences_per_chunk`` windows).
        manifests: dict part -> its manifest.
        buffer_size: the training reader's shuffle buffer (examples).
        workers: (index, count) of this process's input pipeline
            (`tfktopic.distribute.input_workers`; None: asked when read). With count > 1
            the pipeline reads only its shard files (`ShardReader` worker index of count):
            see `split_by_worker`.
    """

    directory: pathlib.Path = None
    kind: str = None
    manifests: dict = None
    buffer_size: int = SHUFFLE_BUFFER
    workers: tuple = None

    # ------------------------------------------------- the split over processes
    def split_by_worker(self, split):
        """Whether each input pipeline of a multi-process job reads only its own shard files
        of `split` (sentence windows; streams and document chunks are read whole by every
        process and the per-process cut of the global batch applies).

        * training: yes (JAX processes and TensorFlow multi-worker workers);
        * validation: yes under JAX -- `fit`'s validation sums are global over the
          processes, so every example counts once in total; no under TensorFlow
          (tf.distribute's DATA sharding of the global batches, as for in-memory data);
        * test: no -- every process scores the whole split (`score_test`: the
          per-document sums are gathered on the host, and each process then writes the
          same results).
        """
        from tfktopic import backend

        if self.kind != "sentences" or self._chunked or split == "test":
            return False
        return split == "train" or backend.is_jax()

    def _layout(self, split):
        """(index, count) of the shard files this process reads of `split`."""
        if not self.split_by_worker(split):
            return 0, 1
        if self.workers is None:
            from tfktopic.distribute import input_workers

            return input_workers()
        return tuple(int(v) for v in self.workers)

    def _per_process(self, split):
        """Whether this process feeds its own part of every global batch of `split` (a JAX
        multi-process job reading by file); tf.distribute splits the global batch itself."""
        from tfktopic import backend

        return backend.is_jax() and self._layout(split)[1] > 1

    def batch_rows(self, split, batch_size):
        """Rows of one batch this process reads of `split`: B / processes under JAX with
        several processes, B elsewhere."""
        if not self._per_process(split):
            return int(batch_size)
        processes = self._layout(split)[1]
        if int(batch_size) % processes:
            raise ValueError(f"--batch-size {batch_size} does not split over the {processes} "
                             f"processes of --strategy data_parallel; use a multiple of "
                             f"{processes}")
        return int(batch_size) // processes

    def worker_rows(self, split):
        """Examples of `split` each input pipeline reads (list by worker index)."""
        count = self._layout(split)[1]
        shards = self.manifests[split]["kinds"][self.kind]["shards"]
        return [sum(int(s["count"]) for s in shards[w::count]) for w in range(count)]

    def _empty_batch(self):
        """A batch of no row (filled up by `tfktopic.distribute.pad_rows`)."""
        max_len = int(self.data["max_len"])
        width = max(len(self.topic_vocab), 1)
        return self._contract({"tokens": np.zeros((0, max_len), np.int32),
                               "targets": np.zeros((0, max_len), np.int32),
                               "mask": np.zeros((0, max_len), np.float32),
                               "context_bow": np.zeros((0, width), np.float32),
                               "doc_targets": np.zeros((0,), np.float32)})

    def _filled(self, batches, steps):
        """`batches`, then empty batches up to `steps` (a process whose shard files ran out
        before the others' feeds mask-zero rows, so every process takes `steps` steps)."""
        done = 0
        for batch in batches:
            if done == steps:
                return
            yield batch
            done += 1
        for _ in range(steps - done):
            yield self._empty_batch()

    def _mark(self, dataset, split, batch_size):
        """Tell `tfktopic.distribute.distribute_dataset` that `dataset` is this process's
        part (``process_local``, ``batch_rows``)."""
        if self._layout(split)[1] > 1:
            dataset.process_local = True
            dataset.batch_rows = self.batch_rows(split, batch_size)
        return dataset

    # ----------------------------------------------------------------- batches
    def _reader(self, split, shuffle, seed):
        worker, count = self._layout(split)
        return ShardReader(self.directory / split, self.kind, shuffle=shuffle,
                           buffer_size=self.buffer_size, seed=seed, worker=worker,
                           num_workers=count)

    # ------------------------------------------------------------ document chunks
    @property
    def _chunked(self):
        return self.preprocessor.kind == "chunks"

    @property
    def _sentences_per_chunk(self):
        return int(self.data.get("sentences_per_chunk", 8))

    def _chunk_reader(self, split, shuffle, seed, sentences_per_chunk):
        """The `ChunkReader` of a split, read whole by every process (`split_by_worker`)."""
        return ChunkReader(self.directory / split, sentences_per_chunk, shuffle=shuffle,
                           buffer_size=self.buffer_size, seed=seed, worker=0, num_workers=1)

    def _chunk_rows(self, batch_size, sentences_per_chunk):
        """Chunks per batch: `batch_size`, or for the chunked document LSTM `batch_size`
        windows (``batch_size // J`` chunks, at least 1), as `ChunkPreprocessor`."""
        if self.preprocessor.whole_documents:
            return max(1, int(batch_size) // int(sentences_per_chunk))
        return int(batch_size)

    def _chunk_signature(self, sentences_per_chunk):
        import tensorflow as tf

        J, max_len = int(sentences_per_chunk), int(self.data["max_len"])
        return {"tokens": tf.TensorSpec([None, J, max_len], tf.int32),
                "targets": tf.TensorSpec([None, J, max_len], tf.int32),
                "mask": tf.TensorSpec([None, J, max_len], tf.float32),
                "context_bow": tf.TensorSpec([None, J, len(self.topic_vocab)], tf.float32)}

    def _chunk_dataset(self, split, batch_size, shuffle, seed, initial_epoch=0,
                       drop_remainder=False, endless=False, sentences_per_chunk=None):
        """Chunk batches of a split from epoch `initial_epoch` (one epoch, or `endless`),
        with the steps of one epoch: tf.data under TensorFlow, else `StreamBatches`."""
        from tfktopic import backend

        J = int(sentences_per_chunk or self._sentences_per_chunk)
        rows = self._chunk_rows(batch_size, J)
        chunks = len(self._chunk_reader(split, False, seed, J))
        steps = chunks // rows if drop_remainder else -(-chunks // rows)

        def batches():
            reader = self._chunk_reader(split, shuffle, seed, J)
            reader.restore({"epoch": int(initial_epoch), "position": 0})
            while True:
                for batch in reader.batches(rows):
                    if drop_remainder and len(batch["tokens"]) < rows:
                        break
                    yield batch
                if not endless:
                    return

        if not backend.is_tensorflow():
            from tfktopic.data.batches import StreamBatches

            return StreamBatches(batches, steps, restart=not endless), steps
        import tensorflow as tf

        dataset = tf.data.Dataset.from_generator(
            batches, output_signature=self._chunk_signature(J))
        if not endless:  # a known length: Keras then knows where a validation pass ends
            dataset = dataset.apply(tf.data.experimental.assert_cardinality(steps))
        return prefetched(dataset), steps

    def _contract(self, batch):
        if not getattr(self.preprocessor, "document_targets", False):
            batch.pop("doc_targets", None)
        return batch

    def _signature(self):
        import tensorflow as tf

        max_len = int(self.data["max_len"])
        width = max(len(self.topic_vocab), 1)
        signature = {"tokens": tf.TensorSpec([None, max_len], tf.int32),
                     "targets": tf.TensorSpec([None, max_len], tf.int32),
                     "mask": tf.TensorSpec([None, max_len], tf.float32),
                     "context_bow": tf.TensorSpec([None, width], tf.float32)}
        if getattr(self.preprocessor, "document_targets", False):
            signature["doc_targets"] = tf.TensorSpec([None], tf.float32)
        return signature

    def _as_dataset(self, generator, split, batch_size, drop_remainder=False):
        from tfktopic import backend

        if not backend.is_tensorflow():
            from tfktopic.data.batches import StreamBatches

            return StreamBatches(generator, self.steps(split, batch_size, drop_remainder),
                                 restart=True)
        import tensorflow as tf

        dataset = tf.data.Dataset.from_generator(generator, output_signature=self._signature())
        # a known length: Keras then knows where a validation pass ends
        dataset = dataset.apply(tf.data.experimental.assert_cardinality(
            self.steps(split, batch_size, drop_remainder)))
        return prefetched(dataset)

    # ------------------------------------------------------- streamed documents
    @property
    def _bptt(self):
        return int(self.data.get("bptt", 30))

    def _stream_context(self, split):
        """(context, context_len) of a split's streamed windows (`StreamPreprocessor`)."""
        if not self.preprocessor.topical:
            return None, None
        context = (self.preprocessor.train_protocol(self.data) if split == "train"
                   else "preceding")
        return context, int(self.data["context_len"])

    def _topic_vocab_if_topical(self):
        return self.topic_vocab if self.preprocessor.topical else None

    def _stream_dataset(self, split, batch_size):
        """One evaluation pass over a split's streams (loaded for the pass, then dropped)."""
        from tfktopic.data.shards import read_document_streams
        from tfktopic.data.streams import num_batches, stream_batch_dataset, stream_batches

        directory, topics = self.directory / split, self._topic_vocab_if_topical()
        context, context_len = self._stream_context(split)
        B, T = int(batch_size), self._bptt
        length = num_batches(read_document_streams(directory), B, T)

        def generate():
            streams = read_document_streams(directory, topics)
            yield from stream_batches(streams, B, T, None, context, context_len)

        return stream_batch_dataset(generate, B, T, length, endless=False,
                                    context_width=None if context is None
                                    else max(len(self.topic_vocab), 1))

    def _stream_training(self, batch_size, seed, initial_epoch):
        from tfktopic.data.shards import shard_stream_batches
        from tfktopic.data.streams import stream_batch_dataset

        B, T = int(batch_size), self._bptt
        steps = max(1, -(-self.examples["train"].num_windows(T) // B))
        context, context_len = self._stream_context("train")
        topics = self._topic_vocab_if_topical()

        def generate():
            reader = self._reader("train", True, seed)
            yield from shard_stream_batches(reader, B, T, context, context_len,
                                            skip=steps * int(initial_epoch), topic_vocab=topics)

        return stream_batch_dataset(generate, B, T, steps, endless=True,
                                    context_width=None if context is None
                                    else max(len(self.topic_vocab), 1)), steps

    def dataset(self, split, batch_size, shuffle=None, seed=0, drop_remainder=False,
                initial_epoch=0):
        """One epoch of a split's batches, read from its shards (shuffled for "train" by
        default; epoch `initial_epoch`'s order). Streamed documents: training is the
        endless stream (`training_stream`), other splits one evaluation pass."""
        if shuffle is None:
            shuffle = split == "train"
        if self.kind == "streams":
            if shuffle:
                return self._stream_training(batch_size, seed, initial_epoch)[0]
            return self._stream_dataset(split, batch_size)
        if self._chunked:
            return self._chunk_dataset(split, batch_size, shuffle, seed, initial_epoch,
                                       drop_remainder)[0]
        rows, steps = self.batch_rows(split, batch_size), self.steps(split, batch_size,
                                                                     drop_remainder)

        def batches():
            reader = self._reader(split, shuffle, seed)
            reader.restore({"epoch": int(initial_epoch), "position": 0})
            for batch in reader.batches(rows):
                if drop_remainder and len(batch["tokens"]) < rows:
                    return
                yield self._contract(batch)

        generate = ((lambda: self._filled(batches(), steps)) if self._per_process(split)
                    else batches)
        return self._mark(self._as_dataset(generate, split, batch_size, drop_remainder),
                          split, batch_size)

    def steps(self, split, batch_size, drop_remainder=False):
        """Batches of one epoch of a split.

        A JAX multi-process job reading by file (`split_by_worker`): every process takes
        the same number of steps, the most any process's shard files fill with its
        B / processes rows per step, ``max_w ceil(rows_w / (B / P))``; a process whose
        files run out first feeds mask-zero rows (`_filled`), so every example is read
        once per epoch and none is dropped.
        """
        if self._per_process(split):
            rows = self.batch_rows(split, batch_size)
            return max(r // rows if drop_remainder else -(-r // rows)
                       for r in self.worker_rows(split))
        rows, batch_size = len(self.examples[split]), int(batch_size)
        if self._chunked:
            batch_size = self._chunk_rows(batch_size, self._sentences_per_chunk)
        return rows // batch_size if drop_remainder else -(-rows // batch_size)

    def training_stream(self, batch_size, seed=0, initial_epoch=0, dataset=None):
        """The endless training stream from epoch `initial_epoch` on, and its steps per epoch.

        Epoch k's order is the reader's shuffle of (seed, k), whether the run started
        at 0 or resumes at k.
        """
        if self.kind == "streams":
            return self._stream_training(batch_size, seed, initial_epoch)
        if self._chunked:
            if len(self.examples["train"]) < 1:
                raise TfktopicError(f"{self.directory / 'train'}: the training data has no "
                                    "batch")
            return self._chunk_dataset("train", batch_size, True, seed, initial_epoch,
                                       endless=True)
        rows, steps = self.batch_rows("train", batch_size), self.steps("train", batch_size)
        if steps < 1:
            raise TfktopicError(f"{self.directory / 'train'}: the training data has no batch")
        fill = self._per_process("train")

        def endless():
            reader = self._reader("train", True, seed)
            reader.restore({"epoch": int(initial_epoch), "position": 0})
            while True:
                epoch = (self._contract(batch) for batch in reader.batches(rows))
                yield from (self._filled(epoch, steps) if fill else epoch)

        from tfktopic import backend

        if backend.is_tensorflow():
            import tensorflow as tf

            return self._mark(prefetched(tf.data.Dataset.from_generator(
                endless, output_signature=self._signature())), "train", batch_size), steps
        from tfktopic.data.batches import StreamBatches

        return self._mark(StreamBatches(endless, steps, restart=False), "train",
                          batch_size), steps

    # ----------------------------------------------------------------- scoring
    def score_test(self, model, batch_size=64):
        """Test perplexity (leak-free "preceding": the shards' contexts), per document
        (the chunked document LSTM: one chunk per whole document, as in memory)."""
        from tfktopic.evaluation import evaluate_perplexity

        protocol = self.preprocessor.protocol_label("preceding", self.data)
        if self.kind == "streams":
            dataset = self._stream_dataset("test", min(int(batch_size), int(model.max_streams)))
            return evaluate_perplexity(model, dataset, documents=len(self.parts["test"]),
                                       protocol=protocol)
        if self._chunked:
            J, documents = self._sentences_per_chunk, self.examples["test"].document_index
            if self.preprocessor.whole_documents:
                # one chunk per whole document (J: the longest one's windows), state carried
                J = max([n for _, _, n in document_windows(self.directory / "test")] + [1])
                documents = chunk_documents(self.directory / "test", J)
            dataset, _ = self._chunk_dataset("test", batch_size, False, 0,
                                             sentences_per_chunk=J)
            return evaluate_perplexity(model, dataset,
                                       documents=(len(self.parts["test"]), documents),
                                       protocol=protocol)
        examples = self.examples["test"]
        dataset = self.dataset("test", batch_size, shuffle=False)
        return evaluate_perplexity(
            model, dataset, documents=(len(self.parts["test"]), examples.document_index),
            protocol=protocol)

    def unigram_test(self):
        """The unigram baseline on the test targets, one shard at a time
        (`unigram_perplexity` per shard, the log-perplexities averaged by targets)."""
        from tfktopic.evaluation.perplexity import unigram_perplexity

        total, count = 0.0, 0
        test = self.directory / "test"
        for shard in self.manifests["test"]["kinds"][self.kind]["shards"]:
            with np.load(test / shard["file"]) as arrays:
                if self.kind == "sentences":
                    part = types.SimpleNamespace(tokens=arrays["tokens"],
                                                 targets=arrays["targets"],
                                                 lengths=arrays["lengths"])
                else:  # the streams' targets (the same tokens as the sentence windows')
                    part = _stream_targets(arrays["stream_splits"], arrays["stream_values"])
            n = int(part.lengths.sum())
            if n:
                total += n * math.log(unigram_perplexity(self.lm_vocab, part))
                count += n
        return math.exp(total / count) if count else float("nan")

    def for_model(self, model_name):
        if model_name == self.model_name:
            return self
        raise TfktopicError(f"{self.directory}: a prepared run serves its own model only")

    def with_protocol(self, protocol):
        raise TfktopicError(f"{self.directory}: the prepared shards fix the protocol "
                            f"({self.manifests['test']['kinds'][self.kind].get('protocol')})")

    def split_note(self):
        """The run note on how the shard files are split over the input pipelines (None
        with one pipeline)."""
        index, count = self._layout("train")
        if count < 2:
            return None
        split = [p for p in ("train", "valid") if self.split_by_worker(p)]
        note = (f"{' and '.join(split)} shards split by file over {count} input pipelines: "
                f"this one (index {index}) reads shard files {index}, {index} + {count}, ... "
                f"({self.worker_rows('train')[index]} of {len(self.examples['train'])} "
                "training examples)")
        if self._per_process("train"):
            note += ("; each step takes B / processes rows from every process, steps per "
                     "epoch = the most any process's files fill, a process that runs out "
                     "first feeds mask-zero rows; the test split is scored whole by every "
                     "process")
        return note

    def describe(self):
        summary = super().describe()
        summary["corpus"] = str(self.directory)
        summary["split"] = "prepared"
        return summary


def _stream_targets(splits, values):
    """The targets of streams as a `unigram_perplexity` input: one row per stream."""
    lengths = np.maximum(np.diff(splits) - 1, 0)
    width = max(int(lengths.max()) if lengths.size else 0, 1)
    targets = np.zeros((len(lengths), width), np.int32)
    for i, (a, n) in enumerate(zip(splits[:-1], lengths)):
        targets[i, :n] = values[a + 1:a + 1 + n]
    return types.SimpleNamespace(tokens=targets, targets=targets, lengths=lengths)


# ----------------------------------------------------------------------------- loading
def _refuse_conflicts(directory, kind, manifests, explicit):
    """The data settings the shards fix; refuse an explicit one that differs (one line)."""
    train = manifests["train"]
    fixed = dict(train.get("vocabulary") or {})
    if kind == "sentences":
        entry = train["kinds"]["sentences"]
        fixed.update(max_len=entry["max_len"], context_len=entry["context_len"],
                     train_context=entry["protocol"])
    split = train.get("split") or {}
    if "sentences_per_document" in split and split.get("format") == "ptb":
        fixed["sentences_per_document"] = split["sentences_per_document"]
    for key, value in explicit.items():
        if key in fixed and str(fixed[key]) != str(value):
            raise TfktopicError(f"--set {key}={value}: {directory} was prepared with "
                                f"{key}={fixed[key]}; drop the setting or prepare again "
                                f"(tfktopic prepare ... --out DIR)")
    return fixed


def load_prepared(directory, model_name, data, explicit=None, workers=None):
    """The `PreparedData` of a model from a prepared directory.

    Args:
        directory: the ``--out`` of ``tfktopic prepare`` (``train`` / ``valid`` / ``test``).
        model_name: the model to train (its data kind picks the shards).
        data: the run's data settings (those the shards fix are replaced by the
            manifest's).
        explicit: data settings given explicitly (``--set``, ``--stopwords``):
            refused when they differ from the shards'.
        workers: (index, count) of this process's input pipeline
            (`tfktopic.distribute.input_workers` of the run's strategy; None:
            `input_workers()` when read -- the JAX process layout, one under TensorFlow).

    Returns:
        A `PreparedData`.

    Raises:
        TfktopicError: not a prepared directory, the model's kind missing (names
            the ``tfktopic prepare --kinds`` to run), a data kind without shards,
            a conflicting setting, vocabularies that do not match the manifest.
    """
    from tfktopic.data import TopicVocabulary, Vocabulary

    directory = pathlib.Path(directory)
    if not directory.is_dir():
        raise TfktopicError(f"--prepared {directory}: no such directory")
    missing = [p for p in ("train", "valid", "test") if not (directory / p / "manifest.json")
               .is_file()]
    if missing:
        raise TfktopicError(f"--prepared {directory}: not a prepared directory (no finished "
                            f"{', '.join(missing)} part); run tfktopic prepare CORPUS --out "
                            f"{directory}")
    kind = shard_kind(model_name, directory)
    manifests = {p: read_manifest(directory / p) for p in ("train", "valid", "test")}
    lacking = [p for p, m in manifests.items() if kind not in m["kinds"]]
    if lacking:
        has = sorted(manifests["train"]["kinds"])
        raise TfktopicError(f"--prepared {directory}: {model_name} trains on {kind} shards, "
                            f"which it lacks (it has {', '.join(has) or 'none'}); run "
                            f"tfktopic prepare CORPUS --out {directory} --kinds "
                            f"{' '.join(sorted(set(has) | {kind}))}")
    lm_vocab = Vocabulary.load(directory / "train" / "lm_vocab.json")
    topic_vocab = TopicVocabulary.load(directory / "train" / "topic_vocab.json", lm_vocab)
    for part, manifest in manifests.items():
        if (manifest["lm_vocab_checksum"] != lm_vocab.checksum
                or manifest["topic_vocab_checksum"] != topic_vocab.checksum):
            raise TfktopicError(f"{directory / part}: its shards were cut with other "
                                "vocabularies than train/; prepare the directory again")
    fixed = _refuse_conflicts(directory, kind, manifests, dict(explicit or {}))
    data = {**data, **fixed}
    if kind == "sentences":
        for part in ("valid", "test"):
            protocol = manifests[part]["kinds"]["sentences"]["protocol"]
            if protocol != "preceding":
                raise TfktopicError(f"{directory / part}: scored with {protocol!r} contexts; "
                                    "validation and test need the leak-free 'preceding'")
    parts, examples = {}, {}
    chunks = (int(data.get("sentences_per_chunk", 8))
              if preprocessor(model_name).kind == "chunks" else None)
    if chunks is not None and chunks < 1:
        raise TfktopicError(f"--set sentences_per_chunk={chunks}: a chunk holds at least one "
                            "sentence window")
    for part, manifest in manifests.items():
        examples[part] = _Examples(directory / part, kind, manifest, chunks)
        count = manifest.get("num_documents")
        if count is None:  # an older manifest: the last example's document + 1
            index = _Examples(directory / part, kind, manifest).document_index
            count = int(index.max()) + 1 if index.size else 0
        parts[part] = ShardDocuments(directory / part, kind, lm_vocab, topic_vocab, count)
    notes = [f"data from the prepared directory {directory} ({kind} shards; the settings it "
             f"fixes: {', '.join(f'{k}={v}' for k, v in fixed.items())})"]
    corpus = types.SimpleNamespace(source=str(directory))
    prepared = PreparedData(model_name, corpus, parts, lm_vocab, topic_vocab, data, examples,
                            notes, directory=directory, kind=kind, manifests=manifests,
                            workers=None if workers is None else tuple(workers))
    note = prepared.split_note()
    if note:
        notes.append(note)
    return prepared
