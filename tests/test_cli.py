"""The `tfktopic` command line: the README main job and user errors."""

import subprocess
import sys

from tfktopic import cli


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


def test_user_errors_exit_2_with_one_line(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ok\n\xff\xfe\n")
    proc = subprocess.run([sys.executable, "-m", "tfktopic", "report", "--corpus", str(bad),
                           "--format", "tdlm"], capture_output=True, text=True)
    assert proc.returncode == 2
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("tfktopic report: error: ") and "bad.txt:2: not valid UTF-8" in last
    assert "Traceback" not in proc.stderr
    missing = subprocess.run([sys.executable, "-m", "tfktopic", "report", "--corpus",
                              str(tmp_path / "none.txt"), "--format", "ptb"],
                             capture_output=True, text=True)
    assert missing.returncode == 2 and "none.txt: no such file" in missing.stderr


def test_train_topicrnn_prints_perplexity_topics_and_text_and_resumes(capsys, tmp_path):
    out_dir = tmp_path / "run"
    args = ["train", "topicrnn", "--corpus", "lee", "--epochs", "1", "--out", str(out_dir),
            "--verbose", "0"]
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    assert "test perplexity (leak-free" in out and "unigram model" in out
    assert "topic  0:" in out and "generated sentences" in out
    import json
    result = json.loads((out_dir / "results.json").read_text())
    assert result["test"]["protocol"] == "preceding"
    assert result["test"]["perplexity"] < result["unigram_ppl"] * 1.5
    assert len(result["topics"]) == 8 and len(result["generated"]) == 3
    assert (out_dir / "model.keras").exists() and (out_dir / "lm_vocab.json").exists()
    # The same command again finds the finished run's backup and does not retrain.
    assert cli.main(args) == 0


def test_train_bad_preset_exits_2(capsys, tmp_path):
    assert cli.main(["train", "tcnlm", "--preset", "huge", "--out", str(tmp_path)]) == 2
    assert "--preset: unknown preset 'huge' for tcnlm" in capsys.readouterr().err
    # The paper preset names Mallet's stop list, which must be given as a path.
    assert cli.main(["train", "tcnlm", "--preset", "paper", "--out", str(tmp_path)]) == 2
    assert "--stopwords: preset 'paper' uses the stop list" in capsys.readouterr().err


def test_presets_index_every_family():
    from tfktopic import presets

    families = presets.available()
    assert {"tcnlm", "topicrnn", "rgbn_rnn", "lda_lstm", "sgmcmc_ptb"} <= set(families)
    assert "reference_code" in families["rgbn_rnn"]
    preset = presets.get("sgmcmc_ptb", "small")
    preset["hidden_dim"] = -1
    assert presets.get("sgmcmc_ptb", "small")["hidden_dim"] == 200
    import pytest
    with pytest.raises(ValueError, match="unknown preset"):
        presets.get("tcnlm", "nope")
