"""The `tfktopic` command line: train, evaluate, topics, generate, export, user errors."""

import contextlib
import io
import json
import math
import re
import shutil
import subprocess
import xml.etree.ElementTree as ElementTree
import sys

import matplotlib.image
import numpy as np
import pytest

from tfktopic import cli

# TensorFlow's own start-up lines (absl logs before InitializeLog, which no environment
# variable silences in TF 2.21); everything else on stderr is tfktopic's.
TF_NOISE = re.compile(r"^(WARNING: All log messages before absl|[IWEF]\d{4} |To enable the "
                      r"following instructions)")


def test_report_on_the_embedded_corpus(capsys):
    assert cli.main(["report", "--corpus", "lee", "--batch-size", "8"]) == 0
    out = capsys.readouterr().out
    assert "train      240" in out
    assert "LM vocabulary:" in out and "topic vocabulary:" in out
    assert "context_bow  float32  (8," in out
    assert "preceding sentences only, leak-free" in out


def test_report_on_apnews_with_mallet(capsys, apnews_toy_path, mallet_stopwords_path):
    code = cli.main(["report", "--corpus", str(apnews_toy_path), "--format", "tdlm",
                     "--stopwords", str(mallet_stopwords_path), "--min-count", "2"])
    assert code == 0
    assert "all        100" in capsys.readouterr().out


def test_user_errors_exit_2_with_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ok\n\xff\xfe\n")
    proc = subprocess.run([sys.executable, "-m", "tfktopic", "report", "--corpus", str(bad),
                           "--format", "tdlm"], capture_output=True, text=True)
    assert proc.returncode == 2
    ours = [line for line in proc.stderr.strip().splitlines() if not TF_NOISE.match(line)]
    assert len(ours) == 1, ours
    assert proc.stderr.strip().splitlines() == ours  # no TensorFlow start-up lines either
    assert ours[0].startswith("tfktopic report: error: ") and "bad.txt:2: not valid UTF-8" in ours[0]
    assert "Traceback" not in proc.stderr
    # In-process (one TensorFlow start-up per test is enough to check the quiet stderr).
    assert cli.main(["report", "--corpus", str(tmp_path / "none.txt"), "--format", "ptb"]) == 2
    missing = capsys.readouterr().err.strip().splitlines()
    assert len(missing) == 1 and "none.txt: no such file" in missing[0], missing


def test_train_topicrnn_prints_perplexity_topics_and_text_and_resumes(capsys, tmp_path):
    out_dir = tmp_path / "run"
    args = ["train", "topicrnn", "--corpus", "lee", "--max-documents", "150",
            "--learning-rate", "0.01", "--epochs", "1", "--out", str(out_dir), "--verbose", "0"]
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    assert "test perplexity (leak-free" in out and "unigram model" in out
    assert "topic  0:" in out and "generated sentences" in out
    result = json.loads((out_dir / "results.json").read_text())
    assert result["test"]["protocol"] == "preceding"
    # One epoch on 150 Lee documents at 1e-2 reaches about the unigram model (measured 155.8
    # vs 152.1, 1.02x; all 300 documents at the preset's 3e-3: 0.98x for 1.8x the CPU), far
    # below a uniform guess over its vocabulary; the main job beating unigram at its
    # defaults is tests/test_readme_claims.py (slow).
    assert result["test"]["perplexity"] < result["unigram_ppl"] * 1.12
    # The score is exp(NLL / tokens) of the saved model, recomputed from its outputs
    # (TopicRNN's marginal over the stop-word indicator) with a numpy log-softmax.
    nll, tokens = _numpy_nll_and_tokens(out_dir, "test")
    assert result["test"]["num_tokens"] == tokens
    assert result["test"]["perplexity"] == pytest.approx(math.exp(nll / tokens), rel=1e-5)
    vocab_size = len(json.loads((out_dir / "lm_vocab.json").read_text())["tokens"])
    assert result["test"]["perplexity"] < 0.3 * vocab_size
    assert len(result["topics"]) == 10 and len(result["generated"]) == 3
    assert (out_dir / "model.keras").exists() and (out_dir / "lm_vocab.json").exists()
    # The same command again finds the finished run's backup and does not retrain.
    assert cli.main(args) == 0
    again = capsys.readouterr().out
    assert "all 1 epochs are done" in again and "training topicrnn" not in again


def test_train_bad_preset_exits_2(capsys, tmp_path):
    assert cli.main(["train", "tcnlm", "--preset", "huge", "--out", str(tmp_path)]) == 2
    assert "--preset: unknown preset 'huge' for tcnlm" in capsys.readouterr().err
    # The paper preset names Mallet's stop list, which must be given as a path.
    assert cli.main(["train", "tcnlm", "--preset", "paper", "--out", str(tmp_path)]) == 2
    assert "--stopwords: preset 'paper' uses the stop list" in capsys.readouterr().err


def test_presets_index_every_family():
    from tfktopic import presets

    # `presets.available()` (the legacy views) is gone: every registry model has presets.
    from tfktopic.models import registry

    assert all(presets.names(name) for name in registry.names())
    assert "reference_code" in presets.names("rgbn_rnn")
    for family in ("sgmcmc_ptb", "sgmcmc_char", "sgmcmc_classifier", "sgmcmc_ablation"):
        assert presets.names(family), family
    preset = presets.preset("sgmcmc_ptb", "small").settings()
    preset["model"]["hidden_dim"] = -1
    assert presets.preset("sgmcmc_ptb", "small").model["hidden_dim"] == 200
    with pytest.raises(ValueError, match="unknown preset"):
        presets.preset("tcnlm", "nope")
    with pytest.raises(ValueError, match="unknown preset 'huge' for sgmcmc_ptb"):
        presets.preset("sgmcmc_ptb", "huge")


# ----------------------------------------------------------------------------------------------
# Run directories: train every model family, then evaluate / topics / generate / export them.
# Tiny runs: the first 40 Lee documents, one epoch, one training batch (one traced step).

TINY = ["--max-documents", "40", "--epochs", "1", "--verbose", "0"]
TCNLM = ["--batch-size", "512", "--set", "hidden_dim=32", "--set", "factor_dim=32",
         "--set", "embedding_dim=16"]
RGBN = ["--batch-size", "64", "--set", "hidden_sizes=[16, 8]", "--set", "topic_sizes=[8, 4]",
        "--set", "embedding_dim=16"]


def _run_cli(argv):
    """Run the CLI in-process; (exit code, stdout)."""
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        code = cli.main([str(a) for a in argv])
    return code, buffer.getvalue()


def _printed_lines(text):
    """Lines printed by `generate` (a generated sentence may be empty)."""
    assert text.endswith("\n")
    return text[:-1].split("\n")


def _one_error_line(capsys, argv, command=None):
    """The CLI exits 2 with exactly one line `tfktopic <command>: error: ...` on stderr."""
    capsys.readouterr()
    code = cli.main([str(a) for a in argv])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2, lines
    assert len(lines) == 1 and lines[0].startswith(f"tfktopic {command or argv[0]}: error: "), lines
    return lines[0]


@pytest.fixture(scope="module")
def tcnlm_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "tcnlm"
    argv = ["train", "tcnlm", *TINY, *TCNLM, "--out", out]
    code, text = _run_cli(argv)
    assert code == 0
    return out, argv, text


@pytest.fixture(scope="module")
def rgbn_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "rgbn"
    code, text = _run_cli(["train", "rgbn_rnn", *TINY, *RGBN, "--out", out])
    assert code == 0
    return out, text


def test_help_for_every_command(capsys):
    for command in ([], ["train"], ["evaluate"], ["topics"], ["generate"], ["export"], ["report"]):
        with pytest.raises(SystemExit) as exit_info:
            cli.main(command + ["--help"])
        assert exit_info.value.code == 0
        assert f"usage: tfktopic {' '.join(command)}".strip() in capsys.readouterr().out
    # argparse errors (unknown model, missing option) are one line too, status 2.
    for argv, message in ((["train", "gpt"], "argument model: invalid choice: 'gpt'"),
                          (["export", "somewhere"], "--saved-model")):
        with pytest.raises(SystemExit) as exit_info:
            cli.main(argv)
        lines = capsys.readouterr().err.strip().splitlines()
        assert exit_info.value.code == 2 and len(lines) == 1
        assert lines[0].startswith(f"tfktopic {argv[0]}: error: ") and message in lines[0]


def test_train_writes_the_run_directory_and_resumes(tcnlm_run, capsys):
    out, argv, text = tcnlm_run
    assert "test perplexity (leak-free" in text and "unigram model on the same tokens" in text
    assert "topic  0 [" in text and "generated sentences" in text   # [its usage]
    for name in ("model.keras", "lm_vocab.json", "topic_vocab.json", "run.json", "results.json"):
        assert (out / name).is_file(), name
    assert (out / "backup").is_dir()
    config = json.loads((out / "run.json").read_text())
    assert config["model"] == "tcnlm" and config["preset"] == "small"
    assert config["corpus"] == "lee" and config["format"] == "lee" and config["seed"] == 0
    assert config["max_documents"] == 40 and config["status"] == "finished"
    assert {"max_len", "context_len", "min_count", "stopwords"} <= set(config["data"])
    assert config["training"]["batch_size"] == 512 and config["training"]["epochs"] == 1
    assert config["model_config"]["hidden_dim"] == 32 and config["tfktopic_version"]
    assert config["progress"]["epochs_done"] == 1
    # The best validation perplexity is the best epoch's recorded val_ppl. One epoch of
    # this tiny run (one 512-example batch per step) is only just below a uniform guess
    # over the vocabulary (measured 440 vs 449 words).
    history = config["progress"]["history"]
    assert [h["epoch"] for h in history] == [1]
    assert config["progress"]["best_val_ppl"] == min(h["val_ppl"] for h in history)
    vocab_size = len(json.loads((out / "lm_vocab.json").read_text())["tokens"])
    assert config["progress"]["best_val_ppl"] < vocab_size
    results = json.loads((out / "results.json").read_text())
    assert results["test"]["protocol"] == "preceding"
    # The recorded validation (the one epoch's, the saved model's) and test perplexities
    # and token counts are exp(NLL / tokens) of the saved model, recomputed in numpy from
    # its logits on the run's splits; the printed test perplexity is that number.
    valid_nll, valid_tokens = _numpy_nll_and_tokens(out, "valid")
    assert config["progress"]["best_val_ppl"] == pytest.approx(
        math.exp(valid_nll / valid_tokens), rel=1e-5)
    test_nll, test_tokens = _numpy_nll_and_tokens(out, "test")
    assert results["test"]["num_tokens"] == test_tokens
    assert results["test"]["perplexity"] == pytest.approx(math.exp(test_nll / test_tokens),
                                                          rel=1e-5)
    assert f"{results['test']['perplexity']:.2f} over {test_tokens} tokens" in text
    assert len(results["topics"]) == 10 and len(results["generated"]) == 3
    # The same command again finds the finished run: no training, the same test score.
    code, again = _run_cli(argv)
    assert code == 0 and "all 1 epochs are done" in again and "training tcnlm" not in again
    assert json.loads((out / "results.json").read_text())["test"] == results["test"]
    # Another configuration in the same --out is refused, naming what differs.
    line = _one_error_line(capsys, argv + ["--set", "hidden_dim=8"])
    assert "--out holds another run (different model_config)" in line


def _numpy_nll_and_tokens(out, split):
    """(summed NLL, tokens) of a run's saved model on one of its splits ("preceding"
    contexts), from the model's logits with a float64 numpy log-softmax."""
    from tfktopic.runs import load_run, make_dataset, make_examples, run_splits

    run = load_run(out)
    part = run_splits(run.config)[split]
    examples = make_examples(run.name, part, run.lm_vocab, run.topic_vocab, run.config["data"])
    nll, tokens = 0.0, 0
    for batch in make_dataset(run.name, examples, 64):
        logits = np.asarray(run.model(batch, training=False), np.float64)
        top = logits.max(-1, keepdims=True)
        log_p = logits - top - np.log(np.exp(logits - top).sum(-1, keepdims=True))
        picked = np.take_along_axis(log_p, np.asarray(batch["targets"])[..., None], -1)[..., 0]
        mask = np.asarray(batch["mask"], np.float64)
        nll -= float((picked * mask).sum())
        tokens += int(mask.sum())
    return nll, tokens


def _nltk_bleu(hypotheses, references, n):
    """Texygen test-BLEU-n with nltk: mean sentence BLEU-n (smoothing method 1) of each
    hypothesis against all references."""
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

    smooth = SmoothingFunction().method1
    return float(np.mean([sentence_bleu(references, h, (1 / n,) * n, smoothing_function=smooth)
                          for h in hypotheses]))


def test_evaluate_recomputes_the_test_split_and_scores_other_corpora(tcnlm_run, tmp_path):
    out, _, _ = tcnlm_run
    results = json.loads((out / "results.json").read_text())
    code, text = _run_cli(["evaluate", out, "--num-generated", "20"])
    assert code == 0 and "NPMI coherence" in text and "test-BLEU-3" in text
    report = json.loads((out / "evaluation.json").read_text())
    # The run's own test split, rebuilt from run.json, gives the training-time score.
    assert report["perplexity"]["num_tokens"] == results["test"]["num_tokens"]
    assert report["perplexity"]["perplexity"] == pytest.approx(results["test"]["perplexity"],
                                                               rel=1e-6)
    assert report["unigram_ppl"] == pytest.approx(results["unigram_ppl"])
    assert report["npmi"]["top_n"] == 10 and len(report["npmi"]["per_topic"]) == 10
    assert report["npmi"]["mean"] == pytest.approx(np.mean(report["npmi"]["per_topic"]))
    assert 0.0 <= report["bleu"]["test_bleu_4"] <= report["bleu"]["test_bleu_3"] <= 1.0
    # BLEU recomputed with nltk on the same sentences: the 20 generated with the
    # command's seed (0) and settings (regenerated: generation is seeded) against the
    # test split's sentences; self-BLEU leave-one-out among the non-empty generated ones.
    from tfktopic.runs import GENERATION, generate_text, load_run, run_splits

    run = load_run(out)
    generated = [h.split() for h in generate_text(run, num=20, seed=0, detokenized=False,
                                                  **GENERATION)]
    hypotheses = [h for h in generated if h]
    references = [run.lm_vocab.map_unknown(s) for s in run_splits(run.config)["test"].sentences()]
    bleu = report["bleu"]
    assert bleu["num_hypotheses"] == len(hypotheses) >= 2
    assert bleu["empty_generated_dropped"] == 20 - len(hypotheses)
    assert bleu["num_references"] == len(references)
    for n in (3, 4):
        assert bleu[f"test_bleu_{n}"] == pytest.approx(
            _nltk_bleu(hypotheses, references, n), abs=1e-9)
        self_scores = [_nltk_bleu([h], hypotheses[:i] + hypotheses[i + 1:], n)
                       for i, h in enumerate(hypotheses)]
        assert bleu[f"self_bleu_{n}"] == pytest.approx(np.mean(self_scores), abs=1e-9)
    assert bleu["test_bleu_3"] > 0.01  # the generated words overlap the corpus's trigrams
    # A whole corpus under the papers' protocol; both spellings of it are accepted.
    scores = []
    for protocol in ("all-other", "all_other"):
        target = tmp_path / f"{protocol}.json"
        code, _ = _run_cli(["evaluate", out, "--corpus", "lee", "--max-documents", "12",
                            "--protocol", protocol, "--num-generated", "0", "--json", target])
        assert code == 0
        scores.append(json.loads(target.read_text()))
    assert scores[0]["protocol"] == "all_other" and "whole corpus, 12 documents" in scores[0]["corpus"]
    # NPMI recomputed by brute force over the sliding windows of the reference corpus,
    # which is the run's training split whatever corpus is scored (tfktopic.runs NPMI rule).
    from tfktopic.runs import run_splits

    train = run_splits(json.loads((out / "run.json").read_text()))["train"]
    expected = _brute_force_npmi(results["topics"],
                                 [[w for s in doc for w in s] for doc in train])
    np.testing.assert_allclose(scores[0]["npmi"]["per_topic"], expected, atol=1e-9)
    assert scores[0]["perplexity"] == scores[1]["perplexity"] and "bleu" not in scores[0]


def test_evaluate_without_the_topic_context_changes_only_windows_that_have_one(tcnlm_run,
                                                                              tmp_path):
    """``--protocol none`` scores every window with an empty context (what the topics are
    worth to the model): a document's first sentence has no preceding text, so one-sentence
    documents score exactly as leak-free. (That the other windows' contexts are emptied is
    `test_contexts.py`'s; this one-epoch model barely reads its context.)"""
    from tfktopic.data import Corpus
    from tfktopic.runs import load_run, run_splits
    from tfktopic.runs.data import score_perplexity

    out, _, _ = tcnlm_run
    run = load_run(out)
    test = run_splits(run.config)["test"]
    firsts = Corpus([[document[0]] for document in test.documents])

    def ppl(part, protocol):
        result, _ = score_perplexity(run.name, run.model, part, run.lm_vocab, run.topic_vocab,
                                     run.config["data"], protocol)
        return result.perplexity

    assert ppl(firsts, "none") == pytest.approx(ppl(firsts, "preceding"), rel=1e-6)
    target = tmp_path / "none.json"
    code, text = _run_cli(["evaluate", out, "--protocol", "none", "--num-generated", "0",
                           "--json", target])
    assert code == 0 and "no topic context" in text
    report = json.loads(target.read_text())
    assert report["protocol"] == "none"
    assert report["perplexity"]["perplexity"] == pytest.approx(ppl(test, "none"), rel=1e-6)


def _brute_force_npmi(topics, documents, window=20):
    """Mean NPMI of each topic's word pairs (Lau et al. 2014; topic_interpretability):
    a document of L tokens has the L + ws - 1 windows tokens[max(0, t - ws):t], counts
    are windows containing the word(s), NPMI is 0 for a pair that never co-occurs."""
    windows = [set(doc[max(0, t - window):t]) for doc in documents
               for t in range(1, len(doc) + window)]
    total = len(windows)
    scores = []
    for topic in topics:
        values = []
        for a in range(len(topic)):
            for b in range(a + 1, len(topic)):
                wi, wj = topic[a], topic[b]
                ci = sum(wi in w for w in windows)
                cj = sum(wj in w for w in windows)
                cij = sum(wi in w and wj in w for w in windows)
                if 0 in (ci, cj, cij):
                    values.append(0.0)
                else:
                    values.append(math.log(cij * total / (ci * cj)) / -math.log(cij / total))
        scores.append(float(np.mean(values)))
    return scores


def test_topics_and_generate_with_a_topic_model(tcnlm_run, tmp_path, capsys):
    out, _, _ = tcnlm_run
    results = json.loads((out / "results.json").read_text())
    code, text = _run_cli(["topics", out, "--json", tmp_path / "topics.json"])
    assert code == 0 and f"topic  9 [{results['topic_usage'][9]:.3f}" in text
    written = json.loads((tmp_path / "topics.json").read_text())
    assert written["topics"] == results["topics"] and written["usage"] == results["topic_usage"]
    generate = ["generate", out, "--topic", "1", "--num", "2", "--seed", "3"]
    code, first = _run_cli(generate)
    assert code == 0 and len(_printed_lines(first)) == 2
    assert _run_cli(generate)[1] == first  # seeded
    code, nucleus = _run_cli([*generate, "--sampler", "top_p", "--top-p", "0.9"])
    assert code == 0 and len(nucleus.strip().splitlines()) == 2
    assert _run_cli([*generate, "--sampler", "top_p", "--top-p", "0.9"])[1] == nucleus
    document = tmp_path / "doc.txt"
    document.write_text("Fires burned near Sydney. Firefighters said the winds were strong.\n")
    code, text = _run_cli(["generate", out, "--document", document, "--method", "greedy",
                           "--num", "2"])
    assert code == 0 and len(_printed_lines(text)) == 2
    for argv, message in (
            (["--paragraph", "2"], "--paragraph applies to rgbn_rnn and gbn_rnn"),
            (["--topic", "0", "--layer", "1"], "--layer applies to rgbn_rnn and gbn_rnn"),
            (["--topic", "10"], "--topic 10: layer 1 has 10 topics (0-9)"),
            (["--topic", "1", "--document", document], "give --topic or --document, not both"),
            (["--document", tmp_path / "none.txt"], "none.txt: no such file")):
        assert message in _one_error_line(capsys, ["generate", out, *argv])
    line = _one_error_line(capsys, ["topics", out, "--dot", tmp_path / "t.dot"])
    assert "--dot/--svg draw the topic hierarchy of rgbn_rnn or gbn_rnn" in line
    # A picture of any topic model: a grid of each topic's top words (drawn as <text>).
    assert _run_cli(["topics", out, "--picture", tmp_path / "t.svg"])[0] == 0
    drawn = " ".join("".join(node.itertext()) for node in
                     ElementTree.parse(tmp_path / "t.svg").getroot().iter()
                     if node.tag.endswith("text"))
    assert all(word in drawn for topic in results["topics"] for word in topic[:3])


def test_train_and_evaluate_report_the_models_parameter_counts(tcnlm_run):
    from tfktopic.runs import evaluate_run, load_run, parameter_counts

    out, _, text = tcnlm_run
    run = load_run(out)
    counts = parameter_counts(run.model)
    assert counts["gradient"] == sum(int(np.prod(v.shape)) for v in run.model.trainable_weights)
    assert json.loads((out / "results.json").read_text())["parameters"] == counts
    assert f"model: {counts['gradient']:,} parameters trained by gradient" in text
    assert evaluate_run(run, num_generated=0, log=None)["parameters"] == counts


def test_rgbn_kl_positions_averages_every_real_sentence_once(rgbn_run, tcnlm_run, tmp_path):
    """studies.claims.rgbn_kl_positions: one mean per chunk position over the split's real
    sentences (padding left out); a KL is nonnegative; a model without Pi is refused."""
    from studies.claims import rgbn_kl_positions
    from tfktopic.runs import load_run
    from tfktopic.runs.data import make_examples
    from tfktopic.runs.reports import run_splits

    out, _ = rgbn_run
    run = load_run(out)
    table = rgbn_kl_positions.kl_by_position(run, "valid", "preceding")
    examples = make_examples("lstm", run_splits(run.config)["valid"], run.lm_vocab,
                             run.topic_vocab, run.config["data"])
    assert sum(table["sentences"]) == len(examples)    # every sentence window, once
    assert len(table["kl"]) == run.config["data"]["sentences_per_chunk"]
    assert all(kl >= 0 for kl in table["kl"]) and table["theta_mass"][0] > 0
    with pytest.raises(SystemExit):
        rgbn_kl_positions.main([str(tcnlm_run[0]), "--splits", "valid"])
    assert rgbn_kl_positions.main([str(out), "--splits", "valid", "--protocols", "all_other",
                                   "--out", str(tmp_path / "kl.json")]) == 0
    assert json.loads((tmp_path / "kl.json").read_text())["rows"][0]["split"] == "valid"


def test_rgbn_topic_hierarchy_layers_and_paragraphs(rgbn_run, tmp_path, capsys):
    out, text = rgbn_run
    assert "layer 1 topics" in text and "layer 2 topics" in text
    code, text = _run_cli(["topics", out, "--top-n", "5", "--json", tmp_path / "h.json",
                           "--dot", tmp_path / "h.dot"])
    assert code == 0
    hierarchy = json.loads((tmp_path / "h.json").read_text())
    assert hierarchy["num_layers"] == 2 and hierarchy["recurrent"] is True
    assert [len(layer["topics"]) for layer in hierarchy["layers"]] == [8, 4]
    assert len(hierarchy["layers"][0]["topics"][0]["words"]) == 5
    dot = (tmp_path / "h.dot").read_text()
    assert dot.startswith("digraph") and "L1_T3 -> L0_T" in dot
    # SVG with or without Graphviz on PATH (without: drawn by tfktopic.pictures), and a
    # PNG picture of the hierarchy with the top words of a top-layer topic on it.
    assert _run_cli(["topics", out, "--svg", tmp_path / "h.svg"])[0] == 0
    assert ElementTree.parse(tmp_path / "h.svg").getroot().tag.endswith("svg")
    assert _run_cli(["topics", out, "--picture", tmp_path / "h.png"])[0] == 0
    assert matplotlib.image.imread(tmp_path / "h.png").shape[0] > 50
    assert "--svg h.pdf: the file must end in .svg" in _one_error_line(
        capsys, ["topics", out, "--svg", "h.pdf"])
    for layer in ("1", "2"):
        code, text = _run_cli(["generate", out, "--topic", "0", "--layer", layer, "--num", "2"])
        assert code == 0 and len(_printed_lines(text)) == 2
    code, text = _run_cli(["generate", out, "--paragraph", "2", "--max-len", "8"])
    assert code == 0 and len(_printed_lines(text)) == 2
    document = tmp_path / "doc.txt"
    document.write_text("The fires burned near Sydney and firefighters fought the blaze.\n")
    code, text = _run_cli(["generate", out, "--paragraph", "3", "--document", document,
                           "--max-len", "8"])
    assert code == 0 and len(_printed_lines(text)) == 3
    assert "--layer 3: the model has 2 layers of topics (1-2)" in _one_error_line(
        capsys, ["generate", out, "--topic", "0", "--layer", "3"])
    assert "--topic 4: layer 2 has 4 topics (0-3)" in _one_error_line(
        capsys, ["generate", out, "--topic", "4", "--layer", "2"])
    assert "--paragraph starts from the prior or from --document" in _one_error_line(
        capsys, ["generate", out, "--paragraph", "2", "--topic", "0"])


def test_lstm_with_psgld_under_a_mirrored_strategy(tmp_path, capsys):
    out = tmp_path / "lstm"
    code, text = _run_cli(["train", "lstm", *TINY, "--batch-size", "512", "--optimizer", "psgld",
                           "--strategy", "mirrored", "--out", out])
    assert code == 0 and "test perplexity (sentence-level" in text and "topic  0" not in text
    training = json.loads((out / "run.json").read_text())["training"]
    assert training["optimizer"] == "psgld" and training["strategy"] == "mirrored"
    assert training["learning_rate"] == 1e-3  # the sgmcmc_ptb "small" preset's pSGLD step
    assert np.isfinite(json.loads((out / "results.json").read_text())["test"]["perplexity"])
    # An interrupted run (its backup after epoch 1 of 2) resumes with the same command.
    code, text = _run_cli(["train", "lstm", *TINY, "--batch-size", "512", "--optimizer",
                           "psgld", "--strategy", "mirrored", "--out", out, "--epochs", "2"])
    assert code == 0 and "resuming from" in text and "after epoch 1 of 2" in text
    progress = json.loads((out / "run.json").read_text())["progress"]
    assert progress["epochs_done"] == 2 and [h["epoch"] for h in progress["history"]] == [1, 2]
    assert progress["best_val_ppl"] == min(h["val_ppl"] for h in progress["history"])
    assert "--topic and --document condition on topics; lstm has none" in _one_error_line(
        capsys, ["generate", out, "--topic", "0"])
    assert cli.main(["generate", str(out), "--num", "2", "--max-len", "6"]) == 0
    assert len([line for line in capsys.readouterr().out.splitlines() if line.strip()]) == 2
    assert "topics applies to lda_lstm, topicrnn" in _one_error_line(capsys, ["topics", out])


def test_doc_lstm_starts_from_word2vec_embeddings(tmp_path, capsys):
    from gensim.test.utils import datapath

    from tfktopic.data.embeddings import load_word2vec
    from tfktopic.runs import load_run

    vectors_path = datapath("euclidean_vectors.bin")  # 10-dimensional word2vec vectors
    out = tmp_path / "doc_lstm"
    # With a learning rate of 1e-30 (0 is refused) Adam's steps vanish below float32
    # resolution: the trained embedding is exactly the word2vec matrix.
    code, text = _run_cli(["train", "doc_lstm", *TINY, "--batch-size", "16", "--embeddings",
                           vectors_path, "--learning-rate", "1e-30", "--out", out])
    assert code == 0 and "embedding size 10 (instead of the preset's 32)" in text
    assert "document-level" in text
    run = load_run(out)
    assert run.config["model_config"]["embedding_dim"] == 10
    vectors = load_word2vec(vectors_path)
    weights = np.asarray(run.model.embedding.embeddings)
    found = [t for t in run.lm_vocab.tokens[4:] if t in vectors.key_to_index]
    assert len(found) > 100
    ids = [run.lm_vocab.token_to_id(t) for t in found]
    np.testing.assert_array_equal(weights[ids], vectors[found])
    line = _one_error_line(capsys, ["train", "doc_lstm", *TINY, "--embeddings", vectors_path,
                                    "--set", "embedding_dim=32", "--out", tmp_path / "other"])
    assert "holds 10-dimensional vectors, but --set embedding_dim=32" in line


def test_lda_lstm_topics_coherence_and_generation(tmp_path):
    out = tmp_path / "lda"
    code, text = _run_cli(["train", "lda_lstm", *TINY, "--batch-size", "512", "--out", out])
    assert code == 0 and "topic  9 [" in text and "generated sentences" in text
    code, text = _run_cli(["evaluate", out])
    report = json.loads((out / "evaluation.json").read_text())
    assert code == 0 and "npmi" in report and report["bleu"]["generation"]["conditioning"] == "prior"
    code, text = _run_cli(["generate", out, "--topic", "3", "--num", "2", "--seed", "0"])
    assert code == 0 and len(text.strip().splitlines()) >= 2
    results = json.loads((out / "results.json").read_text())
    assert report["perplexity"]["perplexity"] == pytest.approx(results["test"]["perplexity"],
                                                               rel=1e-6)


def test_user_errors_name_the_file_in_one_line(tcnlm_run, tmp_path, capsys, monkeypatch):
    out, _, _ = tcnlm_run
    broken = {}
    for name in ("truncated", "garbage", "missing"):
        broken[name] = tmp_path / name
        shutil.copytree(out, broken[name], ignore=shutil.ignore_patterns("backup"))
    data = (out / "model.keras").read_bytes()
    (broken["truncated"] / "model.keras").write_bytes(data[:len(data) // 3])
    (broken["garbage"] / "run.json").write_text("{not json")
    (broken["missing"] / "model.keras").unlink()
    assert "truncated/model.keras: not a Keras model file" in _one_error_line(
        capsys, ["evaluate", broken["truncated"]])
    assert "garbage/run.json: not valid JSON" in _one_error_line(
        capsys, ["topics", broken["garbage"]])
    assert "missing/model.keras: no such file" in _one_error_line(
        capsys, ["generate", broken["missing"]])
    assert "nowhere: no such run directory" in _one_error_line(
        capsys, ["export", tmp_path / "nowhere", "--saved-model", tmp_path / "sm"])
    ptb = tmp_path / "ptb.train.txt"
    ptb.write_text("a b c\nd e f\n")
    assert "ptb.train.txt:1: not a review record" in _one_error_line(
        capsys, ["train", "lstm", "--corpus", ptb, "--format", "imdb", "--out", tmp_path / "x"])
    assert "none.txt: no such file" in _one_error_line(
        capsys, ["train", "lstm", "--corpus", tmp_path / "none.txt", "--format", "tdlm",
                 "--out", tmp_path / "x"])
    assert "cannot tell the format of" in _one_error_line(
        capsys, ["train", "lstm", "--corpus", tmp_path / "data.txt", "--out", tmp_path / "x"])
    monkeypatch.delenv("TF_CONFIG", raising=False)
    assert "--strategy multiworker: TF_CONFIG is not set" in _one_error_line(
        capsys, ["train", "lstm", "--strategy", "multiworker", "--out", tmp_path / "x"])
    assert "--set: expected KEY=VALUE, got 'hidden_dim'" in _one_error_line(
        capsys, ["train", "tcnlm", "--set", "hidden_dim", "--out", tmp_path / "x"])
    assert "pretrained:: give a pretrained model name" in _one_error_line(
        capsys, ["generate", "pretrained:"])
    assert not (tmp_path / "x").exists()  # nothing was written for any of these


def test_pretrained_names_go_through_tfktopic_pretrained(tcnlm_run, monkeypatch):
    out, _, _ = tcnlm_run
    from tfktopic import pretrained

    monkeypatch.setattr(pretrained, "resolve",
                        lambda name: out if name == "lee-tcnlm" else out / "nope")
    argv = ["--topic", "2", "--num", "2", "--seed", "5"]
    code, text = _run_cli(["generate", "pretrained:lee-tcnlm", *argv])
    assert code == 0 and text == _run_cli(["generate", out, *argv])[1]
    assert cli.main(["generate", "pretrained:other"]) == 2


def test_export_writes_a_saved_model(tcnlm_run, tmp_path):
    out, _, _ = tcnlm_run
    target = tmp_path / "saved"
    code, text = _run_cli(["export", out, "--saved-model", target])
    assert code == 0 and "SavedModel written to" in text
    assert (target / "saved_model.pb").is_file()


def test_a_seeded_random_subset_is_recorded_and_evaluate_recomputes_the_same_split(tmp_path,
                                                                                   capsys):
    out = tmp_path / "subset"
    code, _ = _run_cli(["train", "lstm", *TINY, "--subset-seed", "3", "--out", out])
    assert code == 0
    config = json.loads((out / "run.json").read_text())
    assert config["max_documents"] == 40 and config["subset_seed"] == 3
    from tfktopic.runs import read_corpus, run_splits

    first = read_corpus("lee", "lee", config["data"], 40)
    documents = sum((run_splits(config)[part].documents for part in ("train", "valid", "test")),
                    [])
    as_set = lambda docs: {tuple(map(tuple, d)) for d in docs}
    assert len(documents) == 40 and as_set(documents) != as_set(first.documents)  # not the first 40
    result = json.loads((out / "results.json").read_text())
    assert cli.main(["evaluate", str(out), "--json", str(tmp_path / "again.json")]) == 0
    again = json.loads((tmp_path / "again.json").read_text())
    assert again["perplexity"]["num_tokens"] == result["test"]["num_tokens"]
    assert again["perplexity"]["perplexity"] == pytest.approx(result["test"]["perplexity"],
                                                              rel=1e-5)
