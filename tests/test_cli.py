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
