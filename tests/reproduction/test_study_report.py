"""The study's bookkeeping (studies/study/protocol.py, scheduler.py, report.py) on synthetic
run records: tuning on validation only, seeds of the chosen configuration, verdicts from the
paired bootstrap interval, and "pending" until every run converged."""

import json
import re

import numpy as np
import pytest

from studies.study import protocol as study, report as study_report, scheduler


@pytest.fixture()
def results(tmp_path, monkeypatch):
    monkeypatch.setattr(study, "RESULTS", tmp_path)
    monkeypatch.setattr(study_report, "RESULTS", tmp_path)
    monkeypatch.setattr(study_report, "README", tmp_path / "README.md")   # not ours
    return tmp_path


def _write(arm, config, seed, val, nll_per_token, stopped="early_stopping", docs=60,
           papers=None, empty=None, parameters=None, corpus="apnews", history=None):
    """A synthetic record; `papers` / `empty`: its NLL per token under the papers' protocol
    / with every context empty; `history`: its validation perplexity per epoch."""
    tokens = np.random.default_rng(0).integers(50, 400, docs)   # one test split
    noise = np.random.default_rng([seed, len(arm), len(config)]).normal(0.0, 0.02, docs)
    nll = tokens * (nll_per_token + noise)
    record = {"test": {"perplexity": float(np.exp(nll.sum() / tokens.sum()))},
              "training": {"best_val_ppl": val, "epochs": 9, "best_epoch": 6,
                           "stopped_by": stopped, "seconds": 100.0},
              "model": arm, "model_config": {},
              "test_documents": {"nll": nll.tolist(), "tokens": tokens.tolist()}}
    if parameters is not None:
        record["parameters"] = parameters
    if history is not None:
        record["history"] = [{"epoch": e, "val_ppl": v} for e, v in enumerate(history, 1)]
    for key, value in ((study.PAPERS_PROTOCOL, papers), (study.NO_CONTEXT, empty)):
        if value is not None:
            other = tokens * (value + noise)
            record[key] = {"perplexity": float(np.exp(other.sum() / tokens.sum())),
                           "nll": other.tolist()}
    path = study.record_path(corpus, arm, config, seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record))


def test_the_chosen_configuration_is_the_lowest_validation_not_test(results):
    configs = list(study.grid("apnews"))
    for i, config in enumerate(configs):
        _write("lstm", config, 0, val=100.0 - i, nll_per_token=4.0 + 0.1 * i)
    # the last config has the best validation but the worst test perplexity
    assert study.chosen_config("apnews", "lstm") == configs[-1]
    assert study.pending("apnews", ["lstm"])[:2] == [
        ("lstm", configs[-1], 1), ("lstm", configs[-1], 2)]


def test_seeds_wait_for_the_whole_tuning_grid(results):
    _write("tcnlm", list(study.grid("apnews"))[0], 0, 90.0, 4.0)
    todo = study.pending("apnews", ["tcnlm"])
    assert all(seed == 0 for _, _, seed in todo) and len(todo) == len(study.grid("apnews")) - 1


def test_the_3_layer_lstms_sensitivity_runs_come_before_its_seeds_and_the_next_arm(results):
    """lstm_3's runs at the other learning rate decided whether a 3-layer model needs a lower
    one: they run once its tuning is done, before its seeds and before gbn_rnn_3 starts."""
    arms = ["lstm", "lstm_3", "gbn_rnn_3"]
    _complete("lstm", 4.0)
    assert study.pending("apnews", arms)[0] == ("lstm_3", next(iter(study.grid("apnews",
                                                                               "lstm_3"))), 0)
    for config in study.grid("apnews", "lstm_3"):
        _write("lstm_3", config, 0, 100.0, 4.2)
    best = study.chosen_config("apnews", "lstm_3")
    extra = [("lstm_3", c, 0) for c in study.sensitivity_configs("apnews", "lstm_3")]
    todo = study.pending("apnews", arms)
    assert extra and todo[:len(extra) + 2] == extra + [("lstm_3", best, 1), ("lstm_3", best, 2)]
    # the 1-layer baselines' extra runs stay last
    assert todo[-2:] == [("lstm", c, 0) for c in study.sensitivity_configs("apnews", "lstm")]


def test_the_3_layer_arms_are_tuned_on_the_lower_learning_rate_with_the_same_budget(results):
    """lstm_3 gained 4.4 % on validation at lr 2e-3 (`study.ARM_TUNING`): every 3-layer arm,
    and only they, chooses among the lr 2e-3 pair, as many configurations as every arm;
    lstm_3's lr 4e-3 runs become its budget-sensitivity runs."""
    three = ("lstm_3", "gbn_rnn_3", "rgbn_rnn_3")
    for arm in study.arms_of("apnews"):
        configs = study.grid("apnews", arm)
        assert len(configs) == len(study.TUNING)
        lrs = {settings["learning_rate"] for settings in configs.values()}
        assert lrs == ({2e-3} if arm in three else {4e-3}), arm
    assert study.sensitivity_configs("apnews", "lstm_3") == list(study.TUNING)
    assert study.sensitivity_configs("apnews", "gbn_rnn_3") == []
    assert study.grid("ptb", "rnn_100") == study.grid("ptb")   # PTB keeps its grid
    # the choice is made among the arm's own configurations, even if another ran and won
    _write("gbn_rnn_3", "lr4e-3_do0.5", 0, 50.0, 4.0)
    assert study.chosen_config("apnews", "gbn_rnn_3") is None
    assert study.pending("apnews", ["gbn_rnn_3"]) == [("gbn_rnn_3", c, 0) for c in study.LOWER_LR]
    for config, val in zip(study.LOWER_LR, (90.0, 80.0)):
        _write("gbn_rnn_3", config, 0, val, 4.0)
    assert study.chosen_config("apnews", "gbn_rnn_3") == study.LOWER_LR[1]
    assert study.pending("apnews", ["gbn_rnn_3"]) == [("gbn_rnn_3", study.LOWER_LR[1], s)
                                                     for s in study.SEEDS[1:]]
    summary, _ = study_report.arm_summary("apnews", "gbn_rnn_3")
    assert summary["tuning_done"] == 2 and summary["tuned_on"] == list(study.LOWER_LR)
    _complete("lstm", 4.0)   # a baseline with budget-sensitivity runs: the table says so
    study_report.report("apnews")
    header = next(line for line in (results / "apnews_summary.md").read_text().splitlines()
                  if line.startswith("### Budget sensitivity"))
    assert (f"every arm on 2 configurations, {', '.join(study.TUNING)}; lstm_3, "
            f"gbn_rnn_3, rgbn_rnn_3: {', '.join(study.LOWER_LR)})") in header


def test_a_run_a_lower_epoch_limit_stopped_resumes_under_the_corpus_limit(results):
    """PTB's limit was raised from 40 when it, not early stopping, ended a run: that run is
    queued again (to resume from its checkpoint) and its arm's choice waits for it."""
    configs = list(study.grid("ptb"))
    for config in configs:
        path = study.record_path("ptb", "rnn_100", config, 0)
        path.parent.mkdir(parents=True, exist_ok=True)
        capped = config == configs[1]
        path.write_text(json.dumps({"training": {
            "best_val_ppl": 140.0 if capped else 150.0, "epochs": 40, "best_epoch": 40 if capped
            else 30, "max_epochs": 40, "stopped_by": "max_epochs" if capped
            else "early_stopping"}}))
    assert study.MAX_EPOCHS["ptb"] > 40
    assert study.chosen_config("ptb", "rnn_100") is None
    assert study.pending("ptb", ["rnn_100"]) == [("rnn_100", configs[1], 0)]
    path = study.record_path("ptb", "rnn_100", configs[1], 0)
    record = json.loads(path.read_text())
    record["training"]["max_epochs"] = study.MAX_EPOCHS["ptb"]   # stopped by today's limit
    path.write_text(json.dumps(record))
    assert study.chosen_config("ptb", "rnn_100") == configs[1]


def _complete(arm, nll_per_token, stopped="early_stopping", papers=None, empty=None,
              parameters=None):
    for config in study.grid("apnews", arm):
        _write(arm, config, 0, 100.0, nll_per_token, papers=papers, empty=empty,
               parameters=parameters)
    best = study.chosen_config("apnews", arm)
    for seed in study.SEEDS[1:]:
        _write(arm, best, seed, 100.0, nll_per_token, stopped=stopped, papers=papers,
               empty=empty, parameters=parameters)


def test_each_verdict_shows_both_arms_parameter_counts(results):
    """A ratio between models of different sizes (lstm_3's 3 x 256 against rGBN-RNN's
    256-128-64) is read next to their counts: trained by gradient + sampled, in millions."""
    _complete("lstm", 4.00, parameters={"gradient": 2_160_000, "sampled": 0})
    _complete("tcnlm", 3.90, parameters={"gradient": 4_060_000, "sampled": 0})
    _complete("gbn_rnn_1", 3.95, parameters={"gradient": 2_850_000, "sampled": 380_000})
    _complete("doc_lstm", 4.00)                               # collected before counts
    study_report.report("apnews")
    lines = (results / "apnews_summary.md").read_text().splitlines()
    header = next(l for l in lines if l.startswith("| claim |"))
    column = [c.strip() for c in header.split("|")].index("parameters (M)")
    cell = lambda start: [c.strip() for c in next(
        l for l in lines if l.startswith(start)).split("|")][column]
    assert cell("| TCNLM beats LSTM ") == "4.06 vs 2.16"
    assert cell("| gbn_rnn_1 beats the streamed") == "2.85 + 0.38 vs --"


def test_verdicts_follow_the_bootstrap_interval(results):
    _complete("doc_lstm", 4.00)
    _complete("topicrnn", 4.10)         # clearly worse: "not held"
    _complete("doc_topicrnn", 4.000)    # the same: "inconclusive"
    _complete("tcnlm", 3.90)            # clearly better than doc_lstm: "held"
    study_report.report("apnews")
    summary = json.loads((results / "apnews_summary.json").read_text())
    verdicts = {(r["better"], r["other"]): r["verdict"] for r in summary["claims"]}
    assert verdicts[("topicrnn", "doc_lstm")] == "not held"
    assert verdicts[("doc_topicrnn", "doc_lstm")] == "inconclusive"
    assert verdicts[("tcnlm", "doc_lstm")] == "held"
    assert verdicts[("tcnlm", "topicrnn")] == "held"
    assert "| tcnlm |" in (results / "apnews_summary.md").read_text()


def test_one_seed_is_shown_as_one_seed_not_with_a_zero_spread(results):
    for config in study.grid("apnews"):
        _write("lstm", config, 0, 100.0, 4.0)
    _complete("doc_lstm", 4.0)
    study_report.report("apnews")
    rows = {}   # the first table's row of each arm (the perplexity table)
    for line in (results / "apnews_summary.md").read_text().splitlines():
        if line.startswith("| "):
            rows.setdefault(line.split("|")[1].strip(), line)
    assert "(one seed)" in rows["lstm"] and "+-" not in rows["lstm"]
    assert re.search(r"\d+\.\d\d \+- \d+\.\d\d", rows["doc_lstm"]), rows["doc_lstm"]


def test_an_unconverged_arm_leaves_its_claims_pending(results):
    _complete("doc_lstm", 4.00)
    _complete("tcnlm", 3.90, stopped="max_epochs")
    study_report.report("apnews")
    claims = json.loads((results / "apnews_summary.json").read_text())["claims"]
    row = next(r for r in claims if (r["better"], r["other"]) == ("tcnlm", "doc_lstm"))
    assert row["verdict"] == "pending" and "not all converged" in row["missing"][0]
    assert row["provisional"]["ratio"] < 1.0
    # every claim of the study has a row, even before its arms ran
    empty = next(r for r in claims if (r["better"], r["other"]) == ("rgbn_rnn_3", "gbn_rnn_3"))
    assert empty["verdict"] == "pending" and "seeds 0/3" in empty["missing"][0]
    assert all(r["better"] != "topicrnn_100" for r in claims)    # PTB's claim: not APNEWS's


def test_each_run_is_one_tfktopic_train_command(tmp_path):
    """The study trains through the command line users have (no private pipeline)."""
    from tfktopic.cli import _parser as build_parser

    pytest.importorskip("studies.common")
    try:
        cmd = study.command("apnews", "rgbn_rnn_3", "lr2e-3_do0.5", 1, tmp_path / "out")
    except Exception as error:   # the shared corpus is absent
        pytest.skip(str(error))
    args = build_parser().parse_args(cmd[3:])
    assert (args.model, args.seed, args.split_seed, args.patience) == ("rgbn_rnn", 1, 0,
                                                                        study.PATIENCE)
    assert "num_layers=3" in args.set and "dropout=0.5" in args.set
    assert args.learning_rate == 2e-3 and args.epochs == study.MAX_EPOCHS["apnews"]


def test_a_run_command_can_name_the_shared_data_as_another_machine_sees_it(tmp_path):
    """`data_root` names the corpus and stop list without looking for them (the pretrained
    index lists the commands relative to the repository)."""
    cmd = study.command("apnews", "topicrnn", "lr4e-3_do0.5", 2, tmp_path / "out",
                        data_root="../shared/data")
    assert cmd[cmd.index("--corpus") + 1] == "../shared/data/apnews/apnews.txt"
    assert cmd[cmd.index("--stopwords") + 1] == "../shared/data/stopwords/mallet_en.txt"


def test_every_arm_tunes_on_the_same_configurations_and_baselines_run_the_rest_last(results):
    tuning = list(study.grid("apnews"))
    assert set(tuning) < set(study.full_grid("apnews"))
    for arm in ("lstm", "tcnlm"):
        for config in tuning:
            _write(arm, config, 0, 100.0, 4.0)
    todo = study.pending("apnews", ["lstm", "tcnlm"])
    extra = [c for c in study.full_grid("apnews") if c not in tuning]
    # the seeds of both arms first, then the baseline's rest of the grid (tcnlm has none)
    assert [s for _, _, s in todo[:4]] == [1, 2, 1, 2]
    assert todo[4:] == [("lstm", config, 0) for config in extra]


def test_the_report_shows_what_the_whole_grid_gives_a_baseline(results):
    _complete("doc_lstm", 4.00)
    extra = [c for c in study.full_grid("apnews") if c not in study.grid("apnews")]
    _write("doc_lstm", extra[0], 0, 90.0, 3.95)      # best on validation, and on test
    _write("doc_lstm", extra[1], 0, 110.0, 4.2)
    study_report.report("apnews")
    summary = json.loads((results / "apnews_summary.json").read_text())
    budget = summary["arms"]["doc_lstm"]["sensitivity"]
    assert budget["best_of_grid"] == extra[0] and budget["done"] == 2
    chosen = summary["arms"]["doc_lstm"]["chosen"]
    assert budget["test_gain"] == pytest.approx(budget["runs"][chosen]["test_ppl"]
                                                - budget["runs"][extra[0]]["test_ppl"])
    assert budget["test_gain"] > 0
    assert "(best of grid)" in (results / "apnews_summary.md").read_text()
    # the choice itself stays on the shared tuning configurations
    assert chosen in study.grid("apnews")


def test_each_start_of_a_run_records_the_commit_whose_frozen_code_trains_it(tmp_path,
                                                                           monkeypatch):
    started, popen = [], scheduler.subprocess.Popen

    def fake_popen(cmd, **kwargs):   # the training command is not run; git is
        return started.append((cmd, kwargs)) if cmd[0] != "git" else popen(cmd, **kwargs)

    monkeypatch.setattr(scheduler.subprocess, "Popen", fake_popen)
    monkeypatch.setattr(study, "command", lambda *a: ["python", "-m", "tfktopic", "train"])
    for _ in range(2):     # a start and a resume
        _, out, _, log = scheduler._start("apnews", "lstm", "lr4e-3_do0.3", 0, tmp_path)
        log.close()
    commits = scheduler.code_commits(out)
    assert len(started) == 2 and len(commits) == 2
    assert all(re.fullmatch(r"[0-9a-f]{40}(-dirty)?|None", c) for c in commits)
    # the run imports a frozen copy of that commit's code, not the working tree
    _, kwargs = started[0]
    code = kwargs["cwd"]
    assert kwargs["env"]["PYTHONPATH"] == str(code)
    if commits[0] != "None":     # a git checkout
        assert code.parent == tmp_path / "code" and commits[0].startswith(code.name)
        assert (code / "tfktopic" / "__main__.py").exists()


def test_the_report_is_pasted_between_its_readme_markers_only(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("# t\n<!-- study:ptb -->\nold\n<!-- /study:ptb -->\nkept\n")
    assert study_report.paste("### ptb: table\n| a |\n", "ptb", readme)
    assert readme.read_text() == ("# t\n<!-- study:ptb -->\n#### ptb: table\n| a |\n"
                                  "<!-- /study:ptb -->\nkept\n")
    assert not study_report.paste("x\n", "apnews", readme)      # no markers: nothing written
    assert "x" not in readme.read_text()


def test_each_claim_is_also_decided_under_the_papers_protocol(results):
    """The papers' protocol compares the topic arm's leaky scores with the baseline's own
    (a model without a topic context scores the same under both): a tie leak-free can be a
    win with the future text in the context, and is reported as such, beside the verdict."""
    _complete("lstm", 4.00)
    _complete("tcnlm", 4.00, papers=3.90, empty=4.20)
    _complete("topicrnn", 4.10, papers=4.10)
    study_report.report("apnews")
    summary = json.loads((results / "apnews_summary.json").read_text())
    rows = {(r["better"], r["other"]): r for r in summary["claims"]}
    tcnlm = rows[("tcnlm", "lstm")]
    assert tcnlm["verdict"] == "inconclusive"
    assert tcnlm["papers_protocol"]["verdict"] == "held"
    assert tcnlm["papers_protocol"]["ratio"] == pytest.approx(np.exp(-0.1), rel=0.01)
    # both sides leaky: TCNLM's 3.90 against TopicRNN's 4.10
    assert rows[("tcnlm", "topicrnn")]["papers_protocol"]["ratio"] == pytest.approx(
        np.exp(-0.2), rel=0.01)
    assert summary["arms"]["tcnlm"]["papers_protocol"]["mean"] == pytest.approx(
        np.exp(3.90), rel=0.01)
    assert summary["arms"]["tcnlm"]["no_context"]["mean"] == pytest.approx(np.exp(4.20),
                                                                           rel=0.01)
    assert "papers_protocol" not in summary["arms"]["lstm"]
    assert "no_context" not in summary["arms"]["topicrnn"]      # not scored that way
    table = (results / "apnews_summary.md").read_text()
    line = next(l for l in table.splitlines() if l.startswith("| TCNLM beats LSTM "))
    assert line.rstrip().endswith(", held |") and "| inconclusive |" in line
    cells = {}   # the first table's row of each arm (the perplexity table)
    for line in table.splitlines():
        if line.startswith("| "):
            cells.setdefault(line.split("|")[1].strip(),
                             [c.strip() for c in line.split("|")[2:]])
    # columns after the arm: parameters, chosen, seeds, test, papers' protocol, no context
    assert cells["lstm"][4:6] == ["same", "same"]
    assert cells["tcnlm"][4].startswith(
        f"{summary['arms']['tcnlm']['papers_protocol']['mean']:.2f} +- ")
    assert cells["tcnlm"][5].startswith(f"{summary['arms']['tcnlm']['no_context']['mean']:.2f}")
    assert cells["topicrnn"][5] == "--"


def test_a_topic_arm_not_scored_under_the_papers_protocol_leaves_that_column_empty(results):
    _complete("lstm", 4.00)
    _complete("tcnlm", 3.90, papers=3.80)
    best = study.chosen_config("apnews", "tcnlm")
    _write("tcnlm", best, 2, 100.0, 3.90)          # one seed not scored that way
    study_report.report("apnews")
    summary = json.loads((results / "apnews_summary.json").read_text())
    row = next(r for r in summary["claims"] if (r["better"], r["other"]) == ("tcnlm", "lstm"))
    assert row["verdict"] == "held" and "papers_protocol" not in row
    assert "papers_protocol" not in summary["arms"]["tcnlm"]
    line = next(l for l in (results / "apnews_summary.md").read_text().splitlines()
                if l.startswith("| TCNLM beats LSTM "))
    assert line.rstrip().endswith("| held | -- |")


def test_a_variant_runs_once_its_base_arm_is_complete_at_the_base_arms_choice(results):
    """tcnlm_coherent (`study.VARIANTS`): one run, seed 0, of tcnlm's chosen configuration,
    queued only when tcnlm has all its seeds, before the next arm; shown as a variant."""
    assert "tcnlm_coherent" in study.arms_of("apnews")
    configs = list(study.grid("apnews"))
    arms = ["tcnlm", "tcnlm_coherent", "lda_lstm"]
    for i, config in enumerate(configs):
        _write("tcnlm", config, 0, val=100.0 - i, nll_per_token=4.0)
    assert all(arm != "tcnlm_coherent" for arm, _, _ in study.pending("apnews", arms))
    for seed in study.SEEDS[1:]:
        _write("tcnlm", configs[-1], seed, 90.0, 4.0)
    todo = study.pending("apnews", arms)
    assert todo[0] == ("tcnlm_coherent", configs[-1], 0)
    assert [key for key in todo if key[0] == "tcnlm_coherent"] == [todo[0]]
    _write("tcnlm_coherent", configs[-1], 0, 95.0, 3.95)
    assert all(arm != "tcnlm_coherent" for arm, _, _ in study.pending("apnews", arms))
    study_report.report("apnews")
    summary = json.loads((results / "apnews_summary.json").read_text())
    variant = summary["arms"]["tcnlm_coherent"]
    assert variant["variant_of"] == "tcnlm" and variant["seeds"] == 1
    assert variant["chosen"] == configs[-1] and not variant["complete"]
    row = next(line for line in (results / "apnews_summary.md").read_text().splitlines()
               if line.startswith("| tcnlm_coherent |"))
    assert "| variant of tcnlm |" in row and "(one seed)" in row


def test_a_seeded_variant_gets_the_base_arms_seeds_and_its_claims_a_verdict(results):
    """`study.SEEDED_VARIANTS`: the leak-free-trained GBN pair runs seeds 0-2 of its base
    arm's choice (seed 0 first, before the next arm), and rGBN-RNN vs GBN-RNN trained so
    gets a verdict row; an unseeded variant still runs once."""
    configs = list(study.grid("apnews"))
    arms = ["gbn_rnn_1", "rgbn_rnn_1", "gbn_rnn_1_preceding", "rgbn_rnn_1_preceding",
            "lstm_3"]
    for arm in ("gbn_rnn_1", "rgbn_rnn_1", "doc_lstm"):
        for i, config in enumerate(configs):
            _write(arm, config, 0, val=100.0 - i, nll_per_token=4.0)
        for seed in study.SEEDS[1:]:
            _write(arm, configs[-1], seed, 90.0, 4.0)
    todo = study.pending("apnews", arms)
    _write("gbn_rnn_1_preceding", configs[-1], 0, 90.0, 4.0)
    study_report.report("apnews")
    pending = next(row for row in json.loads((results / "apnews_summary.json").read_text())[
        "claims"] if row["better"] == "rgbn_rnn_1_preceding" and row["other"] != "doc_lstm")
    assert pending["missing"] == ["rgbn_rnn_1_preceding: variant of rgbn_rnn_1, seeds 0/3",
                                  "gbn_rnn_1_preceding: variant of gbn_rnn_1, seeds 1/3"]
    assert todo[:6] == [(arm, configs[-1], seed)
                        for arm in ("gbn_rnn_1_preceding", "rgbn_rnn_1_preceding")
                        for seed in study.SEEDS]
    assert todo[6][0] == "lstm_3"
    for arm, nll in (("gbn_rnn_1_preceding", 4.0), ("rgbn_rnn_1_preceding", 3.9)):
        for seed in study.SEEDS:
            _write(arm, configs[-1], seed, 90.0, nll)
    assert all(arm not in study.SEEDED_VARIANTS for arm, _, _ in study.pending("apnews", arms))
    study_report.report("apnews")
    claims = {row["claim"]: row for row in
              json.loads((results / "apnews_summary.json").read_text())["claims"]}
    row = claims["rGBN-RNN beats GBN-RNN (1 layer, both trained on preceding contexts)"]
    assert (row["better"], row["other"], row["verdict"]) == (
        "rgbn_rnn_1_preceding", "gbn_rnn_1_preceding", "held")
    assert claims["rgbn_rnn_1_preceding beats the streamed document LSTM"]["verdict"] == "held"


def test_the_scheduler_scores_the_other_protocols_of_each_run_as_it_lands(results, tmp_path,
                                                                          monkeypatch):
    """`scheduler.run`: a run that finishes is collected, then `protocols` is run for its arm
    (one TensorFlow thread, the same ``--out``); a failure of that is logged, not fatal."""
    class Finished:
        pid = 1

        def poll(self):
            return 0

    def fake_start(corpus, arm, config, seed, out_root, claimed=None):
        out = study.run_dir(out_root, corpus, arm, config, seed)
        out.mkdir(parents=True, exist_ok=True)
        for name in ("results.json", "run.json"):
            (out / name).write_text("{}")
        return Finished(), out, ["python", "-m", "tfktopic"], open(out / "train.log", "a")

    calls, logged = [], []
    monkeypatch.setattr(scheduler, "_start", fake_start)
    monkeypatch.setattr(scheduler, "collect", lambda corpus, arm, config, seed, out, cmd: (
        _write(arm, config, seed, 100.0, 4.0) or study.record_path(corpus, arm, config, seed)))
    monkeypatch.setattr(study, "REPO", tmp_path)   # record paths print relative to it
    monkeypatch.setattr(scheduler, "_log", logged.append)
    monkeypatch.setattr(scheduler.time, "sleep", lambda seconds: None)   # its polling interval

    def fake_run(cmd, **kwargs):
        calls.append((cmd, kwargs))
        return scheduler.subprocess.CompletedProcess(cmd, 1, "", "boom\nValueError: no model")

    monkeypatch.setattr(scheduler.subprocess, "run", fake_run)
    assert scheduler.run("apnews", ["tcnlm"], 1, tmp_path / "runs") == 0
    assert len(calls) == len(study.SEEDS) + len(study.grid("apnews")) - 1   # every run
    cmd, kwargs = calls[0]
    assert cmd[1:] == ["-m", "studies.study", "protocols", "--corpus", "apnews", "--arms",
                       "tcnlm", "--out", str(tmp_path / "runs")]
    assert kwargs["env"]["TF_NUM_INTRAOP_THREADS"] == "1"
    assert any("other protocols of tcnlm failed (exit 1): ValueError: no model" in line
               for line in logged)


def test_parameter_counts_come_from_the_run_or_a_same_sized_record_and_fill_a_column(
        results, tmp_path):
    def write(arm, config, seed, model_config, parameters=None):
        _write(arm, config, seed, 100.0, 4.0)
        path = study.record_path("apnews", arm, config, seed)
        record = json.loads(path.read_text())
        record.update(model="lstm", model_config=model_config,
                      vocabularies={"lm_vocab.json": {"size": 500}})
        if parameters:
            record["parameters"] = parameters
        path.write_text(json.dumps(record))

    counts = {"gradient": 2_161_775, "sampled": 0, "total": 2_161_775, "state": 0}
    recipe = {"hidden_dim": 256, "dropout": 0.5, "initialization": "torch"}
    for config in study.grid("apnews"):
        write("lstm", config, 0, recipe, counts)
        # Keras' initialisation and another dropout change no weight's shape ...
        write("lstm_keras", config, 0, {**recipe, "initialization": "keras", "dropout": 0.3})
    # ... a wider LSTM does
    write("lstm_3", next(iter(study.grid("apnews"))), 0, {**recipe, "hidden_dim": 512})
    config = next(iter(study.grid("apnews")))
    out_root = tmp_path / "runs"   # no run directory is here
    assert scheduler.count_parameters("apnews", "lstm_keras", config, 0, out_root) == {
        **counts, "counted_on": study.run_name("lstm", next(iter(study.grid("apnews"))), 0)}
    with pytest.raises(FileNotFoundError, match="no record of a model of the same sizes"):
        scheduler.count_parameters("apnews", "lstm_3", config, 0, out_root)
    study_report.report("apnews")
    rows = {}   # the first table's row of each arm (the perplexity table)
    for line in (results / "apnews_summary.md").read_text().splitlines():
        if line.startswith("| "):
            rows.setdefault(line.split("|")[1].strip(), line.split("|")[2].strip())
    assert rows["lstm"] == "2.16" and rows["lstm_keras"] == "2.16"
    assert study_report.parameters_cell({"gradient": 2_849_351, "sampled": 383_200}) == \
        "2.85 + 0.38"


def test_the_ptb_report_puts_each_arms_validation_at_the_papers_15_epochs_beside_converged(
        results):
    """Dieng et al. trained for at most 15 epochs: an RNN still improving at epoch 15 and a
    TopicRNN that peaks by then compare differently there than converged -- at the chosen
    configuration, and at the one a tuning under the limit would choose."""
    rnn = [200.0 - 2 * e for e in range(1, 41)]                     # 170 at 15, 120 at 40
    fast = [190.0 - 3 * e for e in range(1, 16)]                    # 145 at 15, then stops
    topic = [190.0 - 3 * e if e <= 12 else 154.0 + (e - 12) for e in range(1, 16)]
    for arm, history in (("rnn_100", rnn), ("topicrnn_100", topic)):
        configs = list(study.grid("ptb", arm))
        for i, config in enumerate(configs):
            runs = fast if (arm, i) == ("rnn_100", 1) else history   # best within 15 epochs
            _write(arm, config, 0, min(history) + i, 5.0, corpus="ptb", history=runs)
        for seed in study.SEEDS[1:]:
            _write(arm, configs[0], seed, min(history), 5.0, corpus="ptb", history=history)
    assert study_report.within_epochs({"history": [{"epoch": 16, "val_ppl": 1.0}]}, 15) is None
    study_report.report("ptb")
    text = (results / "ptb_summary.md").read_text()
    assert "epoch limit (Dieng et al. 2017, §4.1: at most 15 epochs)" in text
    second = list(study.grid("ptb", "rnn_100"))[1]
    assert (f"| rnn_100 | 3/3 | 120.00 +- 0.00 (best epochs 6, 6, 6) | 170.00 +- 0.00 | "
            f"145.00 ({second}) |") in text
    assert "| topicrnn_100 | 3/3 | 154.00 +- 0.00 (best epochs 6, 6, 6) | 154.00 +- 0.00 |" in text
    assert "| topicrnn_100 / rnn_100 | | 1.283 | 0.906 | 1.062 |" in text
    summary = json.loads((results / "ptb_summary.json").read_text())
    assert summary["arms"]["rnn_100"]["val_within_paper_epochs"] == [170.0] * 3
    # APNEWS's papers gave no epoch limit: no such table
    assert study_report.paper_epochs_table({"corpus": "apnews", "claims": [],
                                            "arms": summary["arms"]}) == []
