"""`studies.study.peer.trace`: each variant changes exactly its one difference from the study's run."""

import pytest

from studies.study.peer import trace


def _resolved(name, command=None):
    from tfktopic import cli
    from tfktopic.runs import build_optimizer

    command = command or trace.trace_command(name, "runs/trace/x")
    _, settings = cli.train_settings(command[command.index("train"):])
    config = build_optimizer(settings, num_train_tokens=1000).get_config()
    config.pop("name")
    return settings, config


def test_each_variant_differs_from_its_baseline_only_in_its_overrides(tmp_path, monkeypatch):
    from studies import common
    from studies.study.protocol import command

    # The commands only name the corpus files; empty stand-ins let the test run without
    # ../shared/data (as on a fresh clone).
    for relative in ("apnews/apnews.txt", "stopwords/mallet_en.txt"):
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).touch()
    monkeypatch.setattr(common, "SHARED_DATA", tmp_path)

    base = {arm: _resolved(name) for name, arm in (("keras", "doc_lstm_keras"),
                                                    ("topicrnn_keras", "doc_topicrnn_keras"))}
    for arm in ("lstm_keras", "topicrnn_keras"):   # the study's runs the sentence variants change
        base[arm] = _resolved(None, command("apnews", arm, trace.CONFIG, 0, "runs/x"))
    for arm in base:
        assert "initialization" not in base[arm][0]["model"], arm
    expected = {
        "gclip0.5": ({}, {"clipnorm": None, "global_clipnorm": 0.5}),
        "torchinit": ({"initialization": "torch"}, {}),
        "torchinit_gclip0.5": ({"initialization": "torch"},
                               {"clipnorm": None, "global_clipnorm": 0.5}),
        "torchinit_lstm_only": ({"initialization": {"lstm": "torch"}}, {}),
        "torchinit_embedding_softmax": (
            {"initialization": {"embedding": "torch", "softmax": "torch"}}, {}),
        "topicrnn_torchinit": ({"initialization": "torch"}, {}),
        "topicrnn_torchinit_gclip0.5": ({"initialization": "torch"},
                                        {"clipnorm": None, "global_clipnorm": 0.5}),
        "sentence_lstm_recipe": ({"initialization": "torch"},
                                 {"clipnorm": None, "global_clipnorm": 0.5}),
        "sentence_topicrnn_recipe": ({"initialization": "torch"},
                                     {"clipnorm": None, "global_clipnorm": 0.5}),
    }
    assert set(expected) | {"keras", "topicrnn_keras"} == set(trace.VARIANTS)
    for name, (model, optimizer) in expected.items():
        settings, config = _resolved(name)
        base_settings, base_config = base[trace.VARIANTS[name][0]]
        assert settings["model"] == {**base_settings["model"], **model}, name
        assert settings["data"] == base_settings["data"], name
        changed = {k: v for k, v in config.items() if base_config.get(k) != v}
        assert changed == optimizer, name


def test_an_unknown_variant_is_named():
    with pytest.raises(SystemExit):
        trace.main(["run", "no_such"])


def test_a_sentence_variant_is_scored_against_the_studys_keras_run_of_its_targets(tmp_path):
    """The sentence-level variants have no peer run: their row is the paired bootstrap
    against the study's record of the same configuration and seed, and a run whose test
    targets differ is refused."""
    import json

    baseline = json.loads(trace.SENTENCE_BASELINES["sentence_lstm_recipe"].read_text())
    nll, tokens = baseline["test_documents"]["nll"], baseline["test_documents"]["tokens"]
    run = tmp_path / "sentence_lstm_recipe"
    run.mkdir()
    (run / "results.json").write_text("{}")
    (run / "run.json").write_text(json.dumps({"progress": {"epochs_done": 5, "history": [
        {"epoch": 1, "val_ppl": 90.0}, {"epoch": 2, "val_ppl": 80.0}]}}))
    (run / "test_documents.json").write_text(json.dumps(
        {"nll": [0.95 * x for x in nll], "tokens": tokens}))
    row = trace.summarize("sentence_lstm_recipe", tmp_path)
    expected = baseline["test"]["perplexity"] ** 0.95
    assert row["test_ppl_all"] == pytest.approx(expected, rel=1e-6)
    assert row["ratio_to_keras"] == pytest.approx(expected / baseline["test"]["perplexity"])
    low, high = row["ratio_to_keras_ci95"]
    assert low < row["ratio_to_keras"] < high < 1 and row["best_epoch"] == 2
    (run / "test_documents.json").write_text(json.dumps(
        {"nll": nll[1:], "tokens": tokens[1:]}))
    with pytest.raises(ValueError, match="test targets differ"):
        trace.summarize("sentence_lstm_recipe", tmp_path)
