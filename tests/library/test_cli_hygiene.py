"""Command-line hygiene (issue 51): cheap --help, --version, one-line errors, lazy imports."""

import json
import pathlib
import types
import os
import subprocess
import sys

import pytest

from tfktopic import cli

HEAVY = ("tensorflow", "keras", "tensorflow_probability", "jax")


def _imported_after(code, env=None):
    """The heavy modules in sys.modules after running `code` in a fresh interpreter."""
    probe = (f"{code}\nimport json, sys\n"
             f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("argv", [["--help"], ["train", "--help"], ["evaluate", "--help"],
                                  ["export", "--help"]])
def test_help_imports_no_tensorflow_or_keras(argv):
    code = ("import sys, contextlib, io\nsys.argv = ['tfktopic', *%r]\n"
            "from tfktopic.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    try:\n        main(%r)\n    except SystemExit as e:\n"
            "        assert e.code == 0, e.code\n") % (argv, argv)
    assert _imported_after(code) == []


def test_python_dash_m_help_prints_usage_and_imports_no_tensorflow():
    code = ("import runpy, sys, contextlib, io\nsys.argv = ['tfktopic', 'train', '--help']\n"
            "out = io.StringIO()\n"
            "with contextlib.redirect_stdout(out):\n"
            "    try:\n        runpy.run_module('tfktopic', run_name='__main__')\n"
            "    except SystemExit as e:\n        assert e.code == 0, e.code\n"
            "assert 'usage: tfktopic train' in out.getvalue(), out.getvalue()\n")
    assert _imported_after(code) == []


def test_import_tfktopic_under_jax_imports_no_tensorflow():
    assert "tensorflow" not in _imported_after("import tfktopic", {"KERAS_BACKEND": "jax"})
    assert _imported_after("import tfktopic, tfktopic.cli") == []


def test_subpackages_load_on_first_use():
    import tfktopic

    assert tfktopic.models.__name__ == "tfktopic.models"
    assert {"bayes", "data", "evaluation", "models", "runs"} <= set(dir(tfktopic))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        tfktopic.nope  # noqa: B018


def test_parser_choices_are_the_registry_and_the_precisions():
    from tfktopic import runs
    from tfktopic.runs.precision import PRECISIONS

    assert cli.MODELS == tuple(runs.MODELS)
    assert cli.PRECISIONS == tuple(PRECISIONS)


@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_version_names_tfktopic_the_keras_backend_and_versions(backend):
    import importlib.metadata

    from tfktopic.version import __version__

    proc = subprocess.run([sys.executable, "-m", "tfktopic", "--version"], capture_output=True,
                          text=True, env={**os.environ, "KERAS_BACKEND": backend}, timeout=120)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"tfktopic {__version__}"
    keras_version = importlib.metadata.version("keras")
    assert lines[1] == f"keras {keras_version} (backend: {backend})"
    assert f"{backend} {importlib.metadata.version(backend)}" in lines[2:]


def test_absurd_model_size_is_refused_in_one_line_before_the_corpus_is_read(tmp_path):
    # The corpus does not exist: refusing the size first proves nothing was read.
    proc = subprocess.run([sys.executable, "-m", "tfktopic", "train", "lstm", "--corpus",
                           str(tmp_path / "absent.txt"), "--format", "text", "--set",
                           "hidden_dim=100000000", "--out", str(tmp_path / "run")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("tfktopic train: error: model too large: hidden_dim=100000000")
    assert "lower hidden_dim" in lines[0] and "absent.txt" not in lines[0]
    assert not (tmp_path / "run").exists()


def test_model_size_bound_names_the_dominant_setting_and_passes_the_presets():
    from tfktopic.errors import TfktopicError
    from tfktopic.runs import MODELS, resolve_settings
    from tfktopic.runs.sizes import check_model_size, minimum_parameters

    for name in MODELS:  # every small preset fits in 1 GiB by the bound
        check_model_size(resolve_settings(name)["model"], memory_bytes=2**30)
    model = resolve_settings("rgbn_rnn", overrides=["topic_sizes=[100000, 100000]"])["model"]
    assert minimum_parameters(model)["topic_sizes"] == 100000 * 4 + 100000 * 100000
    with pytest.raises(TfktopicError, match=r"lower topic_sizes \(--set topic_sizes=\.\.\.\)"):
        check_model_size(model, memory_bytes=2**30)
    # LSTM: h*h + e*h recurrent, h*V output, e*V embedding (V = 4 at least).
    assert sum(minimum_parameters({"embedding_dim": 3, "hidden_dim": 5}).values()) == (
        25 + 15 + 5 * 4 + 3 * 4)


class _ResourceExhaustedError(Exception):
    pass


ResourceExhaustedError = type("ResourceExhaustedError", (_ResourceExhaustedError,), {})


@pytest.mark.parametrize("error", [
    MemoryError(),
    ResourceExhaustedError("OOM when allocating tensor with shape[100000000,400]"),
    RuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 1.6e+11 bytes."),
])
def test_out_of_memory_is_one_line_naming_the_setting_to_lower(monkeypatch, capsys, error):
    def fail(*args, **kwargs):
        raise error

    monkeypatch.setattr("tfktopic.runs.train_run", fail)
    code = cli.main(["train", "lstm", "--set", "hidden_dim=4096", "--set", "dropout=0.1"])
    assert code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("tfktopic train: error: out of memory")
    assert lines[0].endswith("lower --set hidden_dim or --batch-size")


def test_other_errors_are_not_taken_for_out_of_memory(monkeypatch):
    def fail(*args, **kwargs):
        raise RuntimeError("a real bug")

    monkeypatch.setattr("tfktopic.runs.train_run", fail)
    with pytest.raises(RuntimeError, match="a real bug"):
        cli.main(["train", "lstm"])


# ----------------------------------------------------------------------------- evaluate
def _tree(path):
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


def test_evaluate_pretrained_writes_under_the_working_directory_not_the_package(
        tmp_path, monkeypatch, capsys):
    from tfktopic import pretrained

    shipped = pretrained.directory() / "psgld-lstm-ptb"
    before = _tree(shipped)
    text = tmp_path / "tiny.txt"
    text.write_text("the company said it would sell shares .\nthe market fell on monday .\n")
    monkeypatch.chdir(tmp_path)
    code = cli.main(["evaluate", "pretrained:psgld-lstm-ptb", "--corpus", str(text),
                     "--format", "text", "--num-generated", "0"])
    out = capsys.readouterr().out
    assert code == 0
    assert out.splitlines()[0] == f"evaluating on {text} (named by --corpus)"
    written = tmp_path / "tfktopic-evaluations" / "psgld-lstm-ptb" / "evaluation.json"
    assert json.loads(written.read_text())["model"] == "lstm"
    assert _tree(shipped) == before  # no evaluation.json, no lock file in the package
    # --out names the folder; a folder inside the package is refused in one line.
    assert cli.main(["evaluate", "pretrained:psgld-lstm-ptb", "--corpus", str(text), "--format",
                     "text", "--num-generated", "0", "--out", str(tmp_path / "mine")]) == 0
    assert (tmp_path / "mine" / "evaluation.json").is_file()
    capsys.readouterr()
    assert cli.main(["evaluate", "pretrained:psgld-lstm-ptb", "--out", str(shipped)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "inside the pretrained models' folder" in err[0], err
    assert _tree(shipped) == before


def test_recorded_relative_corpus_resolves_from_any_directory(tmp_path, monkeypatch):
    from tfktopic import pretrained
    from tfktopic.runs.directory import read_run_config, resolve_recorded_paths

    run_dir = pretrained.directory() / "psgld-lstm-ptb"
    raw = read_run_config(run_dir)
    assert not pathlib.Path(raw["corpus"]).is_absolute()  # as shipped: repository-relative
    monkeypatch.chdir(tmp_path)
    config = resolve_recorded_paths(read_run_config(run_dir), run_dir)
    expected = (run_dir.resolve().parent.parent / raw["corpus"]).resolve()
    assert config["corpus"] == str(expected)
    assert resolve_recorded_paths({"corpus": "lee", "data": {"stopwords": "gensim"}},
                                  run_dir) == {"corpus": "lee", "data": {"stopwords": "gensim"}}


def test_evaluate_says_it_reads_the_recorded_corpus_and_refuses_a_vanished_one(
        tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a b c .\n")
    run = types.SimpleNamespace(config={"corpus": str(corpus)}, path=tmp_path / "run")
    args = types.SimpleNamespace(corpus=None)
    assert cli._evaluation_source(args, run) == (
        f"evaluating on {corpus} (recorded in run.json)")
    assert cli._evaluation_source(types.SimpleNamespace(corpus="lee"), run) == (
        "evaluating on lee (named by --corpus)")
    corpus.unlink()
    from tfktopic.errors import TfktopicError

    with pytest.raises(TfktopicError, match=r"corpus.txt: the corpus recorded in .*run.json no "
                                            r"longer exists; name one with --corpus"):
        cli._evaluation_source(args, run)


# ----------------------------------------------------------------------------- progress
class _Stream:
    def __init__(self, tty):
        self.tty = tty

    def isatty(self):
        return self.tty


def test_progress_is_one_line_per_epoch_when_stdout_is_not_a_terminal():
    assert cli._progress_verbosity(None, _Stream(True)) == 1
    assert cli._progress_verbosity(None, _Stream(False)) == 2
    assert cli._progress_verbosity(None, object()) == 2
    assert cli._progress_verbosity(1, _Stream(False)) == 1   # --verbose 1 as asked
    assert cli._progress_verbosity(0, _Stream(True)) == 0


def test_train_piped_to_a_file_writes_no_backspaces_and_names_the_diversity_regulariser(
        tmp_path):
    log = tmp_path / "log.txt"
    with open(log, "w") as handle:
        proc = subprocess.run(
            [sys.executable, "-m", "tfktopic", "train", "tcnlm", "--max-documents", "40",
             "--epochs", "2", "--set", "hidden_dim=8", "--set", "embedding_dim=8",
             "--set", "factor_dim=8", "--set", "ntm_units=[8]", "--set", "decoder_init=random",
             "--out", str(tmp_path / "run")],
            stdout=handle, stderr=subprocess.PIPE, text=True, timeout=600,
            env={**os.environ, "TF_NUM_INTRAOP_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr
    text = log.read_text()
    assert "\b" not in text and "\r" not in text
    epochs = [line for line in text.splitlines() if " - loss: " in line]
    assert len(epochs) == 2, text       # one line per epoch
    assert all("diversity_reg: " in line and " diversity: " not in line for line in epochs)


# ----------------------------------------------------------------------------- callbacks
def test_early_stopping_on_val_ppl_picks_min_without_mode():
    import keras
    from keras import ops

    from tfktopic.data import TopicVocabulary, Vocabulary, load_corpus, sentence_examples
    from tfktopic.data.pipeline import sentence_dataset
    from tfktopic.models import LSTMLanguageModel

    keras.utils.set_random_seed(0)
    train = load_corpus("lee").split((0.8, 0.1, 0.1), seed=0)[0][:20]
    lm = Vocabulary.build(train, min_count=3)
    topic = TopicVocabulary.build(train, lm)
    examples = sentence_examples(train, lm, topic, max_len=12, context_len=30)
    data = sentence_dataset(examples, batch_size=16, shuffle=False)
    model = LSTMLanguageModel(len(lm), embedding_dim=8, hidden_dim=8)
    model.compile(optimizer=keras.optimizers.Adam(1e-2))
    stop = keras.callbacks.EarlyStopping(monitor="val_ppl", patience=1)
    history = model.fit(data, validation_data=data, epochs=2, callbacks=[stop], verbose=0)
    assert "val_ppl" in history.history          # tfktopic's fit logs reach the callbacks
    assert stop.monitor_op is ops.less           # perplexity: lower is better


def test_tensorboard_without_the_package_is_one_line_naming_the_extra(monkeypatch, capsys):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "tensorboard" else real(name, *a))
    called = []
    monkeypatch.setattr("tfktopic.runs.train_run", lambda *a, **k: called.append(k))
    assert cli.main(["train", "lstm", "--tensorboard", "logs"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == ["tfktopic train: error: --tensorboard needs the tensorboard package, not "
                     "installed with tfktopic: pip install 'tfktopic[tensorboard]'"]
    assert called == []                          # refused before training starts


def test_tensorboard_with_the_package_passes_the_callback(monkeypatch, tmp_path):
    import importlib.machinery
    import importlib.util

    import keras

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: (
        importlib.machinery.ModuleSpec("tensorboard", None) if name == "tensorboard"
        else real(name, *a)))
    called = []
    monkeypatch.setattr("tfktopic.runs.train_run", lambda *a, **k: called.append(k))
    assert cli.main(["train", "lstm", "--tensorboard", str(tmp_path / "logs")]) == 0
    (board,) = called[0]["callbacks"]
    assert isinstance(board, keras.callbacks.TensorBoard)
    assert called[0]["verbose"] in (1, 2)
    assert cli.main(["train", "lstm"]) == 0 and called[1]["callbacks"] == []


def test_evaluate_names_the_test_file_of_a_corpus_that_comes_split(tmp_path):
    for split in ("train", "valid", "test"):
        (tmp_path / f"ptb.{split}.txt").write_text("a b c\n")
    run = types.SimpleNamespace(config={"corpus": str(tmp_path / "ptb.train.txt")},
                                path=tmp_path / "run")
    assert cli._evaluation_source(types.SimpleNamespace(corpus=None), run) == (
        f"evaluating on {tmp_path / 'ptb.test.txt'} (recorded in run.json)")
