"""`studies.claims.topic_seeds` (issue 14): each arm's command is what its name says, the runs
go seed by seed, and the table's statistics are those of the records.

No training here: commands are resolved by the command line's own parser (as
``tfktopic train`` resolves them, `tfktopic.cli.train_settings`), the summary is computed
from small synthetic records.
"""

import json
import pathlib
import subprocess

import numpy as np
import pytest

from studies.claims import topic_seeds
from studies.study import protocol as study


def _settings(pair, arm, tmp_path):
    from tfktopic import cli

    command = topic_seeds.command(pair, arm, 1, tmp_path / "out")
    args, settings = cli.train_settings(command[command.index("train"):])
    return args, settings


@pytest.mark.parametrize("pair", list(topic_seeds.PAIRS))
def test_each_pair_differs_only_by_its_fix(pair, tmp_path, apnews_path, mallet_stopwords_path):
    default, fix = list(topic_seeds.PAIRS[pair][1])
    (args_d, d), (args_f, f) = (_settings(pair, a, tmp_path) for a in (default, fix))
    assert args_d.epochs == args_f.epochs == topic_seeds.EPOCHS
    assert args_d.seed == 1 and args_d.split_seed == study.SPLIT_SEED
    assert d["data"] == f["data"]
    assert d["data"]["min_doc_freq"] == study.DATA_SETTINGS["min_doc_freq"]
    assert d["training"] == f["training"]
    changed = {k for k in set(d["model"]) | set(f["model"])
               if d["model"].get(k) != f["model"].get(k)}
    if pair == "topicrnn":
        assert changed == {"decoder_init", "lda_scale"}
        assert (f["model"]["decoder_init"], f["model"]["lda_scale"]) == ("lda", 0.1)
    elif pair == "tcnlm":   # preset `coherent`: the NTM's decoder starts from the LDA
        assert changed == {"decoder_init"} and f["model"]["decoder_init"] == "lda"
    else:   # preset `coherent`: the LDA start of Phi^1 and 50x smaller TLASGR steps
        assert changed == {"decoder_init", "tlasgr"}
        assert f["model"]["decoder_init"] == "lda"
        assert f["model"]["tlasgr"]["step_size"] == 0.02


def test_runs_go_seed_by_seed_and_finished_records_are_skipped(tmp_path, monkeypatch):
    monkeypatch.setattr(topic_seeds, "RESULTS", tmp_path)
    todo = topic_seeds.pending(["topicrnn"])
    assert todo[:4] == [("topicrnn", "random", 0), ("topicrnn", "lda_s0.1", 0),
                        ("topicrnn", "random", 1), ("topicrnn", "lda_s0.1", 1)]
    path = topic_seeds.record_path("topicrnn", "random", 0)
    path.parent.mkdir(parents=True)
    path.write_text("{}")
    assert ("topicrnn", "random", 0) not in topic_seeds.pending(["topicrnn"])
    assert len(topic_seeds.pending(["topicrnn"])) == len(todo) - 1


def test_a_run_another_scheduler_finished_meanwhile_is_not_started(tmp_path, monkeypatch):
    monkeypatch.setattr(topic_seeds, "RESULTS", tmp_path / "results")
    started = []

    def fake_run(cmd, **kwargs):
        # This run's record appears (another scheduler wrote the next one meanwhile).
        started.append(cmd[cmd.index("--out") + 1])
        other = topic_seeds.record_path("topicrnn", "lda_s0.1", 0)
        other.parent.mkdir(parents=True, exist_ok=True)
        other.write_text("{}")
        return subprocess.CompletedProcess(cmd, 1)

    monkeypatch.setattr(topic_seeds.subprocess, "run", fake_run)
    monkeypatch.setattr(topic_seeds, "code_snapshot", lambda directory, repo: (tmp_path, "c"))
    # The scheduling is under test, not the command (which needs the APNEWS file).
    monkeypatch.setattr(topic_seeds, "command",
                        lambda pair, arm, seed, out: ["train", "--out", str(out)])
    monkeypatch.setattr(topic_seeds, "pending",
                        lambda pairs: [("topicrnn", "random", 0), ("topicrnn", "lda_s0.1", 0)])
    topic_seeds.run(["topicrnn"], tmp_path / "runs")
    assert [pathlib.Path(out).name for out in started] == ["random-s0"]


def _record(ppl, npmi, diversity, lda_npmi=0.07):
    return {"test": {"perplexity": ppl},
            "topic_quality": {"model": {"npmi": npmi, "diversity": diversity},
                              "lda": {"npmi": lda_npmi, "diversity": 0.5}}}


def test_summary_is_mean_sd_over_seeds_and_paired_differences(tmp_path, monkeypatch):
    monkeypatch.setattr(topic_seeds, "RESULTS", tmp_path)
    values = {("random", 0): (81.0, 0.046, 0.70), ("random", 1): (80.0, 0.044, 0.72),
              ("random", 2): (82.0, 0.048, 0.71),
              ("lda_s0.1", 0): (78.0, 0.093, 0.81), ("lda_s0.1", 1): (79.0, 0.090, 0.80)}
    for (arm, seed), v in values.items():
        path = topic_seeds.record_path("topicrnn", arm, seed)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(_record(*v)))
    entry = topic_seeds.summary(["topicrnn"])["pairs"]["topicrnn"]
    ppl = entry["arms"]["random"]["test_ppl"]
    assert ppl["n"] == 3 and ppl["mean"] == pytest.approx(81.0)
    assert ppl["sd"] == pytest.approx(np.std([81.0, 80.0, 82.0], ddof=1))
    assert entry["arms"]["lda_s0.1"]["npmi"]["mean"] == pytest.approx(0.0915)
    assert entry["paired_seeds"] == [0, 1]            # seed 2 of the fix is not done
    assert entry["fix_minus_default"]["test_ppl"] == pytest.approx([-3.0, -1.0])
    assert entry["fix_minus_default"]["npmi"] == pytest.approx([0.047, 0.046])
    table = topic_seeds._table(topic_seeds.summary(["topicrnn"]))
    assert "| topicrnn | random | 3 | 81.00 +- 1.00 |" in table
    assert "test ppl -3.00, -1.00" in table


def test_topic_target_is_met_only_when_every_seed_meets_it(tmp_path, monkeypatch):
    """NPMI >= 0.9 x LDA (TopicRNN) and diversity >= LDA's - 0.05 in every seed."""
    monkeypatch.setattr(topic_seeds, "RESULTS", tmp_path)
    # lda_npmi 0.07: ratios 1.0 and 0.8 (< 0.9) -> not met; 0.95 and 0.93 -> met.
    values = {("random", 0): (81.0, 0.070, 0.70), ("random", 1): (80.0, 0.056, 0.72),
              ("lda_s0.1", 0): (78.0, 0.0665, 0.46), ("lda_s0.1", 1): (79.0, 0.0651, 0.45)}
    for (arm, seed), v in values.items():
        path = topic_seeds.record_path("topicrnn", arm, seed)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(_record(*v)))
    arms = topic_seeds.summary(["topicrnn"])["pairs"]["topicrnn"]["arms"]
    assert arms["random"]["npmi_over_lda"] == pytest.approx([1.0, 0.8])
    assert not arms["random"]["topic_target_met"]
    assert arms["lda_s0.1"]["topic_target_met"]          # diversity 0.45 = LDA's 0.5 - 0.05
    path = topic_seeds.record_path("topicrnn", "lda_s0.1", 1)
    path.write_text(json.dumps(_record(79.0, 0.0651, 0.44)))   # diversity 0.06 below LDA's
    assert not topic_seeds.summary(["topicrnn"])["pairs"]["topicrnn"]["arms"]["lda_s0.1"][
        "topic_target_met"]


def test_perplexity_verdict_is_the_paired_bootstrap_of_the_two_arms(tmp_path, monkeypatch):
    monkeypatch.setattr(topic_seeds, "RESULTS", tmp_path)
    rng = np.random.default_rng(0)
    tokens = rng.integers(50, 200, size=40).tolist()
    ppl = {"random": [], "lda_s0.1": []}
    for seed in (0, 1, 2):
        for arm, nats in (("random", 4.40), ("lda_s0.1", 4.30)):   # the fix: 0.1 nats better
            nll = (np.asarray(tokens) * (nats + 0.01 * rng.standard_normal(40))).tolist()
            ppl[arm].append(np.exp(np.sum(nll) / np.sum(tokens)))
            record = dict(_record(float(np.exp(nats)), 0.08, 0.8),
                          test_documents={"nll": nll, "tokens": tokens})
            path = topic_seeds.record_path("topicrnn", arm, seed)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(record))
    entry = topic_seeds.summary(["topicrnn"])["pairs"]["topicrnn"]
    comparison = entry["fix_vs_default_ppl"]
    # Ratio of the mean-over-seeds perplexities, all documents.
    assert comparison["ratio"] == pytest.approx(np.mean(ppl["lda_s0.1"]) / np.mean(ppl["random"]))
    assert comparison["ratio"] == pytest.approx(np.exp(-0.1), rel=5e-3)
    assert comparison["high"] < 1.0 and comparison["verdict"] == "A better"
    assert "lda_s0.1 better" in topic_seeds._table(topic_seeds.summary(["topicrnn"]))
    # Different target tokens in the two arms: no verdict.
    path = topic_seeds.record_path("topicrnn", "random", 0)
    record = json.loads(path.read_text())
    record["test_documents"]["tokens"][0] += 1
    path.write_text(json.dumps(record))
    with pytest.raises(ValueError, match="same target tokens"):
        topic_seeds.summary(["topicrnn"])
