"""Prepared (streamed, sharded) corpora equal the in-memory examples; readers are
bounded, resumable and shard per worker."""

import pathlib

import numpy as np
import pytest

from tests.conftest import shared_file
from tfktopic.data import TopicVocabulary, Vocabulary, read_tdlm
from tfktopic.data.contexts import sentence_examples
from tfktopic.data.shards import ShardReader, prepare_directory, read_manifest
from tfktopic.data.streams import document_streams

SETTINGS = dict(min_count=2, stopwords="gensim", max_freq_fraction=0.001, min_doc_freq=1)


@pytest.fixture(scope="module")
def corpus():
    documents = read_tdlm(shared_file("apnews/toy-train.txt"))
    return documents.subset(range(min(len(documents), 150)))


@pytest.fixture(scope="module")
def prepared(corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("prepared")
    manifest = prepare_directory(lambda: iter(corpus.documents), out,
                                 kinds=("sentences", "streams"), shard_size=500, **SETTINGS)
    return out, manifest


def _in_memory_vocabularies(corpus):
    lm = Vocabulary.build(corpus, min_count=SETTINGS["min_count"])
    topic = TopicVocabulary.build(corpus, lm, stopwords="gensim", max_freq_fraction=0.001,
                                  min_doc_freq=1)
    return lm, topic


def test_streamed_vocabularies_equal_in_memory_vocabularies(corpus, prepared):
    out, _ = prepared
    lm, topic = _in_memory_vocabularies(corpus)
    assert Vocabulary.load(out / "lm_vocab.json") == lm
    assert TopicVocabulary.load(out / "topic_vocab.json", lm).words == topic.words
    assert lm.counts == Vocabulary.load(out / "lm_vocab.json").counts


def test_sharded_sentence_windows_equal_in_memory_windows(corpus, prepared):
    out, manifest = prepared
    lm, topic = _in_memory_vocabularies(corpus)
    expected = sentence_examples(corpus, lm, topic, max_len=30, context_len=300)
    rows = list(ShardReader(out, "sentences", shuffle=False))
    assert len(rows) == len(expected) > 500  # several shards
    assert len(manifest["kinds"]["sentences"]["shards"]) > 1
    np.testing.assert_array_equal(np.stack([r["tokens"] for r in rows]), expected.tokens)
    np.testing.assert_array_equal(np.stack([r["targets"] for r in rows]), expected.targets)
    np.testing.assert_array_equal([r["lengths"] for r in rows], expected.lengths)
    np.testing.assert_array_equal([r["doc_targets"] for r in rows], expected.document_targets)
    for i, row in enumerate(rows):
        np.testing.assert_array_equal(row["context"], expected.context(i))
    batch = ShardReader(out, "sentences", shuffle=False).collate(rows[:7])
    np.testing.assert_array_equal(batch["context_bow"],
                                  np.stack([expected.context_bow(i) for i in range(7)]))
    np.testing.assert_array_equal(batch["mask"], expected.mask[:7])


def test_sharded_streams_equal_in_memory_streams(corpus, prepared):
    out, _ = prepared
    lm, topic = _in_memory_vocabularies(corpus)
    expected = document_streams(corpus, lm, topic)
    rows = list(ShardReader(out, "streams", shuffle=False))
    assert len(rows) == len(expected.streams)
    for row, stream, ids in zip(rows, expected.streams, expected.topic_ids):
        np.testing.assert_array_equal(row["stream"], stream)
        np.testing.assert_array_equal(row["topic_ids"], ids)


def _keys(rows):
    return [(int(r["document_index"]), int(r.get("sentence_index", -1)),
             tuple(r["tokens"].tolist()) if "tokens" in r else ()) for r in rows]


def test_bounded_shuffle_covers_every_example_once_per_epoch(prepared):
    out, _ = prepared
    plain = _keys(ShardReader(out, "sentences", shuffle=False))
    reader = ShardReader(out, "sentences", shuffle=True, buffer_size=64, seed=3)
    first, second = _keys(reader), _keys(reader)
    assert sorted(first) == sorted(plain) == sorted(second)
    assert first != plain and first != second  # shuffled, reshuffled per epoch


def test_rows_in_the_shuffle_buffer_do_not_keep_their_shards_alive(prepared):
    out, manifest = prepared
    assert len(manifest["kinds"]["sentences"]["shards"]) > 1
    for kind in ("sentences", "streams"):
        for row in ShardReader(out, kind, shuffle=True, buffer_size=64, seed=0):
            for name, value in row.items():
                # a view's base is the loaded shard column: it would pin the whole shard
                assert np.asarray(value).base is None, (kind, name)


def test_resume_mid_epoch_continues_where_it_stopped(prepared):
    out, _ = prepared
    full = _keys(ShardReader(out, "sentences", shuffle=True, buffer_size=50, seed=1))
    reader = ShardReader(out, "sentences", shuffle=True, buffer_size=50, seed=1)
    iterator = iter(reader)
    head = [next(iterator) for _ in range(321)]
    state = reader.state()
    assert state == {"epoch": 0, "position": 321}
    resumed = ShardReader(out, "sentences", shuffle=True, buffer_size=50, seed=1)
    resumed.restore(state)
    assert _keys(head) + _keys(resumed) == full
    assert resumed.state() == {"epoch": 1, "position": 0}


def test_two_workers_see_disjoint_examples_whose_union_is_the_epoch(prepared):
    out, _ = prepared
    epoch = _keys(ShardReader(out, "sentences", shuffle=False))
    a = _keys(ShardReader(out, "sentences", shuffle=True, seed=0, worker=0, num_workers=2))
    b = _keys(ShardReader(out, "sentences", shuffle=True, seed=0, worker=1, num_workers=2))
    assert a and b and not set(a) & set(b)
    assert sorted(a + b) == sorted(epoch)


def test_tf_dataset_over_shards_yields_the_reader_batches(prepared):
    from tfktopic.data.shards import tf_dataset

    out, manifest = prepared
    reader = ShardReader(out, "sentences", shuffle=False)
    expected = list(ShardReader(out, "sentences", shuffle=False).batches(64))
    batches = list(tf_dataset(reader, 64))
    assert len(batches) == len(expected)
    for got, want in zip(batches[:3], expected[:3]):
        for key in want:
            np.testing.assert_array_equal(got[key].numpy(), want[key])
    assert batches[0]["context_bow"].shape[1] == manifest["topic_vocab_size"]


# ------------------------------------------------------------------ document chunks
@pytest.fixture(scope="module", params=["preceding", "all_other"])
def tiny_shards(corpus, tmp_path_factory, request):
    """Sentence shards of 7 windows: documents run on across one and several shards."""
    out = tmp_path_factory.mktemp("tiny-shards")
    prepare_directory(lambda: iter(corpus.documents), out, kinds=("sentences",), shard_size=7,
                      protocol=request.param, **SETTINGS)
    return out, request.param


def _chunk_keys(rows):
    return sorted((int(r["document_index"]), r["tokens"].tobytes(), r["lengths"].tobytes(),
                   r["context_values"].tobytes(), r["context_splits"].tobytes()) for r in rows)


def test_chunks_read_from_shards_equal_the_in_memory_document_sequences(corpus, tiny_shards):
    from tfktopic.data.contexts import document_sequences
    from tfktopic.data.shards import ChunkReader, chunk_documents, document_windows

    out, protocol = tiny_shards
    lm, topic = _in_memory_vocabularies(corpus)
    J = 3
    expected = document_sequences(corpus, lm, topic, J, max_len=30, context_len=300,
                                  protocol=protocol)
    spans = {}  # document -> the shards holding its windows
    for g, shard in enumerate(read_manifest(out)["kinds"]["sentences"]["shards"]):
        for d in np.unique(np.load(out / shard["file"])["document_index"]).tolist():
            spans.setdefault(d, []).append(g)
    assert max(len(s) for s in spans.values()) > 2  # a document over three shards or more
    windows = sentence_examples(corpus, lm, topic, max_len=30, context_len=300)
    layout = list(document_windows(out))
    assert [n for _, _, n in layout] == np.bincount(windows.document_index).tolist()
    assert [shard for shard, _, _ in layout] == [spans[d][0] for d in range(len(corpus))]
    rows = list(ChunkReader(out, J, shuffle=False))
    assert len(rows) == len(expected) == len(ChunkReader(out, J))
    np.testing.assert_array_equal(np.stack([r["tokens"] for r in rows]), expected.tokens)
    np.testing.assert_array_equal(np.stack([r["targets"] for r in rows]), expected.targets)
    np.testing.assert_array_equal(np.stack([r["lengths"] for r in rows]), expected.lengths)
    np.testing.assert_array_equal([r["document_index"] for r in rows], expected.document_index)
    np.testing.assert_array_equal(chunk_documents(out, J), expected.document_index)
    for c, row in enumerate(rows):
        for j in range(J):
            a, b = row["context_splits"][j], row["context_splits"][j + 1]
            np.testing.assert_array_equal(row["context_values"][a:b], expected.context(c, j))
    batch = ChunkReader(out, J, shuffle=False).collate(rows[5:12])
    want = np.stack([[np.bincount(expected.context(c, j), minlength=len(topic))
                      for j in range(J)] for c in range(5, 12)])
    np.testing.assert_array_equal(batch["context_bow"], want)
    assert batch["context_bow"].dtype == np.float32 and batch["tokens"].shape == (7, J, 30)
    np.testing.assert_array_equal(batch["mask"], (np.arange(30) < expected.lengths[5:12, :, None])
                                  .astype(np.float32))
    # shuffled by chunk: every chunk once per epoch, another order per epoch; two workers
    # (by file) split the epoch without a chunk twice
    reader = ChunkReader(out, J, shuffle=True, buffer_size=20, seed=2)
    first, second = list(reader), list(reader)
    assert _chunk_keys(first) == _chunk_keys(rows) == _chunk_keys(second)
    assert ([r["tokens"].tobytes() for r in first] != [r["tokens"].tobytes() for r in rows]
            and [r["tokens"].tobytes() for r in first] != [r["tokens"].tobytes() for r in second])
    workers = [ChunkReader(out, J, shuffle=True, seed=0, worker=w, num_workers=2)
               for w in range(2)]
    parts = [list(w) for w in workers]
    assert [len(p) for p in parts] == [len(w) for w in workers] and all(parts)
    assert _chunk_keys(parts[0] + parts[1]) == _chunk_keys(rows)


def test_chunk_reader_resumes_mid_epoch_in_the_same_order(tiny_shards):
    from tfktopic.data.shards import ChunkReader

    out, _ = tiny_shards
    full = [r["tokens"].tobytes() for r in ChunkReader(out, 4, buffer_size=16, seed=5)]
    reader = ChunkReader(out, 4, buffer_size=16, seed=5)
    iterator = iter(reader)
    head = [next(iterator)["tokens"].tobytes() for _ in range(41)]
    resumed = ChunkReader(out, 4, buffer_size=16, seed=5)
    resumed.restore(reader.state())
    assert head + [r["tokens"].tobytes() for r in resumed] == full


def test_a_chunk_of_no_window_is_refused():
    from tfktopic.data.shards import ChunkReader

    with pytest.raises(ValueError, match="sentences_per_chunk"):
        ChunkReader("nowhere", 0)


def test_manifest_lists_complete_shards_and_a_killed_preparation_is_not_trusted(
        corpus, prepared, tmp_path):
    out, manifest = prepared
    assert read_manifest(out, verify=True) == manifest
    assert not list(out.glob("*.tmp"))
    assert sum(s["count"] for s in manifest["kinds"]["sentences"]["shards"]) == len(
        list(ShardReader(out, "sentences", shuffle=False)))

    def killed():
        yield from corpus.documents[:20]
        raise KeyboardInterrupt  # the process dies mid-preparation

    with pytest.raises(KeyboardInterrupt):
        prepare_directory(killed, tmp_path, kinds=("sentences",), shard_size=50, **SETTINGS)
    with pytest.raises(ValueError, match="no manifest.json"):
        ShardReader(tmp_path, "sentences")
    # altering a shard is detected by the checksum
    (out / manifest["kinds"]["streams"]["shards"][0]["file"]).write_bytes(b"garbage")
    with pytest.raises(ValueError, match="does not match its manifest checksum"):
        read_manifest(out, verify=True)


def test_prepare_command_splits_like_the_in_memory_path(tmp_path):
    from tfktopic.cli import main
    from tfktopic.data import Corpus
    from tfktopic.data.shards import iter_documents

    path = shared_file("apnews/toy-train.txt")
    out = tmp_path / "prep"
    assert main(["prepare", str(path), "--out", str(out), "--kinds", "sentences", "streams"]) == 0
    corpus = Corpus(list(iter_documents(path, "tdlm")))
    train, valid, _ = corpus.split((0.8, 0.1, 0.1), seed=0)
    lm = Vocabulary.build(train, min_count=3)
    assert Vocabulary.load(out / "train" / "lm_vocab.json") == lm
    topic = TopicVocabulary.build(train, lm)
    # the shards keep file order within a part (Corpus.split keeps the permutation's order)
    from tfktopic.data.shards import split_membership
    member = split_membership(len(corpus), (0.8, 0.1, 0.1), seed=0)
    in_file_order = corpus.subset(np.flatnonzero(member == 1).tolist())
    assert sorted(map(str, in_file_order.documents)) == sorted(map(str, valid.documents))
    expected = sentence_examples(in_file_order, lm, topic)
    rows = list(ShardReader(out / "valid", "sentences", shuffle=False))
    np.testing.assert_array_equal(np.stack([r["tokens"] for r in rows]), expected.tokens)
    for i, row in enumerate(rows):
        np.testing.assert_array_equal(row["context"], expected.context(i))
    assert len(list(ShardReader(out / "test", "streams", shuffle=False))) == len(corpus) - len(
        train) - len(valid)


def test_a_corpus_too_small_to_split_is_refused_before_anything_is_written(tmp_path, capsys):
    """One document (the issue: a 200 MB single-document file was refused only after 114 s
    of reading): refused after the cheap document count, naming the file, no output."""
    from tfktopic.cli import main

    path = tmp_path / "one.txt"
    path.write_text("\t".join(["a b c d"] * 2000) + "\n", encoding="utf-8")
    out = tmp_path / "prep"
    assert main(["prepare", str(path), "--out", str(out)]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert error == [f"tfktopic prepare: error: {path}: 1 documents leave the valid/test split "
                     "empty (80/10/10 by document); use a corpus of at least 10 documents"]
    assert not out.exists()


def _small_imdb(path, n=40):
    import gzip
    import json

    rng = np.random.default_rng(0)
    words = ["film", "great", "plot", "bad", "actor", "story", "boring", "music", "scene", "fun"]
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        for i in range(n):
            text = "<br />".join(" ".join(rng.choice(words, 6)) + "." for _ in range(3))
            handle.write(json.dumps({"split": ("train", "test")[i % 2], "id": i,
                                     "label": ("pos", "neg", "unsup")[i % 3],
                                     "text": text}) + "\n")
    return path


@pytest.mark.parametrize("format", ["imdb", "text"])
def test_imdb_and_raw_text_stream_the_documents_their_readers_return(tmp_path, format):
    from tfktopic.cli import main
    from tfktopic.data import read_imdb, read_text
    from tfktopic.data.shards import count_streamed_documents, iter_documents

    if format == "imdb":
        path = _small_imdb(tmp_path / "reviews.jsonl.gz")
        corpus = read_imdb(path)
    else:
        path = tmp_path / "book.txt"
        path.write_text("\n\n".join(f"Chapter {i} begins. The {'old ' * (i % 3)}man walked "
                                    f"home, slowly.\nIt rained {i} times." for i in range(30)))
        corpus = read_text(path)
    assert list(iter_documents(path, format)) == corpus.documents
    assert count_streamed_documents(path, format) == len(corpus) > 10
    out = tmp_path / "prep"
    assert main(["prepare", str(path), "--format", format, "--out", str(out),
                 "--min-count", "1"]) == 0
    train, _, _ = corpus.split((0.8, 0.1, 0.1), seed=0)
    assert Vocabulary.load(out / "train" / "lm_vocab.json") == Vocabulary.build(train,
                                                                               min_count=1)
    counts = {part: sum(s["count"] for s in read_manifest(out / part)["kinds"]["sentences"][
        "shards"]) for part in ("train", "valid", "test")}
    assert counts["train"] == sum(len(d) for d in train.documents)


def test_an_unknown_streamed_format_is_one_clear_error():
    from tfktopic.data.shards import iter_documents

    with pytest.raises(ValueError, match="streamed preparation reads tdlm, ptb, imdb, text"):
        next(iter_documents("x.txt", "lee"))


def test_the_prepare_command_starts_neither_keras_nor_a_backend(tmp_path):
    """`tfktopic prepare` is numpy only: no Keras, TensorFlow or JAX import (measured on 2 M
    synthetic tokens: peak RSS 279 MB and 15 s, against about 750 MB and 24 s with them)."""
    import subprocess
    import sys

    corpus = tmp_path / "c.txt"
    corpus.write_text("".join(f"the cat {i} sat\tand a dog {i} ran home\n" for i in range(40)),
                      encoding="utf-8")
    code = ("import sys; from tfktopic.cli import main; "
            f"code = main(['prepare', {str(corpus)!r}, '--format', 'tdlm', '--out', "
            f"{str(tmp_path / 'out')!r}, '--min-count', '1']); "
            "print(code, sorted(m for m in ('keras', 'tensorflow', 'jax') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=pathlib.Path(__file__).resolve().parents[2])
    assert result.stdout.strip().splitlines()[-1] == "0 []", result.stderr[-500:]
    assert (tmp_path / "out" / "train" / "manifest.json").is_file()
