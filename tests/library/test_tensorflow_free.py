"""tfktopic without TensorFlow under Keras' JAX backend (issue 49).

These tests simulate an environment without TensorFlow: a fresh ``KERAS_BACKEND=jax``
process first installs `tests.no_tensorflow`'s `sys.meta_path` finder, which makes
``import tensorflow`` (and ``tensorflow_probability``, ``tf_keras``) raise ImportError as if
the wheels were absent, and only then imports Keras and tfktopic. In it every package
imports, every family fits one epoch on numpy input, evaluates, generates and round-trips
its ``.keras`` file, and what needs TensorFlow (SavedModel export, tf.distribute
strategies) raises a one-line error naming it. The CLI of every family under the same
blocker is tests/test_cli_backends.py.
"""

import numpy as np
import pytest

from tests import tensorflow_free_cases
from tests.backends import in_the_jax_job, run_in_backend

pytestmark = [pytest.mark.backends, in_the_jax_job()]


@pytest.fixture(scope="module")
def without_tensorflow():
    """`tests.tensorflow_free_cases.run()` in a JAX process where TensorFlow cannot import."""
    return run_in_backend("jax", "tests.no_tensorflow:call", timeout=900,
                          function="tests.tensorflow_free_cases:run")


def test_importing_tfktopic_under_jax_imports_no_tensorflow(without_tensorflow):
    assert str(without_tensorflow["backend"]) == "jax"
    assert list(without_tensorflow["tensorflow_modules"]) == []


@pytest.mark.parametrize("family", tensorflow_free_cases.FAMILIES)
def test_every_family_fits_evaluates_generates_and_round_trips_without_tensorflow(
        family, without_tensorflow):
    result = without_tensorflow
    assert np.all(np.isfinite(result[f"{family}_loss"]))
    assert np.isfinite(result[f"{family}_eval"])
    generated = np.asarray(result[f"{family}_generated"])
    assert generated.shape[0] == 2 and 1 <= generated.shape[1] <= 6
    assert result[f"{family}_round_trip"] == 0.0


def test_savedmodel_export_and_tf_distribute_say_they_need_tensorflow(without_tensorflow):
    for key, feature in (("export", "SavedModel export"), ("strategy", "tf.distribute")):
        message = str(without_tensorflow[key])
        assert feature in message and "TensorFlow backend" in message, message
        assert "\n" not in message


def test_importing_tfktopic_under_jax_leaves_an_installed_tensorflow_unimported():
    # Here TensorFlow is importable (no blocker): the imports must still not load it.
    import os
    import subprocess
    import sys

    from tests.backends import REPO_ROOT
    code = ("import sys; import tfktopic, tfktopic.models, tfktopic.data, tfktopic.layers, "
            "tfktopic.bayes, tfktopic.bayes.setups, tfktopic.runs, tfktopic.cli, "
            "tfktopic.export, tfktopic.distribute, tfktopic.evaluation; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('tensorflow', 'tf_keras', 'tensorflow_probability')))")
    env = {**os.environ, "KERAS_BACKEND": "jax",
           "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=300, cwd=REPO_ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_the_cli_without_the_default_backend_says_which_extra_to_install(tmp_path):
    # A plain `pip install tfktopic` has no backend: the default (TensorFlow) is missing.
    import os
    import subprocess
    import sys

    from tests.backends import REPO_ROOT
    code = ("import sys, tests.no_tensorflow as n; n.block(); from tfktopic.cli import main; "
            f"sys.exit(main(['train', 'lstm', '--corpus', 'lee', '--out', {str(tmp_path)!r}]))")
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=300, cwd=REPO_ROOT)
    assert done.returncode == 2, done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if line.startswith("tfktopic")]
    assert lines == [line for line in done.stderr.splitlines() if line.strip()][-1:]
    assert "backend 'tensorflow' is not installed: pip install 'tfktopic[tensorflow]'" in \
        lines[0] and "KERAS_BACKEND=jax" in lines[0]
