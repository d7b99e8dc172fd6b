"""`tfktopic train MODEL --prepared DIR`: training and scoring from `tfktopic prepare`'s shards.

Small real data: the Lee corpus (inside gensim) written as a TDLM file, prepared once per
module; tiny models, 1-2 epochs.
"""

import json

import numpy as np
import pytest

from tfktopic import runs
from tfktopic.data import Corpus, load_corpus
from tfktopic.data.shards import iter_documents, prepare_corpus, split_membership
from tfktopic.errors import TfktopicError
from tfktopic.lda import lda_bow_corpus
from tfktopic.runs.prepared import load_prepared

#: every test passes under KERAS_BACKEND=jax too (the prepared path is TF-free)
pytestmark = pytest.mark.backends

TINY = {"embedding_dim": 16, "hidden_dim": 16}
#: the tiny rGBN-RNN / GBN-RNN (their layers are named otherwise)
TINY_GBN = {"embedding_dim": 16, "hidden_sizes": [16, 8], "topic_sizes": [8, 4]}
#: one layer, no LDA start: the resume test trains three times (under JAX each run compiles)
ONE_LAYER_GBN = {"embedding_dim": 16, "num_layers": 1, "hidden_sizes": [16], "topic_sizes": [8],
                 "decoder_init": "random"}


def _tiny(model_name):
    return TINY_GBN if model_name in ("rgbn_rnn", "gbn_rnn") else TINY


@pytest.fixture(scope="module")
def lee_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("lee") / "lee.txt"
    with open(path, "w", encoding="utf-8") as handle:
        for document in load_corpus("lee"):
            handle.write("\t".join(" ".join(s) for s in document) + "\n")
    return path


@pytest.fixture(scope="module")
def prepared(lee_file, tmp_path_factory):
    out = tmp_path_factory.mktemp("prepared") / "lee"
    prepare_corpus(lee_file, "tdlm", out, kinds=("sentences", "streams"), min_count=3)
    return out


@pytest.fixture(scope="module")
def sentences_only(lee_file, tmp_path_factory):
    out = tmp_path_factory.mktemp("prepared") / "lee-sentences"
    prepare_corpus(lee_file, "tdlm", out, kinds=("sentences",), min_count=3)
    return out


def _settings(model_name):
    settings = runs.preset_settings(model_name, "small")
    settings["model"].update(_tiny(model_name))
    return settings


def _in_memory(lee_file, model_name):
    """The in-memory run on the prepared split (parts in file order, as the shards keep them)."""
    corpus = Corpus(list(iter_documents(lee_file, "tdlm")))
    member = split_membership(len(corpus), (0.8, 0.1, 0.1), seed=0)
    parts = {name: corpus.subset(np.flatnonzero(member == i).tolist())
             for i, name in enumerate(("train", "valid", "test"))}
    settings = _settings(model_name)
    # what the shards were written with (`prepare_corpus`'s defaults)
    settings["data"].update(train_context="preceding", min_count=3, max_freq_fraction=0.001,
                            min_doc_freq=1, stopwords="gensim", max_len=30, context_len=300)
    return runs.prepare_data(settings, parts, model_name=model_name), settings


def _from_shards(prepared, model_name):
    return load_prepared(prepared, model_name, _settings(model_name)["data"])


@pytest.mark.parametrize("model_name", ["lstm", "doc_lstm"])
def test_prepared_run_has_the_in_memory_vocabularies_split_and_test_targets(
        lee_file, prepared, model_name):
    memory, _ = _in_memory(lee_file, model_name)
    shards = _from_shards(prepared, model_name)
    assert shards.lm_vocab == memory.lm_vocab
    assert shards.topic_vocab.words == memory.topic_vocab.words
    for part in ("train", "valid", "test"):
        assert len(shards.parts[part]) == len(memory.parts[part])
        assert len(shards.examples[part]) == len(memory.examples[part])
        assert shards.examples[part].num_targets == memory.examples[part].num_targets
    if model_name == "lstm":
        np.testing.assert_array_equal(shards.examples["test"].document_index,
                                      memory.examples["test"].document_index)
    assert shards.unigram_test() == pytest.approx(memory.unigram_test(), rel=1e-12)


def test_streamed_training_documents_give_the_in_memory_lda_bags_of_words(lee_file, prepared):
    memory, _ = _in_memory(lee_file, "tcnlm")
    shards = _from_shards(prepared, "tcnlm")
    expected = lda_bow_corpus(memory.parts["train"], memory.topic_vocab)
    assert list(shards.parts["train"].topic_bows()) == expected
    assert list(shards.parts["train"].topic_bows()) == expected  # re-iterable (LDA passes)
    # the documents re-read from the shards hold the same topic words in the same order
    words = set(memory.topic_vocab.words)
    for got, want in zip(shards.parts["train"], memory.parts["train"]):
        assert ([w for s in got for w in s if w in words]
                == [w for s in want for w in s if w in words])


@pytest.mark.parametrize("model_name", ["topicrnn", "doc_lstm", "rgbn_rnn", "gbn_rnn",
                                        "doc_lstm_chunked"])
def test_one_model_scores_the_same_test_perplexity_from_shards_and_in_memory(
        lee_file, prepared, model_name):
    memory, settings = _in_memory(lee_file, model_name)
    settings["model"]["decoder_init"] = ("random" if model_name in ("topicrnn", "rgbn_rnn",
                                                                    "gbn_rnn") else None)
    if settings["model"]["decoder_init"] is None:
        del settings["model"]["decoder_init"]
    model = runs.build_model(settings, memory, seed=0)
    shards = _from_shards(prepared, model_name)
    want = memory.score_test(model, 32)
    got = shards.score_test(model, 32)
    assert got.num_tokens == want.num_tokens
    # float32 logits, sums in float64: the same examples in the same batches
    assert got.perplexity == pytest.approx(want.perplexity, rel=1e-5)
    np.testing.assert_allclose(got.document_nll, want.document_nll, rtol=1e-5)


@pytest.mark.parametrize("model_name", ["lstm", "rgbn_rnn", "doc_lstm"])
def test_every_pipeline_read_from_shards_prefetches_without_autotuning(prepared, model_name):
    """tf.data's autotuning thread stalls an iterator's teardown (`prefetched`; from shards,
    timed 7.5 s rounds of rGBN-RNN training ended at exactly 10.24 s): the training stream
    and the evaluation passes read from shards turn it off, as the in-memory ones do."""
    import keras

    if keras.backend.backend() != "tensorflow":
        pytest.skip("tf.data pipelines are built on TensorFlow only")
    data = _from_shards(prepared, model_name)
    pipelines = {"training_stream": data.training_stream(16, seed=0)[0],
                 **{split: data.dataset(split, 16) for split in ("train", "valid", "test")}}
    tuned = [name for name, dataset in pipelines.items()
             if dataset.options().autotune.enabled is not False]
    assert tuned == []
    assert next(iter(pipelines["valid"]))["tokens"].shape[0] > 0


def _numpy(batch):
    return {key: np.asarray(value) for key, value in batch.items()}


@pytest.mark.parametrize("model_name, batch", [("rgbn_rnn", 16), ("doc_lstm_chunked", 64)])
def test_chunk_batches_from_shards_equal_the_in_memory_chunks(lee_file, prepared, model_name,
                                                              batch):
    """Chunks of J = 8 windows (rGBN-RNN: 16 chunks a batch; the chunked document LSTM:
    64 windows, 8 chunks): the same batches in file order, the same chunks shuffled."""
    memory, _ = _in_memory(lee_file, model_name)
    shards = _from_shards(prepared, model_name)
    for part in ("train", "valid", "test"):
        assert len(shards.examples[part]) == len(memory.examples[part])
        assert shards.examples[part].num_targets == memory.examples[part].num_targets
    np.testing.assert_array_equal(shards.examples["test"].document_index,
                                  memory.examples["test"].document_index)
    in_order = {}
    for split in ("train", "valid"):
        steps = memory.steps(split, batch)
        assert shards.steps(split, batch) == steps > 1
        got = [_numpy(b) for b in shards.dataset(split, batch, shuffle=False)]
        want = [_numpy(b) for b in memory.dataset(split, batch, shuffle=False)]
        assert len(got) == len(want) == steps
        for a, b in zip(got, want):
            assert sorted(a) == sorted(b)
            for key in b:
                assert a[key].dtype == b[key].dtype and a[key].shape == b[key].shape
                if key == "context_bow" and split == "train" and not memory.preprocessor.topical:
                    # a model without topics trains with no context: in memory its training
                    # windows get "all_other" ones, the shards keep what they were written with
                    continue
                np.testing.assert_array_equal(a[key], b[key], err_msg=key)
        in_order[split] = got

    def chunks(batches):
        return sorted(row.tobytes() for b in batches for row in
                      np.concatenate([b["tokens"], b["context_bow"].astype(np.int32)], -1))

    shuffled = [_numpy(b) for b in shards.dataset("train", batch, seed=1)]
    assert chunks(shuffled) == chunks(in_order["train"])
    assert not all(np.array_equal(a["tokens"], b["tokens"])
                   for a, b in zip(shuffled, in_order["train"]))


def test_chunk_training_batches_from_shards_are_the_same_under_jax_and_tensorflow(prepared):
    """The shuffled chunk stream of epoch 1 (a resumed run's) is a function of the shards,
    the seed and the epoch only: the same batches, bit for bit, under either backend."""
    from tests import prepared_backend_cases
    from tests.backends import backend_available, run_in_backend

    if not backend_available("jax"):
        pytest.skip("jax is not installed")
    kwargs = dict(directory=str(prepared), model_name="rgbn_rnn", batch_size=16, seed=3,
                  initial_epoch=1, count=3)
    theirs = run_in_backend("jax", "tests.prepared_backend_cases:training_chunks", **kwargs)
    ours = prepared_backend_cases.training_chunks(**kwargs)
    assert sorted(ours) == sorted(theirs) and ours["tokens"].shape == (48, 8, 30)
    for key in ours:
        np.testing.assert_array_equal(ours[key], theirs[key], err_msg=key)


def _history(out):
    return json.loads((out / "run.json").read_text())["progress"]["history"]


def test_training_from_shards_lowers_the_loss_and_writes_a_scored_run(prepared, tmp_path):
    import warnings

    out = tmp_path / "run"
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*ran out of data.*")  # epochs line up
        summary = runs.train_run("lstm", out, prepared=prepared, epochs=2, overrides=TINY,
                                 verbose=0, log=None, learning_rate=0.01)
    history = _history(out)
    assert history[1]["loss"] < history[0]["loss"]
    assert summary["test"]["num_tokens"] > 0 and np.isfinite(summary["test"]["perplexity"])
    assert json.loads((out / "run.json").read_text())["split"] == "prepared"


@pytest.mark.parametrize("model_name", ["lstm", "doc_lstm", "rgbn_rnn"])
def test_an_interrupted_prepared_run_resumes_to_the_uninterrupted_result(prepared, tmp_path,
                                                                          model_name):
    overrides = ONE_LAYER_GBN if model_name == "rgbn_rnn" else TINY
    kwargs = dict(prepared=prepared, overrides=overrides, verbose=0, log=None,
                  learning_rate=0.01)
    straight = runs.train_run(model_name, tmp_path / "straight", epochs=2, **kwargs)
    runs.train_run(model_name, tmp_path / "resumed", epochs=1, **kwargs)  # stopped after 1
    resumed = runs.train_run(model_name, tmp_path / "resumed", epochs=2, **kwargs)
    assert [h["loss"] for h in _history(tmp_path / "resumed")] == pytest.approx(
        [h["loss"] for h in _history(tmp_path / "straight")], rel=1e-6)
    assert resumed["test"]["perplexity"] == pytest.approx(straight["test"]["perplexity"],
                                                          rel=1e-6)


def test_a_chunk_model_trains_from_sentence_shards_and_writes_a_scored_run(prepared, tmp_path):
    import warnings

    out = tmp_path / "run"
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*ran out of data.*")  # epochs line up
        summary = runs.train_run("rgbn_rnn", out, prepared=prepared, epochs=2,
                                 overrides=TINY_GBN, verbose=0, log=None, learning_rate=0.01)
    history = _history(out)
    assert history[1]["loss"] < history[0]["loss"]
    assert summary["test"]["num_tokens"] > 0 and np.isfinite(summary["test"]["perplexity"])
    run = json.loads((out / "run.json").read_text())
    assert run["split"] == "prepared"
    # the training examples counted (rGBN-RNN's TLASGR scale) are chunks, not documents
    assert run["data"]["sentences_per_chunk"] == 8 and summary["topics"]
    shards = _from_shards(prepared, "rgbn_rnn")
    assert len(shards.examples["train"]) > len(shards.parts["train"])


def test_a_streamed_document_model_trains_from_stream_shards(prepared, tmp_path):
    summary = runs.train_run("doc_lstm", tmp_path / "run", prepared=prepared, epochs=1,
                             overrides=TINY, verbose=0, log=None)
    assert summary["test"]["num_tokens"] > 0 and np.isfinite(summary["test"]["perplexity"])


# ------------------------------------------------------------------------------ refusals
def _one_line(error):
    message = str(error.value)
    assert "\n" not in message
    return message


def test_a_directory_that_is_not_prepared_is_refused_in_one_line(tmp_path):
    with pytest.raises(TfktopicError) as error:
        runs.train_run("lstm", tmp_path / "run", prepared=tmp_path, log=None)
    assert "not a prepared directory" in _one_line(error)
    assert "tfktopic prepare" in _one_line(error)


def test_a_missing_example_kind_is_refused_naming_the_prepare_kinds(sentences_only, tmp_path):
    with pytest.raises(TfktopicError) as error:
        runs.train_run("doc_lstm", tmp_path / "run", prepared=sentences_only, log=None)
    assert "--kinds sentences streams" in _one_line(error)
    assert not (tmp_path / "run").exists()


def test_every_model_trains_from_the_shards_prepare_writes():
    from tfktopic.data.shards import KINDS
    from tfktopic.models import registry
    from tfktopic.runs.prepared import shard_kind

    assert {name: shard_kind(name) in KINDS for name in registry.names()} == {
        name: True for name in registry.names()}
    assert shard_kind("rgbn_rnn") == shard_kind("doc_lstm_chunked") == "sentences"


def test_prepare_help_names_every_model_under_the_kind_it_trains_from(capsys):
    import re

    from tfktopic.cli import main
    from tfktopic.models import registry
    from tfktopic.runs.prepared import shard_kind

    with pytest.raises(SystemExit):
        main(["prepare", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    listed = {kind: set(re.findall(r"[a-z_]+", re.search(kind + r" \(([^)]*)\)", text)[1].split(":")[-1]))
              for kind in ("sentences", "streams")}
    assert {name: shard_kind(name) for name in registry.names()} == {
        name: kind for kind, names in listed.items() for name in names}


@pytest.mark.parametrize("override, named", [
    (["max_len=20"], "max_len=20"), (["min_count=5"], "min_count=5"),
    (["train_context=all_other"], "train_context=all_other")])
def test_a_setting_the_shards_fix_is_refused_when_it_conflicts(prepared, tmp_path, override,
                                                               named):
    with pytest.raises(TfktopicError) as error:
        runs.train_run("topicrnn", tmp_path / "run", prepared=prepared, overrides=override,
                       log=None)
    assert named in _one_line(error) and "was prepared with" in _one_line(error)


def test_a_chunk_of_no_sentence_window_is_refused_in_one_line(prepared, tmp_path):
    with pytest.raises(TfktopicError) as error:
        runs.train_run("rgbn_rnn", tmp_path / "run", prepared=prepared,
                       overrides=["sentences_per_chunk=0"], log=None)
    assert "sentences_per_chunk=0" in _one_line(error)
    assert not (tmp_path / "run").exists()


def test_corpus_options_beside_a_prepared_directory_are_refused(prepared, tmp_path):
    with pytest.raises(TfktopicError) as error:
        runs.train_run("lstm", tmp_path / "run", prepared=prepared, max_documents=10, log=None)
    assert "--max-documents" in _one_line(error)


def test_the_command_line_trains_from_a_prepared_directory(prepared, tmp_path, capsys):
    from tfktopic.cli import main

    out = tmp_path / "run"
    assert main(["train", "lstm", "--prepared", str(prepared), "--out", str(out), "--epochs",
                 "1", "--set", "hidden_dim=16", "--set", "embedding_dim=16",
                 "--verbose", "0"]) == 0
    assert "prepared shards" in capsys.readouterr().out
    assert (out / "results.json").exists()
    # `evaluate` re-reads corpora: the run's own split is refused in one line
    assert main(["evaluate", str(out)]) == 2
    error = capsys.readouterr().err.strip()
    assert "\n" not in error and "trained from this prepared directory" in error


def test_training_windows_prepared_with_all_other_contexts_equal_the_in_memory_ones(
        lee_file, tmp_path):
    from tfktopic.data.shards import ShardReader

    out = tmp_path / "prep"
    prepare_corpus(lee_file, "tdlm", out, kinds=("sentences",), min_count=3,
                   protocol="all_other")
    shards = _from_shards(out, "topicrnn")
    assert shards.data["train_context"] == "all_other"
    memory, _ = _in_memory(lee_file, "topicrnn")
    expected = runs.make_examples("topicrnn", memory.parts["train"], memory.lm_vocab,
                                  memory.topic_vocab, shards.data, protocol="all_other")
    rows = list(ShardReader(out / "train", "sentences", shuffle=False))
    assert len(rows) == len(expected)
    for i in range(0, len(rows), 97):
        np.testing.assert_array_equal(rows[i]["context"], expected.context(i))
    # validation and test stay leak-free
    assert shards.manifests["test"]["kinds"]["sentences"]["protocol"] == "preceding"


def test_prepare_max_size_caps_the_vocabulary_and_a_run_cannot_change_it(lee_file, tmp_path):
    from tfktopic.cli import main

    out = tmp_path / "prep"
    assert main(["prepare", str(lee_file), "--out", str(out), "--max-size", "300"]) == 0
    shards = _from_shards(out, "lstm")
    assert len(shards.lm_vocab) == 300 and shards.data["max_size"] == 300
    with pytest.raises(TfktopicError) as error:
        runs.train_run("lstm", tmp_path / "run", prepared=out, overrides=["max_size=400"],
                       log=None)
    assert "max_size=400" in _one_line(error)


def test_an_input_pipeline_of_two_reads_only_its_training_shard_files(lee_file, tmp_path):
    """`load_prepared(workers=(1, 2))` (what `tfktopic.distribute.input_workers` gives the
    second JAX process or TF_CONFIG worker): training reads shard files 1, 3, ... and the
    test split stays whole; one epoch of the training stream holds exactly the examples of
    those files (JAX: B / 2 rows per step and the common step count, mask-zero filled)."""
    from tfktopic import backend
    from tfktopic.distribute import distribute_dataset

    out = tmp_path / "lee"
    prepare_corpus(lee_file, "tdlm", out, kinds=("sentences",), min_count=3, shard_size=300)
    data = _settings("lstm")["data"]
    whole = load_prepared(out, "lstm", data)
    second = load_prepared(out, "lstm", data, workers=(1, 2))
    shards = second.manifests["train"]["kinds"]["sentences"]["shards"]
    assert len(shards) >= 4
    assert ([s["file"] for s in second._reader("train", True, 0).shards]
            == [s["file"] for s in shards[1::2]])
    test = second.manifests["test"]["kinds"]["sentences"]["shards"]
    assert len(second._reader("test", False, 0).shards) == len(test)
    assert any("split by file over 2 input pipelines" in note for note in second.notes)
    assert not any("split by file" in note for note in whole.notes)
    mine = sum(int(s["count"]) for s in shards[1::2])
    batch = 32
    stream, steps = second.training_stream(batch, seed=0)
    assert getattr(stream, "process_local", False)
    if backend.is_tensorflow():  # tf.distribute splits the global batch; steps stay global
        assert steps == whole.steps("train", batch)
        assert (distribute_dataset(stream).options().experimental_distribute
                .auto_shard_policy == __import__("tensorflow").data.experimental
                .AutoShardPolicy.OFF)
        epoch = list(stream.take(-(-mine // batch)))
        assert [int(b["tokens"].shape[0]) for b in epoch][:-1] == [batch] * (len(epoch) - 1)
        assert sum(int(b["tokens"].shape[0]) for b in epoch) == mine
    else:  # JAX: this process's B / 2 rows per step, the most steps of either process
        rows = [sum(int(s["count"]) for s in shards[w::2]) for w in (0, 1)]
        assert steps == max(-(-r // (batch // 2)) for r in rows)
        epoch = [stream[i] for i in range(steps)]
        assert max(len(b["tokens"]) for b in epoch) == batch // 2
        assert sum(len(b["tokens"]) for b in epoch) == mine
