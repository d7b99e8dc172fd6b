"""The comparison protocol (issue 13, DESIGN.md §5a): same targets, convergence, documents.

* every model scores exactly the same target tokens of every test document
  (the streamed document LSTM included), and the per-document NLL sums of the
  paired bootstrap add up to the reported perplexity;
* the streamed models train through ``train_run`` (the user's path);
* early stopping stops after `patience` epochs without a lower validation
  perplexity, keeps the best epoch, records what stopped the run, and a
  finished run is not trained again when its command is run again;
* ``split_seed`` fixes the split while the training seed changes.
"""

import json

import numpy as np
import pytest

from tfktopic import runs
from tfktopic.runs import stopping

DOCS = 40
# Tiny constructor settings of every model name (weights are not trained here).
TINY = {
    "lstm": {"hidden_dim": 8, "embedding_dim": 8},
    "doc_lstm": {"hidden_dim": 8, "embedding_dim": 8},
    "doc_lstm_chunked": {"hidden_dim": 8, "embedding_dim": 8},
    "lda_lstm": {"hidden_dim": 8, "embedding_dim": 8, "num_topics": 3, "lda_iterations": 5,
                 "lda_passes": 1},
    "topicrnn": {"hidden_dim": 8, "embedding_dim": 8, "num_topics": 3, "encoder_units": [8]},
    "doc_topicrnn": {"hidden_dim": 8, "embedding_dim": 8, "num_topics": 3,
                     "encoder_units": [8]},
    "tcnlm": {"hidden_dim": 8, "factor_dim": 8, "embedding_dim": 8, "ntm_units": [8],
              "num_topics": 3},
    "rgbn_rnn": {"hidden_sizes": [8, 8], "topic_sizes": [4, 3], "embedding_dim": 8},
    "gbn_rnn": {"hidden_sizes": [8, 8], "topic_sizes": [4, 3], "embedding_dim": 8},
}


@pytest.fixture(scope="module")
def lee_data():
    settings = runs.preset_settings("lstm", "small")
    return runs.prepare_data(settings, "lee", max_documents=DOCS, seed=0)


def test_every_model_name_has_tiny_settings_here():
    assert sorted(TINY) == sorted(runs.MODELS)


def test_every_model_scores_the_same_targets_of_every_document(lee_data):
    """The unit of the paired bootstrap: the same D documents and the same predicted
    tokens in each, for every model; their NLL sums add up to the perplexity."""
    test = lee_data.parts["test"]
    tokens = {}
    for name in runs.MODELS:
        settings = runs.preset_settings(name, "small")
        runs.apply_overrides(settings, TINY[name])
        settings["training"]["batch_size"] = 4
        data = lee_data.for_model(name)
        model = runs.build_model(settings, data, seed=0, compile=False)
        result, _ = runs.score_perplexity(name, model, test, data.lm_vocab, data.topic_vocab,
                                          data.data, batch_size=4)
        assert result.document_nll.shape == (len(test),), name
        assert np.all(result.document_nll > 0), name
        np.testing.assert_allclose(result.document_nll.sum(), result.nll_sum, rtol=1e-9)
        assert int(result.document_tokens.sum()) == result.num_tokens, name
        tokens[name] = result.document_tokens
    for name, counts in tokens.items():
        np.testing.assert_array_equal(counts, tokens["lstm"], err_msg=name)


def test_document_sums_do_not_depend_on_the_batch_size(lee_data):
    """Per-document NLLs of the streamed LSTM (state carried per document) and of the
    sentence LSTM are the same whatever the evaluation batch."""
    test = lee_data.parts["test"]
    for name in ("doc_lstm", "lstm"):
        settings = runs.preset_settings(name, "small")
        runs.apply_overrides(settings, TINY[name])
        settings["training"]["batch_size"] = 8
        data = lee_data.for_model(name)
        model = runs.build_model(settings, data, seed=0, compile=False)
        score = lambda batch: runs.score_perplexity(name, model, test, data.lm_vocab,
                                                   data.topic_vocab, data.data,
                                                   batch_size=batch)[0]
        small, large = score(3), score(8)
        np.testing.assert_allclose(small.document_nll, large.document_nll, rtol=2e-5,
                                   err_msg=name)


@pytest.mark.parametrize("history, patience, expected", [
    ([90, 85, 86, 85.5], 2, ("early_stopping", 2)),
    ([90, 85, 86, 85.5], 3, None),
    ([90, 85, 84, 83], 2, None),
    ([90, 90, 90], 2, ("early_stopping", 1)),        # equal is not better
    ([90, 85, 86], None, None),                     # no patience: never early
    ([float("nan"), float("nan")], 2, ("early_stopping", None)),
])
def test_stop_reason_is_a_function_of_the_validation_history(history, patience, expected):
    reason = stopping.stop_reason([{"val_ppl": v} for v in history], patience, 40)
    if expected is None:
        assert reason is None
    else:
        assert (reason["stopped_by"], reason["best_epoch"]) == expected


def test_stop_reason_can_watch_another_logged_value():
    history = [{"val_ppl": 90, "valid_avg_ppl": 80}, {"val_ppl": 95, "valid_avg_ppl": 79},
               {"val_ppl": 99, "valid_avg_ppl": 78}]
    assert stopping.stop_reason(history, 2, 40)["best_epoch"] == 1
    assert stopping.stop_reason(history, 2, 40, monitor="valid_avg_ppl") is None
    assert stopping.best_epoch(history, "valid_avg_ppl") == 3


def test_stop_reason_at_the_epoch_budget():
    reason = stopping.stop_reason([{"val_ppl": v} for v in (9, 8, 7)], 2, 3)
    assert reason["stopped_by"] == "max_epochs" and reason["best_epoch"] == 3


def _run(out, name="lstm", **kwargs):
    options = dict(corpus="lee", max_documents=DOCS, epochs=6, batch_size=16,
                   overrides=dict(TINY[name]), verbose=0, log=None)
    options.update(kwargs)
    return runs.train_run(name, out, **options)


def test_early_stopping_stops_after_patience_epochs_and_a_rerun_trains_no_more(tmp_path):
    """A learning rate of 1e-12 leaves the float32 weights unchanged, so the validation
    perplexity never gets lower after epoch 1: patience 2 stops after epoch 3, the
    record says so, and running the command again trains nothing more."""
    out = tmp_path / "run"
    summary = _run(out, learning_rate=1e-12, patience=2)
    assert summary["training"]["stopped_by"] == "early_stopping"
    assert (summary["training"]["epochs"], summary["training"]["best_epoch"]) == (3, 1)
    history = json.loads((out / "run.json").read_text())["progress"]["history"]
    assert len(history) == 3 and all(h["seconds"] > 0 for h in history)
    again = _run(out, learning_rate=1e-12, patience=2)
    assert len(json.loads((out / "run.json").read_text())["progress"]["history"]) == 3
    assert again["test"] == summary["test"]


def test_the_streamed_document_lstm_trains_through_train_run(tmp_path):
    """doc_lstm: streamed batches in fit, validation and test; it trains (far below
    a uniform guess; learning on real data: tests/test_document_lstm.py), writes the
    per-document NLLs, and its test tokens are those of the sentence-level LSTM on
    the same split."""
    doc = _run(tmp_path / "doc", "doc_lstm", epochs=3, batch_size=4, learning_rate=1e-2)
    sentence = _run(tmp_path / "lstm", "lstm", epochs=1)
    assert doc["test"]["num_tokens"] == sentence["test"]["num_tokens"]
    config = json.loads((tmp_path / "doc" / "run.json").read_text())
    assert len(config["progress"]["history"]) == 3
    vocabulary = config["vocabularies"]["lm_vocab.json"]["size"]
    assert config["progress"]["best_val_ppl"] < 0.2 * vocabulary
    assert "streamed" in doc["test"]["protocol"]
    documents = json.loads((tmp_path / "doc" / "test_documents.json").read_text())
    lstm_documents = json.loads((tmp_path / "lstm" / "test_documents.json").read_text())
    assert documents["tokens"] == lstm_documents["tokens"]
    assert np.exp(sum(documents["nll"]) / sum(documents["tokens"])) == pytest.approx(
        doc["test"]["perplexity"], rel=1e-6)


def test_split_seed_fixes_the_split_while_the_seed_changes(tmp_path):
    a = _run(tmp_path / "a", epochs=1, seed=1, split_seed=0)
    b = _run(tmp_path / "b", epochs=1, seed=2, split_seed=0)
    tokens = [json.loads((tmp_path / n / "test_documents.json").read_text())["tokens"]
              for n in "ab"]
    assert tokens[0] == tokens[1]
    assert a["test"]["perplexity"] != b["test"]["perplexity"]   # other initialisation
    c = _run(tmp_path / "c", epochs=1, seed=2)                   # split seed = seed
    other = json.loads((tmp_path / "c" / "test_documents.json").read_text())["tokens"]
    assert other != tokens[0]
    assert c["split_seed"] == 2 and a["split_seed"] == 0


def test_a_corpus_that_comes_split_keeps_its_own_split(tmp_path, ptb_dir):
    """ptb.train.txt next to ptb.valid.txt and ptb.test.txt: the papers' split, not an
    80/10/10 split of the training file; `evaluate` recomputes the same test part."""
    from tfktopic.data import read_ptb

    out = tmp_path / "ptb"
    summary = _run(out, "lstm", corpus=str(ptb_dir / "ptb.train.txt"), epochs=1,
                   max_documents=20, stopwords="none")
    config = json.loads((out / "run.json").read_text())
    assert sorted(config["split"]["given"]) == ["test", "train", "valid"]
    test = read_ptb(ptb_dir / "ptb.test.txt").subset(range(20))
    assert summary["test"]["num_tokens"] == sum(len(s) + 1 for s in test.sentences())
    evaluated = runs.evaluate_run(runs.load_run(out), num_generated=0, log=None)
    assert evaluated["perplexity"]["perplexity"] == pytest.approx(
        summary["test"]["perplexity"], rel=1e-6)


def test_other_protocols_score_a_finished_run_on_the_same_targets(tmp_path, monkeypatch):
    """`studies.study.scheduler.score_protocols`: the run directory's model, scored with every other
    sentence as topic context and with none, is what `tfktopic evaluate --protocol all-other`
    / `none` gives, on the record's target tokens; each is stored once; a model without a
    topic context gets nothing; a directory whose model does not reproduce its record is
    refused."""
    study = pytest.importorskip("studies.study.protocol")
    scheduler = pytest.importorskip("studies.study.scheduler")
    monkeypatch.setattr(study, "RESULTS", tmp_path / "results")
    root = tmp_path / "runs"
    for arm, model in (("topicrnn", "topicrnn"), ("lstm", "lstm")):
        out = study.run_dir(root, "apnews", arm, "lr4e-3_do0.5", 0)
        _run(out, model, epochs=1)
        scheduler.collect("apnews", arm, "lr4e-3_do0.5", 0, out, ["python", "-m", "tfktopic"])
    path = study.record_path("apnews", "topicrnn", "lr4e-3_do0.5", 0)
    scores = scheduler.score_protocols("apnews", "topicrnn", "lr4e-3_do0.5", 0, root)
    run = runs.load_run(study.run_dir(root, "apnews", "topicrnn", "lr4e-3_do0.5", 0))
    record = json.loads(path.read_text())
    tokens = record["test_documents"]["tokens"]
    for key, protocol in ((study.PAPERS_PROTOCOL, "all-other"), (study.NO_CONTEXT, "none")):
        expected = runs.evaluate_run(run, protocol=protocol, num_generated=0, log=None)
        assert scores[key] == pytest.approx(expected["perplexity"]["perplexity"], rel=1e-6)
        scored = record[key]
        assert len(scored["nll"]) == len(tokens)
        assert np.exp(sum(scored["nll"]) / sum(tokens)) == pytest.approx(scores[key], rel=1e-5)
    # the context changed the scores
    assert record[study.PAPERS_PROTOCOL]["nll"] != record["test_documents"]["nll"]
    assert scheduler.score_protocols("apnews", "lstm", "lr4e-3_do0.5", 0, root) is None
    assert study.PAPERS_PROTOCOL not in json.loads(
        study.record_path("apnews", "lstm", "lr4e-3_do0.5", 0).read_text())
    # stored once: a second call reads the record
    monkeypatch.setattr(runs, "load_run", None)
    assert scheduler.score_protocols("apnews", "topicrnn", "lr4e-3_do0.5", 0, root) == scores
    monkeypatch.undo()
    monkeypatch.setattr(study, "RESULTS", tmp_path / "results")
    del record[study.NO_CONTEXT]
    record["test"]["perplexity"] *= 1.01
    path.write_text(json.dumps(record))
    with pytest.raises(ValueError, match="scores .* leak-free, the record"):
        scheduler.score_protocols("apnews", "topicrnn", "lr4e-3_do0.5", 0, root)
    with pytest.raises(FileNotFoundError, match="not trained here"):
        scheduler.score_protocols("apnews", "topicrnn", "lr4e-3_do0.5", 0, tmp_path / "x")
