"""The statistics and baselines of the claims benchmarks (issue 53): BLEU verdicts and IMDB."""

import json
import math
import pathlib
import random

import numpy as np
import pytest

from studies.claims import bleu_claim, imdb_sentiment


def test_welch_interval_matches_the_t_formula_and_contains_the_difference():
    a, b = [0.30, 0.32, 0.31, 0.29, 0.33], [0.25, 0.26, 0.24, 0.27, 0.25]
    diff, low, high = bleu_claim.welch(a, b)
    assert diff == pytest.approx(np.mean(a) - np.mean(b))
    se = math.sqrt(np.var(a, ddof=1) / 5 + np.var(b, ddof=1) / 5)
    df = se ** 4 / ((np.var(a, ddof=1) / 5) ** 2 / 4 + (np.var(b, ddof=1) / 5) ** 2 / 4)
    assert 6 < df < 8
    assert low < diff < high
    assert (high - low) / 2 == pytest.approx(bleu_claim._t975(df) * se)


def test_welch_interval_covers_the_true_difference_about_95_percent_of_the_time():
    rng = random.Random(0)
    covered = 0
    for _ in range(400):
        a = [rng.gauss(1.0, 0.2) for _ in range(5)]
        b = [rng.gauss(0.8, 0.1) for _ in range(5)]
        _, low, high = bleu_claim.welch(a, b)
        covered += low <= 0.2 <= high
    assert 0.90 <= covered / 400 <= 0.99


def test_verdict_directions_of_test_bleu_and_self_bleu():
    # test-BLEU: higher is better; self-BLEU: lower is better (more diverse).
    assert bleu_claim.verdict(0.01, 0.02, better_is_higher=True) == "held"
    assert bleu_claim.verdict(-0.02, -0.01, better_is_higher=True) == "not held"
    assert bleu_claim.verdict(-0.02, -0.01, better_is_higher=False) == "held"
    assert bleu_claim.verdict(-0.01, 0.01, better_is_higher=False) == "inconclusive"


def test_better_and_more_diverse_needs_both_parts_held():
    assert bleu_claim.joint_verdict("held", "held") == "held"
    assert bleu_claim.joint_verdict("held", "inconclusive") == "inconclusive"
    assert bleu_claim.joint_verdict("held", "not held") == "not held"
    assert bleu_claim.joint_verdict("inconclusive", "not held") == "not held"


def test_verdict_rows_are_pasted_between_the_markers_only(tmp_path):
    page = tmp_path / "study.md"
    page.write_text("before\n<!-- claim:bleu -->\nold rows\n<!-- /claim:bleu -->\nafter\n")
    assert bleu_claim.paste_verdicts(page)
    text = page.read_text()
    assert text.startswith("before\n<!-- claim:bleu -->") and text.endswith(
        "<!-- /claim:bleu -->\nafter\n")
    assert "old rows" not in text and "Guo et al. 2020" in text
    untouched = tmp_path / "other.md"
    untouched.write_text("no markers\n")
    assert not bleu_claim.paste_verdicts(untouched)
    assert untouched.read_text() == "no markers\n"


def _bleu_record(arm, training_seed, level):
    """An arm record of `score` with five generation seeds around `level`."""
    seeds = {str(g): {f"{kind}_bleu_{n}": level + 0.001 * g + 0.01 * training_seed
                      for n in bleu_claim.ORDERS for kind in ("test", "self")}
             for g in range(5)}
    return {"arm": arm, "training_seed": training_seed, "seeds": seeds, "test_perplexity": 70.0}


def test_bleu_intervals_are_over_training_seeds_once_both_arms_have_two(tmp_path):
    folder = tmp_path / "sample"
    folder.mkdir()
    page = tmp_path / "study.md"
    page.write_text("<!-- claim:bleu -->\n<!-- /claim:bleu -->\n")

    def write(arm, seed, level):
        path = bleu_claim.arm_record_path("sample", arm, seed)
        (folder / path.name).write_text(json.dumps(_bleu_record(arm, seed, level)))

    write("rgbn_rnn_1", 0, 0.50)
    write("lstm", 0, 0.40)
    assert bleu_claim.arm_record_path("sample", "lstm", 0).name == "lstm.json"
    assert bleu_claim.arm_record_path("sample", "lstm", 2).name == "lstm-s2.json"
    rows = [r for r in bleu_claim.report("sample", tmp_path, page)["claims"]
            if r["claim"] == "rgbn_rnn_1 vs lstm"]
    assert rows and all(r["units"] == "generation seeds" for r in rows)
    assert rows[0]["difference"] == pytest.approx(0.10)
    for seed in (1, 2):
        write("rgbn_rnn_1", seed, 0.50)
        write("lstm", seed, 0.40)
    summary = bleu_claim.report("sample", tmp_path, page)
    rows = [r for r in summary["claims"] if r["claim"] == "rgbn_rnn_1 vs lstm"]
    assert all(r["units"] == "training seeds" for r in rows)
    # one value per training seed: the same shift in both arms leaves the difference, and
    # the seed-to-seed spread (0.01) widens the interval beyond the generation seeds' one.
    assert rows[0]["difference"] == pytest.approx(0.10)
    assert summary["arms"]["lstm"]["training_seeds"] == [0, 1, 2]
    assert "| training seeds |" in page.read_text()


def test_ngram_matrix_is_binary_and_drops_unseen_ngrams_of_later_documents():
    train, vocabulary = imdb_sentiment.ngram_matrix([["a", "b", "a"], ["b", "c"]], (1, 2))
    assert set(vocabulary) == {"a", "b", "c", "a b", "b a", "b c"}
    assert train.max() == 1.0 and train[0].sum() == 4            # a, b, a b, b a
    test, _ = imdb_sentiment.ngram_matrix([["a", "z", "c"]], (1, 2), vocabulary)
    assert test.sum() == 2 and test.shape[1] == len(vocabulary)  # a, c; z and a z unseen


def test_nb_ratio_is_the_log_count_ratio_with_alpha_smoothing():
    import scipy.sparse

    x = scipy.sparse.csr_matrix(np.array([[1, 0], [1, 1], [0, 1]], float))
    y = np.array([1.0, 1.0, -1.0])
    p, q = np.array([3.0, 2.0]), np.array([1.0, 2.0])          # alpha + counts
    np.testing.assert_allclose(imdb_sentiment.nb_ratio(x, y),
                               np.log(p / p.sum()) - np.log(q / q.sum()))


@pytest.mark.parametrize("loss", ["logistic", "squared_hinge"])
def test_linear_classifier_separates_a_separable_problem(loss):
    import scipy.sparse

    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 5))
    y = np.where(x @ np.array([1.0, -2.0, 0.5, 0.0, 0.0]) + 0.3 > 0, 1.0, -1.0)
    w, b, fit = imdb_sentiment.fit_linear(scipy.sparse.csr_matrix(x), y, loss, c=10.0)
    assert fit["converged"]
    assert np.mean(np.sign(x @ w + b) == y) >= 0.97


def test_rnn_features_are_the_state_after_each_rows_last_token():
    """The ``rnn`` arm's feature of a padded row is the top layer's output at its last real
    token: the same as running the unpadded row alone."""
    import keras

    from tfktopic.data import TopicVocabulary, Vocabulary, load_corpus

    corpus = load_corpus("lee").subset(range(20))
    lm_vocab = Vocabulary.build(corpus, min_count=1, max_size=300)
    topic_vocab = TopicVocabulary.build(corpus, lm_vocab, max_freq_fraction=0.0)
    keras.utils.set_random_seed(0)
    rnn = imdb_sentiment.feature_model("rnn", "small", lm_vocab, topic_vocab, seed=0)
    topicrnn = imdb_sentiment.feature_model("topicrnn", "small", lm_vocab, topic_vocab, seed=0)
    assert (rnn.hidden_dim, rnn.num_layers) == (topicrnn.hidden_dim, topicrnn.num_layers) == (
        imdb_sentiment.SIZES["small"]["hidden_dim"], imdb_sentiment.SIZES["small"]["num_layers"])
    assert topicrnn.num_topics == imdb_sentiment.NUM_TOPICS and topicrnn.cell == "rnn"
    rows = np.array([[1, 5, 9, 4, 0, 0], [1, 7, 3, 8, 6, 2]], np.int32)
    states = imdb_sentiment.last_states(rnn, [{"tokens": rows}])
    assert states.shape == (2, rnn.hidden_dim)
    for row, length in ((0, 4), (1, 6)):
        alone = rnn({"tokens": rows[row:row + 1, :length]}, training=False, return_features=True)
        np.testing.assert_allclose(states[row], np.asarray(alone)[0, -1], rtol=1e-5, atol=1e-6)
    lstm = imdb_sentiment.feature_model("lstm", "small", lm_vocab, topic_vocab, seed=0)
    assert (lstm.cell, lstm.hidden_dim, lstm.num_layers) == ("lstm", rnn.hidden_dim,
                                                             rnn.num_layers)
    assert rnn.cell == "rnn"
    assert imdb_sentiment.last_states(lstm, [{"tokens": rows}]).shape == (2, lstm.hidden_dim)
    with pytest.raises(ValueError, match="arm must be"):
        imdb_sentiment.feature_arm("gru", 0)


def test_error_difference_is_paired_over_reviews_and_seeds():
    rng = np.random.default_rng(0)
    base = rng.random(4000) < 0.8                                   # 80 % right
    same = imdb_sentiment.error_difference(base, base, num_resamples=300)
    assert same == (0.0, 0.0, 0.0)                                  # paired: no spread at all
    better = base.copy()
    better[np.flatnonzero(~base)[:200]] = True                      # 200 more right: -5 points
    diff, low, high = imdb_sentiment.error_difference(better, base, num_resamples=500)
    assert diff == pytest.approx(-0.05) and low < diff < high < 0
    # two seeds that disagree widen the interval against one seed
    seeds = np.stack([better, base])
    _, low2, high2 = imdb_sentiment.error_difference(seeds, base, num_resamples=500)
    assert high2 - low2 > high - low
    with pytest.raises(ValueError, match="same test reviews"):
        imdb_sentiment.error_difference(base, base[:10])


def _sentiment_record(path, arm, seed, correct):
    import json

    record = {"arm": arm, "seed": seed, "error": 1.0 - float(np.mean(correct)),
              "test_ids_checksum": "same", "correct": "".join("1" if c else "0" for c in correct)}
    name = arm if seed is None else f"{arm}-s{seed}"
    (path / f"{name}.json").write_text(json.dumps(record))


def test_sentiment_report_waits_for_three_seeds_then_decides(tmp_path):
    rng = np.random.default_rng(1)
    base = rng.random(2000) < 0.85
    _sentiment_record(tmp_path, "nbsvm_bi", None, base)
    good = base | (rng.random(2000) < 0.5)                          # about 7 points better
    _sentiment_record(tmp_path, "topicrnn-small", 0, good)
    page = tmp_path / "study.md"
    page.write_text("<!-- claim:imdb_sentiment -->\n<!-- /claim:imdb_sentiment -->\n")
    summary = imdb_sentiment.report(tmp_path, page)
    row = next(r for r in summary["claims"] if r["other"] == "nbsvm_bi")
    assert row["verdict"] == "pending" and "1/3 seeds" in row["missing"][0]
    for seed in (1, 2):
        _sentiment_record(tmp_path, "topicrnn-small", seed, good)
    summary = imdb_sentiment.report(tmp_path, page)
    row = next(r for r in summary["claims"] if r["other"] == "nbsvm_bi")
    assert row["verdict"] == "held" and row["high"] < 0
    assert "| topicrnn-small vs nbsvm_bi |" in page.read_text()


def test_error_interval_covers_the_error_and_narrows_with_more_reviews():
    rng = np.random.default_rng(2)
    small, large = rng.random(400) < 0.9, rng.random(8000) < 0.9
    for correct in (small, large):
        error, low, high = imdb_sentiment.error_interval(correct, num_resamples=500)
        assert error == pytest.approx(1.0 - correct.mean()) and low < error < high
    _, low_s, high_s = imdb_sentiment.error_interval(small, num_resamples=500)
    _, low_l, high_l = imdb_sentiment.error_interval(large, num_resamples=500)
    assert high_l - low_l < (high_s - low_s) / 3             # ~ 1 / sqrt(20) as wide
    assert high_l - low_l == pytest.approx(2 * 1.96 * math.sqrt(0.09 / 8000), rel=0.25)


def _trained_record(path, arm, seed, correct, stopped_by="early_stopping"):
    record = {"arm": arm, "seed": seed, "error": 1.0 - float(np.mean(correct)),
              "test_ids_checksum": "same", "training": {"stopped_by": stopped_by},
              "correct": "".join("1" if c else "0" for c in correct)}
    (path / f"{arm}-s{seed}.json").write_text(json.dumps(record))


def test_sentiment_report_judges_the_papers_error_and_waits_for_converged_seeds(tmp_path):
    """The 6.28 % row: "held" when TopicRNN's interval reaches it, "not held" above it; a
    seed that stopped at its epoch limit keeps its rows pending; rows name the protocol."""
    rng = np.random.default_rng(3)
    page = tmp_path / "study.md"
    page.write_text("<!-- claim:imdb_sentiment -->\n<!-- /claim:imdb_sentiment -->\n")
    good = rng.random(4000) < 0.95                                  # about 5 % error
    bad = rng.random(4000) < 0.88                                   # about 12 %
    for seed in (0, 1, 2):
        _trained_record(tmp_path, "topicrnn-small-cpu", seed, good,
                        "max_epochs" if seed == 2 else "early_stopping")
        _trained_record(tmp_path, "rnn-small-cpu", seed, bad)
    claims = lambda summary: {r["claim"]: r for r in summary["claims"]}
    rows = claims(imdb_sentiment.report(tmp_path, page))
    paper = rows["topicrnn-small-cpu reaches the paper's 6.28 % error"]
    assert paper["verdict"] == "pending" and "not converged" in paper["missing"][0]
    assert paper["protocol"] == "cpu" and rows["topicrnn-small-cpu vs rnn-small-cpu"][
        "verdict"] == "pending"
    _trained_record(tmp_path, "topicrnn-small-cpu", 2, good)
    rows = claims(imdb_sentiment.report(tmp_path, page))
    paper = rows["topicrnn-small-cpu reaches the paper's 6.28 % error"]
    assert paper["verdict"] == "held" and paper["low"] <= 6.28
    versus = rows["topicrnn-small-cpu vs rnn-small-cpu"]
    assert versus["verdict"] == "held" and versus["high"] < 0
    assert "| topicrnn-small-cpu reaches the paper's 6.28 % error | cpu | 6.28 % |" in (
        page.read_text())
    for seed in (0, 1, 2):
        _trained_record(tmp_path, "topicrnn-small-cpu", seed, bad)
    paper = claims(imdb_sentiment.report(tmp_path, page))[
        "topicrnn-small-cpu reaches the paper's 6.28 % error"]
    assert paper["verdict"] == "not held" and paper["low"] > 6.28


@pytest.mark.skipif(not imdb_sentiment.DATA.exists(),
                    reason="IMDB (../shared/data/imdb) is absent")
def test_cpu_protocol_fits_on_the_first_reviews_of_the_papers_split(monkeypatch):
    """A protocol other than the paper's fits the language models on the first reviews of the
    paper's seeded split (and holds out the first of its held-out ones); the labelled train
    and test reviews, which the classifier sees, are the same."""
    monkeypatch.setitem(imdb_sentiment.PROTOCOLS, "tiny",
                        {"lm_reviews": 10, "valid_reviews": 3, "learning_rate": 1e-3,
                         "max_epochs": 2})
    paper = imdb_sentiment.paper_split(0, limit=20)
    tiny = imdb_sentiment.paper_split(0, limit=20, protocol="tiny")
    assert (len(tiny[0]), len(tiny[1])) == (10, 3)
    assert list(tiny[0].ids) == list(paper[0].ids)[:10]
    assert list(tiny[1].ids) == list(paper[1].ids)[:3]
    assert not set(tiny[0].ids) & set(tiny[1].ids)
    for ours, theirs in zip(tiny[2:], paper[2:]):
        assert list(ours.ids) == list(theirs.ids)
    with pytest.raises(ValueError, match="protocol one of"):
        imdb_sentiment.feature_arm("rnn", 0, protocol="gpu")


@pytest.mark.skipif(not imdb_sentiment.DATA.exists(),
                    reason="IMDB (../shared/data/imdb) is absent")
def test_feature_arm_trains_scores_and_records_its_protocol_then_resumes_without_training(
        tmp_path, monkeypatch):
    """The whole ``topicrnn`` arm on a few reviews: the language model trained under the
    protocol's rules, features into the classifier, a record naming the protocol; run again,
    it trains nothing and scores the same best model."""
    monkeypatch.setitem(imdb_sentiment.PROTOCOLS, "tiny",
                        {"lm_reviews": 12, "valid_reviews": 4, "learning_rate": 1e-3,
                         "max_epochs": 2})
    monkeypatch.setitem(imdb_sentiment.SIZES, "tiny",
                        {"hidden_dim": 8, "num_layers": 1, "embedding_dim": 8,
                         "encoder_units": (8,)})
    lines = []
    kwargs = dict(size="tiny", limit=15, out=tmp_path / "results", runs=tmp_path / "runs",
                  log=lines.append, protocol="tiny")
    record = imdb_sentiment.feature_arm("topicrnn", 0, **kwargs)
    assert (tmp_path / "results" / "topicrnn-tiny-tiny-s0-limit15.json").exists()
    assert record["protocol"] == "tiny" and record["lm_reviews"] == 12
    assert record["valid_reviews"] == 4 and record["training"]["learning_rate"] == 1e-3
    assert len(record["history"]) == record["training"]["epochs"] <= 2
    assert record["features"] == imdb_sentiment.NUM_TOPICS + 8
    assert len(record["correct"]) == record["test_reviews"] == 30
    assert any("training from epoch 0" in line for line in lines)
    lines.clear()
    again = imdb_sentiment.feature_arm("topicrnn", 0, **kwargs)
    assert not any("training from" in line for line in lines)
    assert again["history"] == record["history"] and again["error"] == record["error"]


def test_feature_arms_run_each_unrecorded_seed_once_and_skip_a_run_another_process_holds(
        tmp_path, monkeypatch):
    from tfktopic.runs.lock import run_lock

    ran = []

    def fake_arm(arm, seed, size, limit, out, runs, log, protocol):
        ran.append((arm, seed))
        name = imdb_sentiment.run_name(arm, seed, size, protocol=protocol)
        (out / f"{name}.json").write_text("{}")

    monkeypatch.setattr(imdb_sentiment, "feature_arm", fake_arm)
    out, runs = tmp_path / "results", tmp_path / "runs"
    out.mkdir()
    (out / "rnn-small-cpu-s0.json").write_text("{}")                # recorded before
    with run_lock(runs / "topicrnn-small-cpu-s1"):                 # another lane's run
        done = imdb_sentiment.feature_arms(("topicrnn", "rnn"), seeds=(0, 1), protocol="cpu",
                                           out=out, runs=runs, log=lambda line: None)
    assert ran == [("topicrnn", 0), ("rnn", 1)]
    assert done == [("topicrnn", 0, "recorded"), ("rnn", 0, "skipped: recorded"),
                    ("topicrnn", 1, "skipped: in use"), ("rnn", 1, "recorded")]
    imdb_sentiment.feature_arms(seeds=(0, 1), protocol="cpu", out=out, runs=runs,
                                log=lambda line: None)
    # the freed one, once; by default every arm, the LSTM too
    assert ran[2:] == [("lstm", 0), ("topicrnn", 1), ("lstm", 1)]


def test_feature_arms_resume_a_run_recorded_at_a_lower_epoch_limit_than_the_protocols(
        tmp_path, monkeypatch):
    """A record that stopped at its epoch limit when the protocol's limit is now higher is
    not done (the run resumes from its checkpoint); one early-stopped, or stopped at the
    current limit, is."""
    import json

    ran = []
    monkeypatch.setattr(imdb_sentiment, "feature_arm",
                        lambda arm, seed, *args: ran.append((arm, seed)))
    monkeypatch.setitem(imdb_sentiment.PROTOCOLS, "tiny",
                        {"lm_reviews": 10, "valid_reviews": 3, "learning_rate": 1e-3,
                         "max_epochs": 50})
    out = tmp_path / "results"
    out.mkdir()
    stops = {("topicrnn", 0): {"stopped_by": "max_epochs", "max_epochs": 20},
             ("rnn", 0): {"stopped_by": "early_stopping", "max_epochs": 20},
             ("topicrnn", 1): {"stopped_by": "max_epochs", "max_epochs": 50}}
    for (arm, seed), training in stops.items():
        name = imdb_sentiment.run_name(arm, seed, "small", protocol="tiny")
        (out / f"{name}.json").write_text(json.dumps({"training": training}))
    done = imdb_sentiment.feature_arms(("topicrnn", "rnn"), seeds=(0, 1), protocol="tiny",
                                       out=out, runs=tmp_path / "runs", log=lambda line: None)
    assert ran == [("topicrnn", 0), ("rnn", 1)]
    assert [d[2] for d in done] == ["recorded", "skipped: recorded", "skipped: recorded",
                                    "recorded"]


def test_bleu_train_retrains_each_arm_by_the_study_command_and_skips_recorded(tmp_path,
                                                                              monkeypatch):
    from studies.study import protocol

    calls, scored = [], []

    def runner(cmd, log):
        calls.append(cmd)
        out = pathlib.Path(cmd[cmd.index("--out") + 1])
        if "rgbn_rnn" not in cmd:                # the rGBN-RNN run "fails": nothing written
            (out / "results.json").write_text("{}")
        return 0

    monkeypatch.setattr(bleu_claim, "score", lambda out, arm, name, seed: scored.append(
        (arm, name, seed)))
    monkeypatch.setattr(bleu_claim, "arm_record_path", lambda name, arm, seed: tmp_path / (
        "recorded" if arm == "gbn_rnn_3" else "absent"))
    (tmp_path / "recorded").write_text("{}")
    done = bleu_claim.train(("lstm", "rgbn_rnn_1", "gbn_rnn_3"), seeds=(1,), runs=tmp_path,
                            runner=runner)
    assert done == [("lstm", 1, "recorded"), ("rgbn_rnn_1", 1, "exit 0"),
                    ("gbn_rnn_3", 1, "skipped")]
    for cmd, arm in zip(calls, ("lstm", "rgbn_rnn_1")):
        out = tmp_path / f"{arm}-s1"
        assert cmd == protocol.command("apnews", arm, protocol.chosen_config("apnews", arm),
                                       1, out)
    assert scored == [("lstm", name, 1) for name in bleu_claim.SETTINGS]


def test_bleu_score_records_a_training_seed_under_its_own_name_not_a_generation_seeds(
        tmp_path, monkeypatch):
    """Seed 1's record is ``<arm>-s1.json`` with every generation seed inside (a loop over the
    generation seeds once overwrote the training seed: records landed as ``-s4``), scored on
    the model's tokens (``tokenizer=False``), not on its detokenised text."""
    import types

    from tfktopic import runs
    from tfktopic.data import Vocabulary

    lm = Vocabulary.build([[["the", "senate", "voted", "."]]], min_count=1)
    asked = []

    def generate(num_sentences, max_len, seed, tokenizer=None, **kwargs):
        asked.append(seed)
        if tokenizer is not False:                    # an attached tokenizer: text
            return ["the senate voted."] * 3
        row = [lm.token_to_id(w) for w in ("the", "senate", "voted", ".")] + [2, 0]
        return np.array([row] * 3, np.int32)

    run = types.SimpleNamespace(model=types.SimpleNamespace(generate=generate), config={},
                                lm_vocab=lm, name="lstm")
    monkeypatch.setattr(runs, "load_run", lambda run_dir: run)
    monkeypatch.setattr(bleu_claim, "references", lambda run: [["the", "senate", "voted", "."]])
    monkeypatch.setattr(bleu_claim, "_study_record", lambda arm, seed: f"absent-{seed}.json")
    monkeypatch.setattr(bleu_claim, "RESULTS", tmp_path)
    record = bleu_claim.score(tmp_path, "lstm", "sample", seed=1)
    written = json.loads((tmp_path / "sample" / "lstm-s1.json").read_text())
    assert sorted(p.name for p in (tmp_path / "sample").iterdir()) == ["lstm-s1.json"]
    assert written["training_seed"] == record["training_seed"] == 1
    assert asked == list(bleu_claim.GENERATION_SEEDS)
    assert sorted(written["seeds"]) == sorted(map(str, bleu_claim.GENERATION_SEEDS))
    assert written["seeds"]["0"]["examples"][0] == "the senate voted ."
    assert written["seeds"]["0"]["test_bleu_4"] == pytest.approx(1.0)


def test_defaults_criteria_compare_with_lda_and_the_sentence_lstm():
    from studies.claims import defaults

    def rec(model, ppl, npmi=None, lda=None):
        return {"model": model, "test_ppl": ppl, "npmi": npmi, "lda_npmi": lda}

    records = {"lstm": [rec("lstm", 100.0)], "doc_lstm": [rec("doc_lstm", 98.0)],
               "tcnlm": [rec("tcnlm", 95.0, 0.14, 0.15)],          # 0.933 x LDA: passes
               "topicrnn": [rec("topicrnn", 101.0, 0.03, 0.15)]}   # fails both
    rows = {(r["criterion"].split()[0], r["family"]): r["passed"]
            for r in defaults.verdicts(records)}
    assert rows[("NPMI", "tcnlm")] and rows[("test", "tcnlm")]
    assert rows[("NPMI", "topicrnn")] is False and rows[("test", "topicrnn")] is False
    assert rows[("test", "doc_lstm")] is True
    assert rows[("NPMI", "rgbn_rnn")] is None                     # no record: pending
    # LDA's own topics at or below chance: the row passes but says it decides nothing
    records["gbn_rnn"] = [rec("gbn_rnn", 99.0, 0.01, -0.006)]
    flagged = {r["family"]: r["uninformative"] for r in defaults.verdicts(records)
               if r["criterion"].startswith("NPMI")}
    assert flagged == {"tcnlm": False, "topicrnn": False, "doc_topicrnn": False,
                       "rgbn_rnn": False, "gbn_rnn": True}
    cmd = defaults.command("war_and_peace", "tcnlm", 0, "out")
    assert cmd[3:6] == ["train", "tcnlm", "--corpus"] and "--preset" not in cmd


def test_defaults_criteria_show_each_seed_against_its_own_splits_target():
    # Each seed has its own split: a seed's NPMI is held to its own LDA, its perplexity to
    # its own LSTM; the mean can pass while a seed misses.
    from studies.claims import defaults

    def rec(model, seed, ppl, npmi=None, lda=None):
        return {"model": model, "seed": seed, "test_ppl": ppl, "npmi": npmi, "lda_npmi": lda}

    records = {"lstm": [rec("lstm", 1, 120.0), rec("lstm", 0, 100.0)],
               "doc_lstm": [rec("doc_lstm", 0, 99.0), rec("doc_lstm", 1, 121.0)],
               "gbn_rnn": [rec("gbn_rnn", 0, 101.0, 0.10, 0.10),
                           rec("gbn_rnn", 1, 110.0, 0.07, 0.08)]}
    rows = {(r["criterion"].split()[0], r["family"]): r for r in defaults.verdicts(records)}
    npmi = rows[("NPMI", "gbn_rnn")]
    assert npmi["passed"] is True                       # 0.085 >= 0.9 x 0.09
    assert [(s, met) for s, _, _, met in npmi["per_seed"]] == [(0, True), (1, False)]
    assert npmi["per_seed"][1][1:3] == (0.07, pytest.approx(0.072))
    ppl = rows[("test", "gbn_rnn")]
    assert ppl["passed"] is True                        # 105.5 <= 110
    assert ppl["per_seed"] == [(0, 101.0, 100.0, False), (1, 110.0, 120.0, True)]
    assert rows[("test", "doc_lstm")]["per_seed"] == [(0, 99.0, 100.0, True),
                                                      (1, 121.0, 120.0, False)]
    assert rows[("NPMI", "tcnlm")]["per_seed"] == []    # no record
    assert rows[("NPMI", "tcnlm")]["over_seeds"]["verdict"] == "pending"


def test_defaults_seed_interval_is_the_t_interval_of_the_seeds_margins():
    from studies.claims import defaults

    # margins +3, +5, +4 (met by all three): mean 4, sd 1, half-width t(0.975, 2) / sqrt(3)
    over = defaults.seed_interval([(0, 103.0, 100.0, True), (1, 95.0, 90.0, True),
                                   (2, 84.0, 80.0, True)])
    assert over["mean"] == pytest.approx(4.0)
    assert over["high"] - over["mean"] == pytest.approx(4.302653 / math.sqrt(3), rel=1e-5)
    assert over["verdict"] == "met"
    # a seed that misses enters with a negative margin: +3, -5, +4 -> inside the interval
    mixed = defaults.seed_interval([(0, 103.0, 100.0, True), (1, 85.0, 90.0, False),
                                    (2, 84.0, 80.0, True)])
    assert mixed["mean"] == pytest.approx(2 / 3) and mixed["verdict"] == "inconclusive"
    missed = defaults.seed_interval([(0, 1.0, 1.1, False), (1, 1.0, 1.2, False),
                                     (2, 1.0, 1.15, False)])
    assert missed["high"] < 0 and missed["verdict"] == "missed"
    assert defaults.seed_interval([(0, 1.0, 0.5, True), (1, 1.0, 0.6, True)])["verdict"] == \
        "pending"                                       # 2 seeds: an interval, no verdict


def test_defaults_rescore_judges_topics_against_text_no_run_saw(tmp_path):
    # IMDB's 1,600-review training split is too small a reference (LDA ~ chance there): the
    # recorded topics are scored again against the reviews outside the runs' subset, and
    # that row stays pending until every seed of the family carries topics.
    from studies.claims import defaults

    folder = tmp_path / "imdb"
    folder.mkdir()
    coherent = [["horror", "scary", "night"], ["funny", "comedy", "laugh"],
                ["war", "army", "battle"]]
    mixed = [list(words) for words in zip(*coherent)]      # one word of each coherent topic
    for seed in (0, 1):
        (folder / f"tcnlm-s{seed}.json").write_text(json.dumps(
            {"model": "tcnlm", "test_ppl": 90.0, "npmi": 0.01, "lda_npmi": -0.01,
             "topics": coherent, "lda_topics": mixed}))
    (folder / "lstm-s0.json").write_text(json.dumps({"model": "lstm", "test_ppl": 95.0}))
    reference = [" ".join(topic + ["film"]) for topic in coherent] * 5
    defaults.rescore(["imdb"], results=tmp_path, documents={"imdb": reference})
    scored = json.loads((folder / "tcnlm-s0.json").read_text())
    from tfktopic.evaluation import npmi_coherence

    for key, topics in (("npmi_external", coherent), ("lda_npmi_external", mixed)):
        assert scored[key] == pytest.approx(npmi_coherence(
            topics, reference_documents=reference, cardinalities=(3,)).mean)
    assert scored["npmi_external"] > 0.5 and scored["lda_npmi_external"] <= 0
    # Chance: the same words regrouped at random score below the coherent grouping.
    chance = scored["npmi_external_chance"]
    assert chance["mean"] <= chance["high"] < scored["npmi_external"]
    assert "npmi_external" not in json.loads((folder / "lstm-s0.json").read_text())
    records = {"lstm": [{"test_ppl": 95.0}],
               "tcnlm": [json.loads((folder / f"tcnlm-s{s}.json").read_text()) for s in (0, 1)]}
    external = [r for r in defaults.verdicts(records, defaults.EXTERNAL["imdb"])
                if r["family"] == "tcnlm" and "against" in r["criterion"]]
    assert len(external) == 1 and external[0]["passed"] is True
    assert external[0]["uninformative"] is True                # that LDA is below chance
    # An LDA above 0 but no higher than its own words regrouped at random: also at chance.
    for record in records["tcnlm"]:
        record.update(lda_npmi_external=0.05, lda_npmi_external_chance={"mean": 0.04,
                                                                        "high": 0.06})
    external = [r for r in defaults.verdicts(records, "x") if r["family"] == "tcnlm"
                and "against" in r["criterion"]]
    assert external[0]["uninformative"] is True
    for record in records["tcnlm"]:
        record["lda_npmi_external_chance"]["high"] = 0.03
    external = [r for r in defaults.verdicts(records, "x") if r["family"] == "tcnlm"
                and "against" in r["criterion"]]
    assert external[0]["uninformative"] is False
    records["tcnlm"].append({"model": "tcnlm", "test_ppl": 90.0, "npmi": 0.0,
                             "lda_npmi": 0.0})                 # a seed without topics
    external = [r for r in defaults.verdicts(records, "x") if r["family"] == "tcnlm"
                and "against" in r["criterion"]]
    assert external[0]["passed"] is None


def test_defaults_compare_each_topic_family_with_the_document_lstm_over_pooled_seeds():
    # Each seed has its own split: its documents are scored by its own models, pooled, and
    # resampled in pairs; a verdict needs 3 seeds and the same target tokens.
    from studies.claims import defaults

    rng = np.random.default_rng(0)

    def rec(model, seed, nll, tokens):
        return {"model": model, "seed": seed, "test_ppl": 1.0,
                "test_documents": {"nll": list(nll), "tokens": list(tokens)}}

    records = {name: [] for name in ("doc_lstm", "gbn_rnn", "topicrnn", "tcnlm", "rgbn_rnn")}
    for seed in range(3):
        tokens = rng.integers(50, 200, size=40)
        base = tokens * rng.normal(4.5, 0.3, size=40)
        records["doc_lstm"].append(rec("doc_lstm", seed, base, tokens))
        records["gbn_rnn"].append(rec("gbn_rnn", seed, base - 0.05 * tokens, tokens))
        noise = rng.normal(0.0, 0.5, size=40) * tokens
        records["topicrnn"].append(rec("topicrnn", seed, base + noise - noise.mean(), tokens))
        records["tcnlm"].append(rec("tcnlm", seed, base, tokens + 1))
        if seed < 2:
            records["rgbn_rnn"].append(rec("rgbn_rnn", seed, base - 0.05 * tokens, tokens))
    rows = {r["family"]: r for r in defaults.comparisons(records)}
    gbn = rows["gbn_rnn"]
    assert gbn["verdict"] == "beats" and gbn["high"] < 1.0
    assert gbn["ratio"] == pytest.approx(np.exp(-0.05)) and gbn["seeds"] == [0, 1, 2]
    assert gbn["per_seed"] == pytest.approx([np.exp(-0.05)] * 3)
    assert rows["topicrnn"]["verdict"] == "inconclusive"
    assert rows["topicrnn"]["low"] < 1.0 < rows["topicrnn"]["high"]
    assert rows["tcnlm"]["verdict"].startswith("not comparable")
    assert rows["rgbn_rnn"]["verdict"] == "pending" and rows["rgbn_rnn"]["ratio"] < 1.0
    assert rows["doc_topicrnn"]["verdict"] == "pending" and rows["doc_topicrnn"]["seeds"] == []


def test_defaults_tuning_candidates_spell_out_every_tuned_setting(tmp_path):
    # A candidate must mean the same run whatever the defaults of the day: its training
    # budget, learning rate and (topic families) topic start are all explicit.
    from studies.claims import defaults

    for name, (family, args) in defaults.CANDIDATES.items():
        sets = {key: value for key, _, value in (
            a.partition("=") for a, flag in zip(args[1:], args) if flag == "--set")}
        assert "--epochs" in args and "patience" in sets and "learning_rate" in sets, name
        if family in ("topicrnn", "rgbn_rnn", "gbn_rnn"):
            assert "decoder_init" in sets, name
        if family in ("rgbn_rnn", "gbn_rnn"):
            assert "step_size" in json.loads(sets["tlasgr"]), name
        cmd = defaults.tuning_command(name, 1, tmp_path / name)
        assert cmd[3:7] == ["train", family, "--corpus", "lee"] and "--preset" not in cmd
    # The tuning table: one row per candidate with records, its seeds in order.
    folder = tmp_path / "tuning" / "lee"
    folder.mkdir(parents=True)
    for seed, (val, test) in enumerate(((80.0, 75.0), (70.0, 77.0))):
        (folder / f"lstm_c100-s{seed}.json").write_text(json.dumps(
            {"candidate": "lstm_c100", "model": "lstm", "seed": seed, "best_val_ppl": val,
             "test_ppl": test, "npmi": None, "lda_npmi": None, "training": {"epochs": 40}}))
    text = defaults.tuning_report(tmp_path)
    assert "| lstm_c100 | lstm | 2 | 80.00 / 70.00 | 75.00 / 77.00 | -- | 40 / 40 |" in text
    assert "topicrnn_old" not in text and (tmp_path / "tuning" / "lee.md").exists()


def test_df_cap_keeps_only_topic_words_in_at_most_that_share_of_documents():
    from studies.claims import lda_df_cap
    from tfktopic.data import TopicVocabulary, Vocabulary

    docs = [[["storm", "rain", "coast"]], [["storm", "rain"]], [["storm", "vote"]],
            [["storm", "vote", "senate"]]]
    lm = Vocabulary.build(docs, min_count=1)
    topics = TopicVocabulary.build(docs, lm, stopwords="none", max_freq_fraction=0.0)
    assert lda_df_cap.capped(topics, docs, None) is topics
    half = lda_df_cap.capped(topics, docs, 0.5)         # storm: 4 of 4 documents, out
    assert sorted(half.words) == ["coast", "rain", "senate", "vote"]
    assert sorted(lda_df_cap.capped(topics, docs, 0.25).words) == ["coast", "senate"]
    assert half.lm_vocab is lm
    rows = [{"corpus": "lee", "seed": s, "cap": c, "npmi": v, "topic_words": 1, "topic_0": []}
            for s, (c, v) in enumerate([(None, 0.1), (None, 0.3), (0.5, 0.2), (0.5, 0.4)])]
    text = lda_df_cap.table(rows)
    assert "| every document (the defaults) | 0.2000 (0.1000 / 0.3000) |" in text
    assert "| 50% of documents | 0.3000 (0.2000 / 0.4000) |" in text


def test_defaults_imdb_10k_runs_and_reports_only_the_gbn_families_topic_criterion(tmp_path,
                                                                                 monkeypatch):
    from studies.claims import defaults

    trained = []
    monkeypatch.setattr(defaults, "_train_and_record",
                        lambda make, key, out, target, label: trained.append(key))
    monkeypatch.setattr(defaults, "REPO", tmp_path / "repo")
    data = tmp_path / "shared" / "data" / defaults.CORPORA["imdb_10k"][0]
    data.parent.mkdir(parents=True, exist_ok=True)
    data.write_text("")
    defaults.run(["imdb_10k"], [0])
    assert trained == [("imdb_10k", "rgbn_rnn", 0), ("imdb_10k", "gbn_rnn", 0)]
    assert defaults.command("imdb_10k", "gbn_rnn", 0, tmp_path)[-10:-6] == [
        "--max-documents", "10000", "--subset-seed", "0"]

    folder = tmp_path / "imdb_10k"
    folder.mkdir()
    for family, npmi in (("rgbn_rnn", 0.030), ("gbn_rnn", 0.020)):
        (folder / f"{family}-s0.json").write_text(json.dumps(
            {"model": family, "seed": 0, "test_ppl": 100.0, "npmi": npmi, "lda_npmi": 0.030,
             "diversity": 0.5}))
    summary = defaults.report(results=tmp_path)
    rows = {(r["family"], r["criterion"]): r["passed"] for r in summary["imdb_10k"]}
    assert rows == {("rgbn_rnn", "NPMI >= 0.9 x LDA"): True,
                    ("gbn_rnn", "NPMI >= 0.9 x LDA"): False,
                    ("rgbn_rnn", "NPMI >= 0.9 x LDA, against the 90,000 other IMDB reviews"): None,
                    ("gbn_rnn", "NPMI >= 0.9 x LDA, against the 90,000 other IMDB reviews"): None}
    assert summary["imdb_10k_vs_doc_lstm"] == []
    assert "| imdb_10k | lstm |" not in (tmp_path / "summary.md").read_text()


def test_defaults_ptb_runs_the_chosen_families_and_judges_their_perplexity_by_its_lstm(
        tmp_path, monkeypatch):
    from studies.claims import defaults

    trained = []
    monkeypatch.setattr(defaults, "_train_and_record",
                        lambda make, key, out, target, label: trained.append(key))
    monkeypatch.setattr(defaults, "REPO", tmp_path / "repo")
    data = tmp_path / "shared" / "data" / defaults.CORPORA["ptb"][0]
    data.parent.mkdir(parents=True, exist_ok=True)
    data.write_text("")
    defaults.main(["run", "--corpus", "ptb", "--seeds", "0", "--families", "lstm", "tcnlm"])
    assert trained == [("ptb", "lstm", 0)]      # tcnlm is not one of PTB's families
    assert defaults.command("ptb", "lstm", 0, tmp_path)[6:9] == [str(data), "--format", "ptb"]

    folder = tmp_path / "ptb"
    folder.mkdir()
    for family, ppl, npmi in (("lstm", 100.0, None), ("rgbn_rnn", 90.0, 0.05),
                              ("gbn_rnn", 110.0, 0.05)):
        (folder / f"{family}-s0.json").write_text(json.dumps(
            {"model": family, "seed": 0, "test_ppl": ppl, "npmi": npmi, "lda_npmi": 0.05,
             "diversity": 0.5}))
    summary = defaults.report(results=tmp_path)
    rows = {(r["family"], r["criterion"]): r["passed"] for r in summary["ptb"]}
    assert rows == {("rgbn_rnn", "NPMI >= 0.9 x LDA"): True,
                    ("rgbn_rnn", "test PPL <= sentence LSTM"): True,
                    ("gbn_rnn", "NPMI >= 0.9 x LDA"): True,
                    ("gbn_rnn", "test PPL <= sentence LSTM"): False}
    assert summary["ptb_vs_doc_lstm"] == []
    assert "| ptb | tcnlm |" not in (tmp_path / "summary.md").read_text()


def test_a_defaults_probe_is_the_users_command_with_its_settings_recorded_apart(tmp_path,
                                                                               monkeypatch):
    from studies.claims import defaults

    calls = []
    monkeypatch.setattr(defaults, "_train_and_record",
                        lambda make, key, out, target, label, extra=None: calls.append(
                            (make(*key, out), out, target, extra)))
    defaults.probe("gbn_eps1e-3", ["imdb_10k"], [1], results=tmp_path / "results",
                   runs=tmp_path / "runs")
    assert [c[0][4] for c in calls] == ["rgbn_rnn", "gbn_rnn"]
    cmd, out, target, extra = calls[0]
    assert cmd[:-2] == defaults.command("imdb_10k", "rgbn_rnn", 1, out)
    assert cmd[-2:] == ["--set", 'tlasgr={"step_size": 0.001}']
    # apart from the held-out records: the tables (`report`) never read them
    folder = pathlib.Path("probes") / "gbn_eps1e-3" / "imdb_10k"
    assert target == tmp_path / "results" / folder / "rgbn_rnn-s1.json"
    assert out == tmp_path / "runs" / folder / "rgbn_rnn-s1"
    assert extra == {"probe": "gbn_eps1e-3", "settings": defaults.PROBES["gbn_eps1e-3"]["set"]}
    target.parent.mkdir(parents=True)
    target.write_text(json.dumps({"model": "rgbn_rnn", "seed": 1, "test_ppl": 100.0,
                                  "npmi": 0.05, "lda_npmi": 0.03, "diversity": 0.5}))
    defaults.report(results=tmp_path / "results")
    assert "| imdb_10k | rgbn_rnn |" not in (tmp_path / "results" / "summary.md").read_text()
    # ... but the probe table does, beside the defaults' run of the same corpus, family, seed
    base = defaults.record_path("imdb_10k", "rgbn_rnn", 1, tmp_path / "results")
    base.parent.mkdir(parents=True)
    base.write_text(json.dumps({"model": "rgbn_rnn", "seed": 1, "test_ppl": 110.0,
                                "npmi": 0.024, "lda_npmi": 0.03, "diversity": 0.6,
                                "training": {"epochs": 5}}))
    text = defaults.probe_report(tmp_path / "results")
    assert ("| gbn_eps1e-3 | imdb_10k | rgbn_rnn | 1 | 0.050 / 0.024 / 0.030 | 1.67 / 0.80 "
            "| -- / -- | 100.00 / 110.00 | 0.50 / 0.60 | -- / 5 |") in text
    assert (tmp_path / "results" / "probes" / "summary.md").read_text() == text
    # then the held-out criteria as they would read with the probe's record for the default's
    assert ("| gbn_eps1e-3 | imdb_10k | NPMI >= 0.9 x LDA | rgbn_rnn | 0.050 | 0.027 | yes "
            "| s1 0.050 / 0.027 | +0.023 | pending |") in text
    # and `rescore --probe` scores the probe's records, not the held-out ones
    rescored = []
    monkeypatch.setattr(defaults, "rescore", lambda corpora, results: rescored.append(
        (corpora, results)))
    defaults.main(["rescore", "--probe", "gbn_eps1e-3", "--corpus", "imdb_10k"])
    assert rescored == [(["imdb_10k"], defaults.RESULTS / "probes" / "gbn_eps1e-3")]
