"""Issue 16: atomic files, recovery of damaged checkpoints, the --out lock, divergence,
input checks and one-line errors (exact resume: tests/test_crash_safety.py)."""

import errno
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys

import keras
import numpy as np
import pytest

from tfktopic import cli
from tfktopic.atomic import write_json
from tfktopic.errors import CorpusFormatError, TfktopicError
from tfktopic.runs import checkpoints, load_run, train_run
from tfktopic.runs.checks import OOV_WARNING_RATE
from tfktopic.runs.lock import RunLockedError, run_lock

REPO = pathlib.Path(__file__).resolve().parents[2]
LSTM = dict(corpus="lee", batch_size=32, max_documents=30, verbose=0, log=None, seed=5,
            overrides={"hidden_dim": 8, "embedding_dim": 8})


def _env():
    return {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(REPO)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])}


def _cli(capsys, argv):
    """In-process CLI: (exit code, stdout, stderr lines)."""
    capsys.readouterr()
    try:
        code = cli.main([str(a) for a in argv])
    except SystemExit as exit:  # argparse errors
        code = exit.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err.strip().splitlines()


def _one_line(capsys, argv, *fragments):
    code, _, lines = _cli(capsys, argv)
    assert code == 2 and len(lines) == 1, lines
    assert lines[0].startswith(f"tfktopic {argv[0]}: error: "), lines
    for fragment in fragments:
        assert fragment in lines[0], lines
    return lines[0]


@pytest.fixture(scope="module")
def lstm_run(tmp_path_factory):
    """A finished 2-epoch lstm run (copied by tests that damage it)."""
    out = tmp_path_factory.mktemp("runs") / "lstm"
    train_run("lstm", out, epochs=2, **LSTM)
    return out


def _copy(run, tmp_path):
    target = tmp_path / run.name
    shutil.copytree(run, target)
    (target / ".lock").unlink(missing_ok=True)
    return target


# ------------------------------------------------------------------------ atomic writes
def test_a_failed_write_names_the_file_keeps_the_old_version_and_leaves_no_temp(
        tmp_path, monkeypatch):
    path = tmp_path / "run.json"
    write_json(path, {"old": 1})

    def full_disk(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(TfktopicError, match=r"run\.json: cannot write \(No space left"):
        write_json(path, {"new": 2})
    assert json.loads(path.read_text()) == {"old": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]


def test_a_full_disk_while_saving_model_keras_keeps_the_previous_model(lstm_run, tmp_path,
                                                                       monkeypatch):
    out = _copy(lstm_run, tmp_path)
    before = (out / "model.keras").read_bytes()
    model = load_run(out).model
    real_replace = os.replace

    def failing_replace(src, dst):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(TfktopicError, match=r"model\.keras: cannot write \(No space left"):
        checkpoints.save_model_file(model, out / "model.keras")
    monkeypatch.setattr(os, "replace", real_replace)
    assert (out / "model.keras").read_bytes() == before
    assert not [p.name for p in out.iterdir() if ".tmp" in p.name]


# ------------------------------------------------------------------- damaged checkpoints
def test_a_damaged_model_keras_is_rebuilt_from_the_best_weights(lstm_run, tmp_path, capsys):
    out = _copy(lstm_run, tmp_path)
    expected = [v.numpy() for v in load_run(out).model.weights]
    data = (out / "model.keras").read_bytes()
    (out / "model.keras").write_bytes(data[: len(data) // 2])  # killed while writing
    line = _one_line(capsys, ["evaluate", out], "model.keras: not a Keras model file (damaged",
                     "run the same `tfktopic train` command again")
    assert "best.npz" in line
    notes = []
    train_run("lstm", out, epochs=2, **{**LSTM, "log": notes.append})
    assert any("model.keras: damaged; rebuilt it from" in n for n in notes), notes
    found = [v.numpy() for v in load_run(out).model.weights]
    assert all(np.array_equal(a, b) for a, b in zip(found, expected))


def test_a_damaged_newest_state_falls_back_to_the_previous_one(lstm_run, tmp_path):
    out = _copy(lstm_run, tmp_path)
    newest = out / "backup" / "state-00002.npz"
    newest.write_bytes(newest.read_bytes()[:100])
    notes = []
    train_run("lstm", out, epochs=2, **{**LSTM, "log": notes.append})
    assert any("state-00002.npz: damaged" in n and "previous checkpoint" in n for n in notes)
    assert any("resuming" in n and "epoch 1 " in n for n in notes), notes
    assert checkpoints.read_state_file(newest)[1]["epoch"] == 2  # rewritten, intact


# ----------------------------------------------------------------------------- the lock
def test_the_lock_names_its_holder_and_a_killed_holder_is_taken_over(tmp_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from tfktopic.runs.lock import run_lock\n"
         "with run_lock(sys.argv[1]):\n    print('locked', flush=True); time.sleep(600)",
         str(tmp_path / "run")], env=_env(), stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(RunLockedError, match=f"in use by process {holder.pid}"):
            with run_lock(tmp_path / "run"):
                pass
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert (tmp_path / "run" / ".lock").exists()  # stale: left by the killed process
    # A writer killed mid-write leaves its temporary file (never the target): cleaned up.
    (tmp_path / "run" / "backup").mkdir()
    stale = [tmp_path / "run" / ".run.json.999.tmp.json",
             tmp_path / "run" / "backup" / ".state-00001.npz.999.tmp.npz"]
    for path in stale:
        path.write_bytes(b"")
    with run_lock(tmp_path / "run"):
        assert (tmp_path / "run" / ".lock").read_text() == str(os.getpid())
        assert not any(path.exists() for path in stale)


def test_two_trainings_started_together_into_one_out(tmp_path):
    argv = [sys.executable, "-m", "tfktopic", "train", "lstm", "--max-documents", "30",
            "--epochs", "1", "--verbose", "0", "--set", "hidden_dim=8", "--set",
            "embedding_dim=8", "--out", str(tmp_path / "run")]
    processes = [subprocess.Popen(argv, env=_env(), cwd=tmp_path, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [(p.wait(timeout=900), p.stderr.read(), p) for p in processes]
    codes = sorted(code for code, _, _ in results)
    assert codes == [0, 2], results
    loser = next(r for r in results if r[0] == 2)
    winner = next(r for r in results if r[0] == 0)
    assert loser[1].strip().splitlines() == [
        f"tfktopic train: error: {tmp_path / 'run'}: in use by process {winner[2].pid} "
        f"(lock {tmp_path / 'run' / '.lock'}); wait for it to finish or use another --out"]
    assert json.loads((tmp_path / "run" / "run.json").read_text())["status"] == "finished"


# ---------------------------------------------------------------------------- divergence
class _Poison(keras.callbacks.Callback):
    """Sets the first weight to NaN at batch 1 of epoch 2 (a diverging step)."""

    def __init__(self):
        super().__init__()
        self.epoch = 0

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_begin(self, batch, logs=None):
        if (self.epoch, batch) == (1, 1):
            weight = self.model.trainable_weights[0]
            weight.assign(np.full(weight.shape, np.nan, weight.dtype))


def test_divergence_stops_and_keeps_the_last_finite_checkpoint(tmp_path, monkeypatch, capsys):
    out = tmp_path / "run"
    original = checkpoints.training_callbacks
    monkeypatch.setattr(checkpoints, "training_callbacks", lambda *a, **k: (
        lambda guard, callbacks: (guard, callbacks + [_Poison()]))(*original(*a, **k)))
    with pytest.raises(checkpoints.DivergedError,
                       match=r"diverged at epoch 2 step 2 \(loss=nan.*the last finite checkpoint "
                             r"is kept in .*model\.keras; lower --learning-rate \(it was 0\.003"):
        train_run("lstm", out, epochs=3, **LSTM)
    config = json.loads((out / "run.json").read_text())
    assert config["status"] == "diverged"
    assert [p.name for p in sorted((out / "backup").glob("state-*"))] == ["state-00001.npz"]
    model = load_run(out).model  # the epoch-1 model: finite
    assert all(np.isfinite(v.numpy()).all() for v in model.weights)
    # evaluate on a model whose weights are not finite: one line.
    weight = model.weights[0]
    weight.assign(np.full(weight.shape, np.inf, weight.dtype))
    model.save(out / "model.keras")
    _one_line(capsys, ["evaluate", out], "model.keras: the weights are not finite",
              "--learning-rate")


def test_a_huge_learning_rate_ends_in_one_line_and_no_model(tmp_path, capsys):
    out = tmp_path / "run"
    line = _one_line(capsys, ["train", "lstm", "--max-documents", "30", "--epochs", "2",
                              "--verbose", "0", "--learning-rate", "1e9", "--set",
                              "hidden_dim=8", "--set", "embedding_dim=8", "--out", out],
                     "training diverged at epoch 1", "no epoch finished",
                     "lower --learning-rate (it was 1e+09)")
    assert not (out / "model.keras").exists(), line


def test_a_learning_rate_below_or_at_zero_is_refused(tmp_path, capsys):
    for value in ("0", "-1e-3", "nan"):
        _one_line(capsys, ["train", "lstm", f"--learning-rate={value}", "--out", tmp_path / "x"],
                  "argument --learning-rate: must be a finite number > 0")
    with pytest.raises(TfktopicError, match="--learning-rate must be a finite number > 0"):
        train_run("lstm", tmp_path / "y", learning_rate=-1.0, **LSTM)
    _one_line(capsys, ["train", "lstm", "--set", "learning_rate=-2", "--out", tmp_path / "z"],
              "--learning-rate must be a finite number > 0, got -2")
    assert not (tmp_path / "x").exists() and not (tmp_path / "z").exists()


# -------------------------------------------------------------------------- input checks
def test_format_sniffing_refuses_tdlm_read_as_ptb_and_the_reverse(tmp_path, capsys):
    from tfktopic.data import read_ptb, read_tdlm

    lee = [" ".join(sentence) for doc in cli_lee_documents(25) for sentence in doc[:1]]
    ptb = tmp_path / "sentences.txt"
    ptb.write_text("\n".join(lee) + "\n")
    tdlm = tmp_path / "documents.txt"
    tdlm.write_text("\n".join("\t".join(" ".join(s) for s in doc)
                              for doc in cli_lee_documents(25)) + "\n")
    with pytest.raises(CorpusFormatError, match=r"documents\.txt: looks like TDLM format"):
        read_ptb(tdlm)
    with pytest.raises(CorpusFormatError, match=r"sentences\.txt: looks like one sentence per "
                                                r"line \(PTB format\).*--format ptb"):
        read_tdlm(ptb)
    assert len(read_ptb(ptb)) == 3 and len(read_tdlm(tdlm)) == 25
    _one_line(capsys, ["train", "lstm", "--corpus", tdlm, "--format", "ptb", "--out",
                       tmp_path / "run"], "documents.txt: looks like TDLM format",
              "--format tdlm")


def cli_lee_documents(n):
    from tfktopic.data import load_corpus

    return [doc for doc in load_corpus("lee")][:n]


def test_run_json_naming_another_model_is_refused(lstm_run, tmp_path, capsys):
    out = _copy(lstm_run, tmp_path)
    config = json.loads((out / "run.json").read_text())
    config["model"] = "tcnlm"
    (out / "run.json").write_text(json.dumps(config))
    _one_line(capsys, ["evaluate", out], "run.json: names a tcnlm model, but",
              "model.keras holds a LSTMLanguageModel")


def test_a_vocabulary_with_two_words_swapped_or_from_another_run_is_refused(
        lstm_run, tmp_path, capsys):
    out = _copy(lstm_run, tmp_path)
    payload = json.loads((out / "lm_vocab.json").read_text())
    payload["tokens"][10], payload["tokens"][11] = payload["tokens"][11], payload["tokens"][10]
    (out / "lm_vocab.json").write_text(json.dumps(payload))
    _one_line(capsys, ["evaluate", out], "lm_vocab.json: not the vocabulary the run was "
                                         "trained with")
    other = tmp_path / "other"
    train_run("lstm", other, epochs=1, **{**LSTM, "max_documents": 20})
    shutil.copy(other / "lm_vocab.json", out / "lm_vocab.json")
    _one_line(capsys, ["evaluate", out], "lm_vocab.json: ", "words, but the run was trained")


def test_evaluate_reports_and_warns_about_the_unknown_word_rate(lstm_run, tmp_path, capsys):
    out = _copy(lstm_run, tmp_path)
    text = tmp_path / "unknown.txt"
    text.write_text("\n\n".join("zqxv wprt ghjk blorf snee. krav plon dwim." for _ in range(12)))
    code, stdout, err = _cli(capsys, ["evaluate", out, "--corpus", text, "--format", "text",
                                      "--json", tmp_path / "eval.json", "--num-generated", "0"])
    assert code == 0, err
    report = json.loads((tmp_path / "eval.json").read_text())
    assert report["oov_rate"] > 0.5
    assert "warning: " in stdout and "not in the run's vocabulary" in stdout
    code, stdout, err = _cli(capsys, ["evaluate", out, "--json", tmp_path / "own.json",
                                      "--num-generated", "0"])
    rate = json.loads((tmp_path / "own.json").read_text())["oov_rate"]
    assert code == 0 and 0 < rate < report["oov_rate"]
    assert ("warning" in stdout) == (rate > OOV_WARNING_RATE)


def test_report_on_too_few_documents_is_one_line(tmp_path, capsys):
    one = tmp_path / "one.txt"
    one.write_text("a first sentence .\tand a second one .\n")
    _one_line(capsys, ["report", "--corpus", one, "--format", "tdlm"], "one.txt: 1 documents",
              "split empty")
    flat = tmp_path / "flat.txt"
    flat.write_text("one line.\nanother line.\na third line.\n")
    _one_line(capsys, ["report", "--corpus", flat, "--format", "text"], "flat.txt: 1 documents")


def test_export_to_an_unwritable_place_is_one_line(lstm_run, tmp_path, capsys, monkeypatch):
    import tensorflow as tf

    from tfktopic import export

    def denied(model, path, **kwargs):
        raise tf.errors.PermissionDeniedError(None, None, f"{path}/variables; Permission denied")

    monkeypatch.setattr(export, "export_saved_model", denied)
    _one_line(capsys, ["export", lstm_run, "--saved-model", tmp_path / "ro" / "saved"],
              "ro/saved: cannot write the SavedModel", "Permission denied")


def test_a_failed_set_does_not_block_the_corrected_command(tmp_path, capsys):
    out = tmp_path / "run"
    base = ["train", "lstm", "--max-documents", "30", "--epochs", "1", "--verbose", "0",
            "--set", "embedding_dim=8", "--out", out]
    _one_line(capsys, base + ["--set", "hidden_dim=-5"], "hidden_dim must be >= 1")
    code, _, err = _cli(capsys, base + ["--set", "hidden_dim=8"])
    assert code == 0, err


def test_an_unknown_set_key_names_set_and_the_valid_keys(tmp_path, capsys):
    _one_line(capsys, ["train", "tcnlm", "--set", "hiden_dim=8", "--out", tmp_path / "x"],
              "--set hiden_dim: not a setting of tcnlm; valid keys: ", "hidden_dim")


# -------------------------------------------------------------------- quiet command line
@pytest.mark.parametrize("argv, fragment, verbose", [
    (["evaluate", "no-such-run"], "no-such-run: no such run directory", False),
    (["train", "lstm", "--set", "bogus=1", "--out", "x"], "--set bogus: not a setting of lstm",
     True),
])
def test_stderr_is_exactly_the_one_error_line(tmp_path, argv, fragment, verbose):
    done = subprocess.run([sys.executable, "-m", "tfktopic", *argv], env=_env(), cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"tfktopic {argv[0]}: error: "), lines
    assert fragment in lines[0]
    if verbose:  # what was silenced is there with --verbose (one command shows it: one start-up)
        shown = subprocess.run([sys.executable, "-m", "tfktopic", "--verbose", *argv],
                               env=_env(), cwd=tmp_path, capture_output=True, text=True,
                               timeout=600)
        assert shown.returncode == 2 and len(shown.stderr.splitlines()) > 1


def test_a_state_restores_everything_but_the_commands_learning_rate(tmp_path):
    """Weights, optimizer moments and iterations come back; the learning rate is the new
    command's (a diverged run is resumed with a lower --learning-rate)."""
    def model(rate):
        net = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2),
                                keras.layers.Dropout(0.5, seed=1)])
        net.compile(optimizer=keras.optimizers.Adam(rate), loss="mse")
        return net

    x, y = np.ones((8, 3), "float32"), np.zeros((8, 2), "float32")
    trained = model(0.1)
    trained.fit(x, y, epochs=2, verbose=0)
    checkpoints.save_state(tmp_path, trained, epoch=2, best=1.5)
    fresh = model(0.01)
    meta = checkpoints.restore_state(tmp_path, fresh)
    assert meta["epoch"] == 2 and meta["best_val_ppl"] == 1.5
    for a, b in zip(checkpoints.state_variables(trained), checkpoints.state_variables(fresh)):
        if a.name == "learning_rate":
            assert np.isclose(b.numpy(), 0.01) and np.isclose(a.numpy(), 0.1)
        else:
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert int(fresh.optimizer.iterations.numpy()) == 2


def test_evaluate_refuses_a_recorded_corpus_that_no_longer_exists(lstm_run, tmp_path, capsys):
    out = _copy(lstm_run, tmp_path)
    config = json.loads((out / "run.json").read_text())
    config["corpus"] = str(tmp_path / "gone" / "corpus.txt")
    (out / "run.json").write_text(json.dumps(config))
    _one_line(capsys, ["evaluate", out], "gone/corpus.txt: the corpus recorded in",
              "no longer exists; name one with --corpus")
    assert not (out / "evaluation.json").exists()


def test_the_lock_needs_no_fcntl_and_stays_exclusive(tmp_path):
    # Windows has no fcntl: the lock module must not need it (filelock picks the OS's lock).
    code = ("import sys\nsys.modules['fcntl'] = None\n"
            "from tfktopic.runs.lock import RunLockedError, run_lock\n"
            "with run_lock(sys.argv[1]):\n"
            "    try:\n        with run_lock(sys.argv[1]):\n            print('twice')\n"
            "    except RunLockedError as error:\n        print('refused', error)\n"
            "import os\nprint('left', os.path.exists(sys.argv[1]))\n")
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "run")], env=_env(),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith(f"refused {tmp_path / 'run'}: in use by"), lines
    assert lines[1] == "left False"  # nothing written: no empty directory left behind
