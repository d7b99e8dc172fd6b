"""Prepared corpora on disk: one streaming vocabulary pass, examples in numpy shards.

`prepare_directory` reads a stream of documents twice (never keeping the list):

1. one pass of counters (token counts, document frequencies, sentences) from
   which `Vocabulary.from_counts` / `TopicVocabulary.from_counts` build the
   same vocabularies as `Vocabulary.build` / `TopicVocabulary.build`;
2. one pass writing the examples of a model kind to shards:

   * ``sentences`` -- the sentence windows of `contexts.sentence_examples`
     (tokens, targets, lengths, the topic context stored SPARSE as ragged
     topic ids; the bag of words is made per batch);
   * ``streams`` -- the document streams of `streams.document_streams`
     (token stream and topic ids per document, ragged).

Format: uncompressed ``.npz`` shards of fixed-width / ragged numpy arrays, read
without TensorFlow (the package must train under JAX too; a TFRecord reader
needs TF). A shard is written under a temporary name and renamed; the manifest
(``manifest.json``: every complete shard with its example count and SHA-256)
is written last, so a kill leaves no half shard that a rerun trusts.

Readers: `ShardReader` yields numpy batches (TF-free), shuffled with a BOUNDED
buffer (shard order shuffled per epoch + `buffer_size` examples in memory),
resumable mid-epoch (`state()` / `restore()`: epoch and batches delivered) and
sharded per worker by file (worker i of n reads shards i, i+n, ...).
`tf_dataset` wraps it as a `tf.data.Dataset` for the TensorFlow backend.
`ChunkReader` reads the document chunks of rGBN-RNN, GBN-RNN and the chunked
document LSTM from the same ``sentences`` shards (J consecutive windows of a
document, padded as `contexts.document_sequences` pads them; J is a run
setting), carrying a document whose windows run on past its shard's end.
"""

import hashlib
import json
import logging
import os
import pathlib

import numpy as np

from tfktopic.atomic import write_json
from tfktopic.data.contexts import (_check_protocol, _document_windows, _window_contexts,
                                    bags_of_words)
from tfktopic.data.vocab import TopicVocabulary, Vocabulary, count_tokens
from tfktopic.errors import CorpusFormatError

#: ShardReader logs (DEBUG) the shard files each reader reads.
_LOG = logging.getLogger(__name__)

__all__ = ["count_vocabularies", "ShardWriter", "write_sentence_shards", "write_stream_shards",
           "prepare_directory", "read_manifest", "ShardReader", "tf_dataset", "KINDS",
           "STREAMED_FORMATS", "iter_documents", "count_streamed_documents", "prepare_corpus",
           "read_document_streams", "shard_stream_batches", "ChunkReader", "document_windows",
           "chunk_documents"]

KINDS = ("sentences", "streams")
MANIFEST = "manifest.json"
FORMAT_VERSION = 1


def count_vocabularies(documents, min_count=10, max_size=None, stopwords="gensim",
                       max_freq_fraction=0.001, min_doc_freq=1):
    """LM and topic vocabularies from ONE pass of counters over `documents`.

    Args:
        documents: an iterable of documents (lists of sentences of tokens);
            consumed once, no document is kept.
        min_count, max_size: as `Vocabulary.build`.
        stopwords, max_freq_fraction, min_doc_freq: as `TopicVocabulary.build`.

    Returns:
        (lm_vocab, topic_vocab, num_documents).
    """
    counts, doc_freq, num_sentences, num_documents = count_tokens(documents)
    lm_vocab = Vocabulary.from_counts(counts, num_sentences, min_count, max_size)
    topic_vocab = TopicVocabulary.from_counts(counts, doc_freq, lm_vocab, stopwords,
                                              max_freq_fraction, min_doc_freq)
    return lm_vocab, topic_vocab, num_documents


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class ShardWriter:
    """Write examples as ragged columns into shards of `shard_size` examples.

    Args:
        directory: output folder (created).
        prefix: shard file prefix (the example kind).
        shard_size: examples per shard (the last one may be shorter).
        fixed: names of fixed-width columns (one array row per example).
        ragged: names of ragged columns (one 1-D array per example).
    """

    def __init__(self, directory, prefix, shard_size, fixed, ragged):
        self.directory = pathlib.Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.prefix, self.shard_size = prefix, int(shard_size)
        self.fixed, self.ragged = tuple(fixed), tuple(ragged)
        self.shards = []
        self._reset()

    def _reset(self):
        self._rows = {name: [] for name in self.fixed + self.ragged}

    def add(self, **example):
        """Append one example (every fixed and ragged column)."""
        for name in self.fixed + self.ragged:
            self._rows[name].append(np.asarray(example[name]))
        if len(self._rows[self.fixed[0]]) >= self.shard_size:
            self.flush()

    def flush(self):
        """Write the buffered examples as one shard (temporary name, then rename)."""
        count = len(self._rows[self.fixed[0]])
        if not count:
            return
        arrays = {name: np.stack(self._rows[name]) for name in self.fixed}
        for name in self.ragged:
            parts = self._rows[name]
            lengths = np.array([len(p) for p in parts], np.int64)
            arrays[name + "_splits"] = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
            arrays[name + "_values"] = (np.concatenate(parts).astype(np.int32) if parts
                                        else np.zeros(0, np.int32))
        name = f"{self.prefix}-{len(self.shards):05d}.npz"
        final = self.directory / name
        temporary = self.directory / (name + ".tmp")
        with open(temporary, "wb") as handle:
            np.savez(handle, **arrays)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, final)
        self.shards.append({"file": name, "count": count, "sha256": _sha256(final)})
        self._reset()


def write_sentence_shards(documents, lm_vocab, topic_vocab, directory, max_len=30,
                          context_len=300, protocol="preceding", truncate="first",
                          shard_size=65536):
    """Stream the sentence windows of `documents` into shards (see `sentence_examples`).

    Returns:
        The list of shard records (file, count, sha256).
    """
    _check_protocol(protocol, truncate)
    writer = ShardWriter(directory, "sentences", shard_size,
                         fixed=("tokens", "targets", "lengths", "document_index",
                                "sentence_index", "doc_targets"),
                         ragged=("context",))
    for d, document in enumerate(documents):
        windows, sentence_of, owned = _document_windows(document, lm_vocab, topic_vocab, max_len)
        contexts = _window_contexts(sentence_of, owned, protocol, context_len, truncate)
        doc_targets = float(sum(len(w) - 1 for w in windows))
        for window, s, context in zip(windows, sentence_of, contexts):
            n = len(window) - 1
            tokens = np.zeros(max_len, np.int32)
            targets = np.zeros(max_len, np.int32)
            tokens[:n], targets[:n] = window[:-1], window[1:]
            writer.add(tokens=tokens, targets=targets, lengths=np.int32(n),
                       document_index=np.int64(d), sentence_index=np.int64(s),
                       doc_targets=np.float32(doc_targets), context=context)
    writer.flush()
    return writer.shards


def write_stream_shards(documents, lm_vocab, topic_vocab, directory, shard_size=4096):
    """Stream every document as one token stream into shards (see `document_streams`).

    Returns:
        The list of shard records (file, count, sha256).
    """
    writer = ShardWriter(directory, "streams", shard_size, fixed=("document_index",),
                         ragged=("stream", "topic_ids"))
    lm_to_topic = np.asarray(topic_vocab.lm_to_topic) if topic_vocab is not None else None
    for d, document in enumerate(documents):
        stream = [lm_vocab.bos_id]
        for sentence in document:
            stream.extend(lm_vocab.encode(sentence))
            stream.append(lm_vocab.eos_id)
        stream = np.asarray(stream, np.int32)
        if lm_to_topic is not None:
            mapped = lm_to_topic[stream[1:].astype(np.int64)]
            topic_ids = mapped[mapped >= 0].astype(np.int32)
        else:
            topic_ids = np.zeros(0, np.int32)
        writer.add(document_index=np.int64(d), stream=stream, topic_ids=topic_ids)
    writer.flush()
    return writer.shards


def prepare_directory(documents_factory, out, kinds=("sentences",), max_len=30,
                      context_len=300, protocol="preceding", min_count=10, max_size=None,
                      stopwords="gensim", max_freq_fraction=0.001, min_doc_freq=1,
                      shard_size=65536):
    """Vocabularies in one streaming pass, then the examples of each kind in shards.

    Args:
        documents_factory: a callable returning a fresh iterable of the
            training documents (called once per pass: 1 + len(kinds)).
        out: the prepared directory.
        kinds: example kinds among `KINDS`.
        others: as `count_vocabularies` and `write_sentence_shards`.

    Returns:
        The manifest dict (also written, last, to ``out/manifest.json``).
    """
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise ValueError(f"unknown example kinds {unknown}; choose among {KINDS}")
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    stale = out / MANIFEST
    if stale.exists():
        stale.unlink()  # a rerun trusts nothing until the new manifest is written
    lm_vocab, topic_vocab, num_documents = count_vocabularies(
        documents_factory(), min_count, max_size, stopwords, max_freq_fraction, min_doc_freq)
    lm_vocab.save(out / "lm_vocab.json")
    topic_vocab.save(out / "topic_vocab.json")
    manifest = {"format_version": FORMAT_VERSION, "num_documents": num_documents,
                "lm_vocab_checksum": lm_vocab.checksum,
                "topic_vocab_checksum": topic_vocab.checksum,
                "topic_vocab_size": len(topic_vocab),
                # the thresholds the vocabularies were built with (`tfktopic train --prepared`
                # refuses a conflicting explicit setting)
                "vocabulary": {"min_count": min_count, "max_size": max_size,
                               "stopwords": stopwords, "max_freq_fraction": max_freq_fraction,
                               "min_doc_freq": min_doc_freq},
                "kinds": {}}
    for kind in kinds:
        if kind == "sentences":
            shards = write_sentence_shards(documents_factory(), lm_vocab, topic_vocab, out,
                                           max_len, context_len, protocol,
                                           shard_size=shard_size)
            manifest["kinds"][kind] = {"max_len": max_len, "context_len": context_len,
                                       "protocol": protocol, "shards": shards}
        else:
            shards = write_stream_shards(documents_factory(), lm_vocab, topic_vocab, out,
                                         shard_size=max(1, shard_size // 16))
            manifest["kinds"][kind] = {"shards": shards}
    write_json(out / MANIFEST, manifest)
    return manifest


def read_manifest(directory, verify=False):
    """The manifest of a prepared directory; with `verify`, check every shard's SHA-256.

    Raises:
        ValueError: no manifest (an unfinished preparation), or a shard missing
            or altered -- naming the file.
    """
    directory = pathlib.Path(directory)
    path = directory / MANIFEST
    if not path.exists():
        raise ValueError(f"{directory}: no {MANIFEST}: not a finished prepared directory "
                         "(rerun `tfktopic prepare`)")
    manifest = json.loads(path.read_text(encoding="utf-8"))
    if verify:
        for kind in manifest["kinds"].values():
            for shard in kind["shards"]:
                file = directory / shard["file"]
                if not file.exists() or _sha256(file) != shard["sha256"]:
                    raise ValueError(f"{file}: missing or does not match its manifest checksum")
    return manifest


def _load_shard(path):
    with np.load(path) as arrays:
        return {name: arrays[name] for name in arrays.files}


def _example_rows(shard):
    """Split a loaded shard into per-example dicts (ragged columns as 1-D arrays).

    Every row owns copies of its arrays: a view would keep its whole shard alive
    while the row waits in the shuffle buffer, and rows of every shard of an
    epoch end up there (measured: peak RSS of a prepared IMDB run grew ~55 MB per
    million training tokens with views).
    """
    fixed = [n for n in shard if not n.endswith(("_splits", "_values"))]
    ragged = [n[:-len("_splits")] for n in shard if n.endswith("_splits")]
    count = len(shard[fixed[0]])
    for i in range(count):
        row = {name: shard[name][i].copy() for name in fixed}
        for name in ragged:
            splits = shard[name + "_splits"]
            row[name] = shard[name + "_values"][splits[i]:splits[i + 1]].copy()
        yield row


class ShardReader:
    """TF-free reader of one example kind of a prepared directory.

    Args:
        directory: the prepared directory.
        kind: "sentences" or "streams".
        shuffle: shuffle shard order per epoch and examples through a buffer.
        buffer_size: examples held in the shuffle buffer (memory bound).
        seed: shuffle seed (epoch e uses seed + e).
        worker, num_workers: this worker reads shards worker, worker+n, ...
            (default: this process's place in a JAX multi-process job,
            `tfktopic.distribute.process_layout`; one worker elsewhere).

    Memory: at most one loaded shard plus `buffer_size` examples.
    """

    def __init__(self, directory, kind="sentences", shuffle=True, buffer_size=10000, seed=0,
                 worker=None, num_workers=None):
        if worker is None and num_workers is None:
            from tfktopic.distribute import process_layout
            worker, num_workers = process_layout()
        worker = 0 if worker is None else worker
        num_workers = 1 if num_workers is None else num_workers
        if not 0 <= int(worker) < int(num_workers):
            raise ValueError(f"worker must be in [0, {num_workers}), got {worker}")
        if int(buffer_size) < 1:
            raise ValueError(f"buffer_size must be >= 1, got {buffer_size}")
        self.directory = pathlib.Path(directory)
        self.manifest = read_manifest(directory)
        if kind not in self.manifest["kinds"]:
            raise ValueError(f"{directory}: prepared without {kind!r} examples "
                             f"(has {sorted(self.manifest['kinds'])})")
        self.kind, self.shuffle, self.seed = kind, bool(shuffle), int(seed)
        self.buffer_size = int(buffer_size)
        self.shards = self.manifest["kinds"][kind]["shards"][int(worker)::int(num_workers)]
        self.worker, self.num_workers = int(worker), int(num_workers)
        self.epoch, self.position = 0, 0
        _LOG.debug("%s: worker %d of %d reads %s shards %s", self.directory, self.worker,
                   self.num_workers, kind, [s["file"] for s in self.shards])

    def __len__(self):
        """Examples this worker sees per epoch."""
        return sum(s["count"] for s in self.shards)

    def examples(self, epoch=0):
        """Yield the examples of `epoch` (dicts of numpy arrays), shuffled if asked."""
        rng = np.random.default_rng([self.seed, int(epoch)])
        order = rng.permutation(len(self.shards)) if self.shuffle else range(len(self.shards))
        buffer = []
        for index in order:
            for row in self._shard_examples(index):
                if not self.shuffle:
                    yield row
                    continue
                if len(buffer) < self.buffer_size:
                    buffer.append(row)
                    continue
                pick = int(rng.integers(len(buffer)))
                buffer[pick], row = row, buffer[pick]
                yield row
        while buffer:
            pick = int(rng.integers(len(buffer)))
            buffer[pick], buffer[-1] = buffer[-1], buffer[pick]
            yield buffer.pop()

    def _shard_examples(self, index):
        """The examples of this worker's shard `index` (a hook: `ChunkReader` yields chunks)."""
        return _example_rows(_load_shard(self.directory / self.shards[index]["file"]))

    def state(self):
        """Where the reader stands: {"epoch", "position"} (examples delivered this epoch)."""
        return {"epoch": self.epoch, "position": self.position}

    def restore(self, state):
        """Continue from a `state()` (the same seed replays the epoch's order)."""
        self.epoch, self.position = int(state["epoch"]), int(state["position"])

    def __iter__(self):
        """Yield examples from the current state on, advancing it (endless over epochs
        only through repeated iteration: one iteration finishes the current epoch)."""
        skip = self.position
        for i, row in enumerate(self.examples(self.epoch)):
            if i < skip:
                continue
            self.position = i + 1
            yield row
        self.epoch, self.position = self.epoch + 1, 0

    def batches(self, batch_size):
        """Yield numpy batches of the current epoch (see `collate`)."""
        rows = []
        for row in self:
            rows.append(row)
            if len(rows) == batch_size:
                yield self.collate(rows)
                rows = []
        if rows:
            yield self.collate(rows)

    def collate(self, rows):
        """Example dicts -> one batch; sentences get the model contract with a dense
        ``context_bow`` float32 [B, V_c] made here, per batch."""
        if self.kind != "sentences":
            return rows
        max_len = self.manifest["kinds"]["sentences"]["max_len"]
        width = max(int(self.manifest["topic_vocab_size"]), 1)
        lengths = np.array([r["lengths"] for r in rows], np.int32)
        splits = np.cumsum([0] + [len(r["context"]) for r in rows])
        values = (np.concatenate([r["context"] for r in rows]) if rows
                  else np.zeros(0, np.int64))
        bow = bags_of_words(values, splits, np.arange(len(rows)), width)
        return {"tokens": np.stack([r["tokens"] for r in rows]),
                "targets": np.stack([r["targets"] for r in rows]),
                "mask": (np.arange(max_len)[None, :] < lengths[:, None]).astype(np.float32),
                "context_bow": bow,
                "doc_targets": np.array([r["doc_targets"] for r in rows], np.float32)}


def tf_dataset(reader, batch_size):
    """A `tf.data.Dataset` of one epoch of `reader`'s sentence batches (TF backend)."""
    import tensorflow as tf

    from tfktopic.data.pipeline import prefetched

    max_len = reader.manifest["kinds"]["sentences"]["max_len"]
    width = max(int(reader.manifest["topic_vocab_size"]), 1)
    signature = {"tokens": tf.TensorSpec([None, max_len], tf.int32),
                 "targets": tf.TensorSpec([None, max_len], tf.int32),
                 "mask": tf.TensorSpec([None, max_len], tf.float32),
                 "context_bow": tf.TensorSpec([None, width], tf.float32),
                 "doc_targets": tf.TensorSpec([None], tf.float32)}
    return prefetched(tf.data.Dataset.from_generator(lambda: reader.batches(batch_size),
                                                     output_signature=signature))


def _column(path, name):
    """One column of a shard (only that array is read)."""
    with np.load(path) as arrays:
        return arrays[name]


def document_windows(directory):
    """The sentence windows of every document of a prepared part, in file order.

    A document's windows may run on past the end of its shard (`ShardWriter` flushes
    every `shard_size` windows, wherever a document stands); it is counted once, with
    the shard it starts in. Memory: one ``document_index`` column.

    Args:
        directory: the part's folder (its ``sentences`` shards).

    Yields:
        (shard, document, windows): the position of the shard the document starts in
        (the manifest's order), its ``document_index`` and its number of windows.
    """
    directory = pathlib.Path(directory)
    current, owner, count = None, None, 0
    for position, shard in enumerate(read_manifest(directory)["kinds"]["sentences"]["shards"]):
        index = _column(directory / shard["file"], "document_index")
        values, counts = np.unique(index, return_counts=True)  # index is non-decreasing
        for value, n in zip(values.tolist(), counts.tolist()):
            if value == current:
                count += n
                continue
            if current is not None:
                yield owner, current, count
            current, owner, count = value, position, n
    if current is not None:
        yield owner, current, count


def chunk_documents(directory, sentences_per_chunk):
    """int64 [M]: the document of every chunk of J windows of a part, in file order
    (`DocumentSequences.document_index` of its documents; M chunks).

    Args:
        directory: the part's folder (its ``sentences`` shards).
        sentences_per_chunk: J.
    """
    J = int(sentences_per_chunk)
    if J < 1:
        raise ValueError(f"sentences_per_chunk must be >= 1, got {sentences_per_chunk}")
    pieces = [np.full(-(-n // J), d, np.int64) for _, d, n in document_windows(directory)]
    return np.concatenate(pieces) if pieces else np.zeros(0, np.int64)


def _window_block(shard, a, b):
    """Windows [a, b) of a loaded sentences shard: their columns, contexts re-based."""
    splits = shard["context_splits"]
    return {"tokens": shard["tokens"][a:b], "targets": shard["targets"][a:b],
            "lengths": shard["lengths"][a:b], "document_index": shard["document_index"][a:b],
            "context_values": shard["context_values"][splits[a]:splits[b]],
            "context_splits": splits[a:b + 1] - splits[a]}


def _join_blocks(blocks):
    """Window blocks (`_window_block`) one after the other as one block."""
    if len(blocks) == 1:
        return blocks[0]
    joined = {name: np.concatenate([block[name] for block in blocks])
              for name in ("tokens", "targets", "lengths", "document_index", "context_values")}
    offsets = np.cumsum([0] + [block["context_splits"][-1] for block in blocks[:-1]])
    joined["context_splits"] = np.concatenate(
        [[0]] + [block["context_splits"][1:] + o for block, o in zip(blocks, offsets)])
    return joined


def _document_chunks(block, J):
    """Yield the chunks of J windows of every document of a block (`document_sequences`:
    the windows padded with empty ones to a multiple of J; each chunk owns its arrays)."""
    documents = block["document_index"]
    bounds = np.concatenate([[0], np.flatnonzero(np.diff(documents)) + 1, [len(documents)]])
    max_len = block["tokens"].shape[1]
    splits = block["context_splits"]
    for a, b in zip(bounds[:-1], bounds[1:]):
        n = int(b - a)
        m = -(-n // J)
        padded = {name: np.zeros((m * J, max_len), np.int32) for name in ("tokens", "targets")}
        for name in padded:
            padded[name][:n] = block[name][a:b]
        lengths = np.zeros(m * J, np.int32)
        lengths[:n] = block["lengths"][a:b]
        # empty contexts for the padding windows
        ends = np.concatenate([splits[a:b + 1], np.full(m * J - n, splits[b])])
        for c in range(m):
            window = slice(c * J, (c + 1) * J)
            first, last = ends[c * J], ends[(c + 1) * J]
            yield {"tokens": padded["tokens"][window].copy(),
                   "targets": padded["targets"][window].copy(),
                   "lengths": lengths[window].copy(),
                   "context_values": block["context_values"][first:last].astype(np.int32),
                   "context_splits": (ends[c * J:(c + 1) * J + 1] - first).astype(np.int64),
                   "document_index": np.int64(documents[a])}


class ChunkReader(ShardReader):
    """Document chunks of J windows read from a part's ``sentences`` shards (rGBN-RNN,
    GBN-RNN, the chunked document LSTM).

    A chunk is one example of `tfktopic.data.contexts.document_sequences`: a
    document's sentence windows, padded with empty windows to a multiple of J
    and cut into chunks of J; every window keeps the context it was written with
    (the protocol over the WHOLE document, not restarted at a chunk boundary).
    The shards hold windows, so J stays a run setting (``sentences_per_chunk``).

    A document whose windows run on past the end of its shard belongs to the shard
    it starts in: reading that shard reads the rest of the document from the heads
    of the next shards, which skip it. So every chunk comes once per epoch whatever
    the shard order or the worker. Shuffling (by chunk, through the bounded
    buffer; epoch e's order a function of (seed, e)), `state` / `restore` and
    `batches` are `ShardReader`'s.

    Args:
        directory: the part's folder.
        sentences_per_chunk: J.
        shuffle, buffer_size, seed, worker, num_workers: as `ShardReader`
            (`buffer_size` counts chunks).

    Memory: one loaded shard (and the heads of the next shards while a document
    runs on into them) plus `buffer_size` chunks.
    """

    def __init__(self, directory, sentences_per_chunk=8, shuffle=True, buffer_size=10000,
                 seed=0, worker=None, num_workers=None):
        if int(sentences_per_chunk) < 1:
            raise ValueError(f"sentences_per_chunk must be >= 1, got {sentences_per_chunk}")
        super().__init__(directory, "sentences", shuffle=shuffle, buffer_size=buffer_size,
                         seed=seed, worker=worker, num_workers=num_workers)
        self.sentences_per_chunk = int(sentences_per_chunk)
        self._files = [s["file"] for s in self.manifest["kinds"]["sentences"]["shards"]]
        self._place = {file: g for g, file in enumerate(self._files)}
        self._count = None

    def __len__(self):
        """Chunks this worker sees per epoch (those of the documents its shards start)."""
        if self._count is None:
            mine = {self._place[s["file"]] for s in self.shards}
            J = self.sentences_per_chunk
            self._count = sum(-(-n // J) for shard, _, n in document_windows(self.directory)
                              if shard in mine)
        return self._count

    def _shard_examples(self, index):
        g = self._place[self.shards[index]["file"]]
        shard = _load_shard(self.directory / self._files[g])
        documents = shard["document_index"]
        start = 0
        if g > 0 and len(documents):  # the head of a document the shard before starts
            before = _column(self.directory / self._files[g - 1], "document_index")
            if len(before) and before[-1] == documents[0]:
                start = int(np.searchsorted(documents, documents[0], side="right"))
        if start == len(documents):
            return
        blocks = [_window_block(shard, start, len(documents))]
        last, g_next = documents[-1], g + 1
        del shard
        while g_next < len(self._files):  # the last document runs on into the next shards
            following = _load_shard(self.directory / self._files[g_next])
            if following["document_index"][0] != last:
                break
            head = int(np.searchsorted(following["document_index"], last, side="right"))
            blocks.append(_window_block(following, 0, head))
            if head < len(following["document_index"]):
                break
            g_next += 1
        yield from _document_chunks(_join_blocks(blocks), self.sentences_per_chunk)

    def collate(self, rows):
        """Chunks -> one batch of the model contract: ``tokens`` / ``targets`` int32
        [B, J, T], ``mask`` float32 [B, J, T] and ``context_bow`` float32 [B, J, V_c]
        (made here, per batch, as `DocumentBatches`)."""
        J = self.sentences_per_chunk
        max_len = self.manifest["kinds"]["sentences"]["max_len"]
        width = int(self.manifest["topic_vocab_size"])
        lengths = np.stack([r["lengths"] for r in rows]).astype(np.int32)
        ids = np.concatenate([r["context_values"] for r in rows]).astype(np.int64)
        offsets = np.cumsum([0] + [int(r["context_splits"][-1]) for r in rows[:-1]])
        splits = np.concatenate([[0]] + [r["context_splits"][1:] + o
                                         for r, o in zip(rows, offsets)])
        bow = bags_of_words(ids, splits, np.arange(len(rows) * J), width)
        return {"tokens": np.stack([r["tokens"] for r in rows]),
                "targets": np.stack([r["targets"] for r in rows]),
                "mask": (np.arange(max_len) < lengths[..., None]).astype(np.float32),
                "context_bow": bow.reshape(len(rows), J, width).astype(np.float32)}


def read_document_streams(directory, topic_vocab=None):
    """The `DocumentStreams` of a prepared part's ``streams`` shards, in document order
    (the same as `document_streams` of the part's documents; evaluation passes)."""
    from tfktopic.data.streams import DocumentStreams, stream_topics

    directory = pathlib.Path(directory)
    streams, topic_ids, topic_counts = [], [], []
    for shard in read_manifest(directory)["kinds"]["streams"]["shards"]:
        for row in _example_rows(_load_shard(directory / shard["file"])):
            streams.append(row["stream"])
            if topic_vocab is not None:
                ids, counts = stream_topics(row["stream"], topic_vocab.lm_to_topic)
                topic_ids.append(ids)
                topic_counts.append(counts)
    if topic_vocab is None:
        return DocumentStreams(streams)
    return DocumentStreams(streams, topic_ids, topic_counts, len(topic_vocab))


def shard_stream_batches(reader, batch_size, bptt=30, context=None, context_len=None, skip=0,
                         topic_vocab=None):
    """The endless training stream of `stream_batches` over a ``streams`` `ShardReader`.

    The slots take the documents in the reader's (bounded-buffer shuffled) order,
    epoch after epoch from the reader's state; only the documents in the B slots are
    held (a document leaves when its slot moves on). Batch i is a function of the
    reader's seed and starting epoch, so `skip` (batches built and dropped: memory
    stays bounded) restarts the stream exactly where a resumed run left it.

    Args:
        reader: a `ShardReader` of kind "streams".
        batch_size, bptt, context, context_len: as `stream_batches`.
        skip: batches to drop first.
        topic_vocab: the `TopicVocabulary` (needed with a `context`).

    Yields:
        `stream_batches` dicts (``document``: a running index of the order).
    """
    from tfktopic.data.streams import DocumentStreams, stream_batches, stream_topics

    if len(reader) == 0:
        raise ValueError(f"{reader.directory}: no document to stream")
    topical = topic_vocab is not None
    view = DocumentStreams({}, {} if topical else None, {} if topical else None,
                           len(topic_vocab) if topical else 0)

    def order():
        index = 0
        while True:
            for row in reader:
                view.streams[index] = row["stream"]
                if topical:
                    view.topic_ids[index], view.topic_counts[index] = stream_topics(
                        row["stream"], topic_vocab.lm_to_topic)
                yield index
                index += 1

    for i, batch in enumerate(stream_batches(view, batch_size, bptt, order(), context,
                                             context_len)):
        active = set(batch["document"].tolist())
        for d in [d for d in view.streams if d not in active]:
            del view.streams[d]
            if topical:
                del view.topic_ids[d], view.topic_counts[d]
        if i >= skip:
            yield batch


#: The formats `iter_documents` streams (`tfktopic prepare --format`).
STREAMED_FORMATS = ("tdlm", "ptb", "imdb", "text")


def iter_documents(path, format, sentences_per_document=10):
    """Stream the documents of a corpus file one at a time (none kept).

    Args:
        path: the file (IMDB: its ``.jsonl.gz`` or ``aclImdb`` directory).
        format: one of `STREAMED_FORMATS`: "tdlm", "ptb", "imdb" (every review,
            labelled or not, as ``--format imdb`` reads them) or "text"
            (documents separated by blank lines).
        sentences_per_document: PTB sentences per document.

    Yields:
        The documents `read_tdlm` / `read_ptb` / `read_imdb` / `read_text`
        return, in the same order (empty lines skipped).
    """
    from tfktopic.data.corpora import decoded_lines, iter_imdb, iter_text

    if format == "tdlm":
        for _, line in decoded_lines(path):
            document = [s for s in (part.split() for part in line.split("\t")) if s]
            if document:
                yield document
    elif format == "ptb":
        block = []
        for _, line in decoded_lines(path):
            tokens = line.split()
            if tokens:
                block.append(tokens)
            if len(block) == int(sentences_per_document):
                yield block
                block = []
        if block:
            yield block
    elif format == "imdb":
        for document, _, _ in iter_imdb(path):
            yield document
    elif format == "text":
        yield from iter_text(path)
    else:
        raise ValueError(f"streamed preparation reads {', '.join(STREAMED_FORMATS)} files, "
                         f"got {format!r}")


def count_streamed_documents(path, format, sentences_per_document=10):
    """The number of documents `iter_documents` yields: a cheap line count for TDLM / PTB
    (`count_documents`), one streaming pass for IMDB and raw text."""
    from tfktopic.data.corpora import count_documents

    if format in ("tdlm", "ptb"):
        return count_documents(path, format, sentences_per_document)
    return sum(1 for _ in iter_documents(path, format, sentences_per_document))


def split_membership(num_documents, fractions, seed=0):
    """int8 [num_documents]: the part (0 train, 1 valid, 2 test) of each document,
    the same parts as `Corpus.split(fractions, seed)`."""
    import random

    order = list(range(int(num_documents)))
    random.Random(seed).shuffle(order)
    member = np.zeros(int(num_documents), np.int8)
    bounds, total = [0], 0.0
    for fraction in fractions:
        total += fraction
        bounds.append(round(total * len(order)))
    for part, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])):
        member[order[a:b]] = part
    return member


def prepare_corpus(path, format, out, fractions=(0.8, 0.1, 0.1), seed=0,
                   sentences_per_document=10, **options):
    """Split a corpus file 80/10/10 by document (as `Corpus.split`) and prepare
    ``out/train`` (vocabularies built there), ``out/valid`` and ``out/test``.

    The file is streamed (`iter_documents`, any of `STREAMED_FORMATS`): once to
    count its documents, once for the vocabularies, once per part. ``protocol``
    (in `options`) is the training windows' context ("preceding" or "all_other");
    validation and test windows always get the leak-free "preceding" one.

    Returns:
        dict part -> manifest.
    """
    num_documents = count_streamed_documents(path, format, sentences_per_document)
    member = split_membership(num_documents, fractions, seed)
    # refused before any vocabulary or shard is written (the count is one cheap pass)
    empty = [name for i, name in enumerate(("train", "valid", "test"))
             if not (member == i).any()]
    if empty:
        raise CorpusFormatError(path, f"{num_documents} documents leave the {'/'.join(empty)} "
                                      "split empty (80/10/10 by document); use a corpus of at "
                                      "least 10 documents")

    def part(index):
        return lambda: (d for d, m in zip(iter_documents(path, format, sentences_per_document),
                                          member) if m == index)

    out = pathlib.Path(out)
    split = {"fractions": list(fractions), "seed": int(seed), "format": format,
             "sentences_per_document": int(sentences_per_document)}
    manifests = {"train": prepare_directory(part(0), out / "train", **options)}
    manifests["train"]["split"] = split
    write_json(out / "train" / MANIFEST, manifests["train"])
    lm_vocab = Vocabulary.load(out / "train" / "lm_vocab.json")
    topic_vocab = TopicVocabulary.load(out / "train" / "topic_vocab.json", lm_vocab)
    kinds = options.get("kinds", ("sentences",))
    for index, name in ((1, "valid"), (2, "test")):
        directory = out / name
        directory.mkdir(parents=True, exist_ok=True)
        manifest = {"format_version": FORMAT_VERSION, "lm_vocab_checksum": lm_vocab.checksum,
                    "topic_vocab_checksum": topic_vocab.checksum,
                    "topic_vocab_size": len(topic_vocab),
                    "num_documents": int((member == index).sum()), "split": split,
                    "kinds": {}}
        for kind in kinds:
            if kind == "sentences":
                max_len = options.get("max_len", 30)
                context_len = options.get("context_len", 300)
                # validation and test are scored leak-free, whatever the training context
                shards = write_sentence_shards(part(index)(), lm_vocab, topic_vocab, directory,
                                               max_len, context_len, "preceding")
                manifest["kinds"][kind] = {"max_len": max_len, "context_len": context_len,
                                           "protocol": "preceding", "shards": shards}
            else:
                manifest["kinds"][kind] = {"shards": write_stream_shards(
                    part(index)(), lm_vocab, topic_vocab, directory)}
        write_json(directory / MANIFEST, manifest)
        manifests[name] = manifest
    return manifests
