"""Every layer gives the same outputs and gradients on JAX as on TensorFlow.

The cases (tests/layer_cases.py) set the same weights from numpy on both
backends; on TensorFlow the LSTM and the unmasked factorised LSTM take the
custom-gradient fast paths, on JAX the keras.ops references (keras' LSTM, the
`keras.ops.scan` recurrence), so these also check fast path == reference
across backends. float32 tolerance: rtol 1e-4, atol 1e-5 (recurrences of 6-7
steps; different summation orders of the fused kernels).
"""

import ast
import pathlib

import numpy as np
import pytest

from tests import layer_cases
from tests.backends import run_in_backend

pytestmark = pytest.mark.backends

RTOL, ATOL = 1e-4, 1e-5
PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "tfktopic"


@pytest.fixture(scope="module")
def both_backends():
    return layer_cases.all_cases(), run_in_backend("jax", "tests.layer_cases:all_cases")


@pytest.mark.parametrize("name", layer_cases.CASES + ("factorized_lstm_masked",))
def test_layer_gives_the_same_outputs_and_gradients_on_jax_as_on_tensorflow(both_backends, name):
    ours, theirs = (results[name] for results in both_backends)
    assert len(ours["outputs"]) == len(theirs["outputs"]) and ours["grads"]
    for mine, other in zip(ours["outputs"], theirs["outputs"]):
        np.testing.assert_allclose(mine, other, rtol=RTOL, atol=ATOL, err_msg=name)
    assert len(ours["grads"]) == len(theirs["grads"])
    for i, (mine, other) in enumerate(zip(ours["grads"], theirs["grads"])):
        assert np.any(mine != 0), f"{name}: gradient {i} is zero"
        np.testing.assert_allclose(mine, other, rtol=RTOL, atol=ATOL, err_msg=f"{name} grad {i}")


@pytest.mark.parametrize("path", sorted((PACKAGE / "layers").glob("*.py"))
                         + [PACKAGE / "distributions.py"], ids=lambda p: p.name)
def test_layer_modules_do_not_import_tensorflow_at_module_level(path):
    tree = ast.parse(path.read_text())
    for node in tree.body:
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
        assert not any(n.split(".")[0] in ("tensorflow", "tensorflow_probability")
                       for n in names), f"{path.name}:{node.lineno} imports {names}"
