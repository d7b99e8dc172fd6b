"""Command-line hygiene (issue 51): cheap --help, --version, one-line errors, lazy imports."""

import json
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
