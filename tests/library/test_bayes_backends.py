"""tfktopic.bayes gives the same draws and updates on TensorFlow and on JAX.

Each case of `tests/bayes_backend_cases.py` runs in this process (the suite's backend)
and under ``KERAS_BACKEND=jax`` (all of them in one subprocess: the ``jax_side``
fixture). Integer bits (keys, uniforms, augmented counts) must be identical;
floating-point results that go through log / cos / sin or float64-vs-float32 arithmetic
agree to the float32 tolerances stated per test. Each backend also reproduces itself exactly when a seeded run is repeated.
"""

import doctest
import importlib
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from tests import bayes_backend_cases as cases
from tests.backends import REPO_ROOT, backend_available, run_many_in_backend

pytestmark = pytest.mark.backends

#: Box-Muller normals: log / cos / sin may differ in the last float32 ulp.
NORMAL_TOLERANCE = dict(rtol=1e-6, atol=2e-6)


def _counter_inputs():
    return dict(seed=2**33 + 5, step=11, stream=3,
                counters=np.array([0, 1, 2, 7, 2**31 + 9, 2**32 - 1], np.uint32),
                shape=(3, 7))


def _augmentation_inputs():
    rng = np.random.default_rng(0)
    counts = rng.poisson(2.0, size=(3, 4, 6)).astype("float32")
    counts[0, 0, 0] = 40.0                             # one long ragged row
    return dict(counts=counts,
                concentration=rng.gamma(1.0, size=(3, 4, 6)).astype("float32"),
                probs=rng.uniform(size=(3, 4, 6)).astype("float32"),
                phi=rng.dirichlet(np.ones(6), size=5).T.astype("float32"),
                theta=rng.gamma(1.0, size=(3, 4, 5)).astype("float32"),
                key=9, offset=2)


def _tlasgr_inputs():
    rng = np.random.default_rng(3)
    return dict(bow=rng.poisson(1.0, size=(4, 3, 10)).astype("float32"),
                thetas=[rng.gamma(1.0, size=(4, 3, k)).astype("float32") for k in (4, 3)],
                seed=5, steps=2)


def _tiny_model_inputs():
    rng = np.random.default_rng(1)
    return dict(weights=[rng.normal(size=(3, 2)).astype("float32"),
                         rng.normal(size=2).astype("float32"),
                         rng.normal(size=(2, 2)).astype("float32"),
                         rng.normal(size=2).astype("float32")],
                x=rng.normal(size=(5, 3)).astype("float32"),
                y=rng.normal(size=(5, 2)).astype("float32"), steps=3)


@pytest.fixture(scope="module")
def jax_side():
    """Every case of this module under ``KERAS_BACKEND=jax``, in one subprocess."""
    case = "tests.bayes_backend_cases:"
    return run_many_in_backend("jax", {
        "counter": (case + "counter_draws", _counter_inputs()),
        "augmentation": (case + "augmentation_draws", _augmentation_inputs()),
        "tlasgr": (case + "tlasgr_update", _tlasgr_inputs()),
        **{optimizer: (case + "langevin_steps", dict(optimizer=optimizer, **_tiny_model_inputs()))
           for optimizer in ("sgld", "psgld")}})


def test_counter_draws_are_bit_identical_on_tensorflow_and_jax(jax_side):
    ours = cases.counter_draws(**_counter_inputs())
    theirs = jax_side["counter"]
    for name in ("key", "uniform", "uniform_pair"):
        np.testing.assert_array_equal(ours[name], theirs[name], err_msg=name)
    for name in ("normal23", "normal16"):
        np.testing.assert_allclose(ours[name], theirs[name], err_msg=name, **NORMAL_TOLERANCE)
    assert ours["key"].dtype == np.uint32 and ours["uniform"].dtype == np.float32


def test_augmentation_draws_are_identical_on_tensorflow_jax_and_the_reference(jax_side):
    """TensorFlow's ragged kernel, the keras.ops reference on TensorFlow, and the reference
    under JAX (eager and jax.jit) give exactly the same counts."""
    fast = cases.augmentation_draws(**_augmentation_inputs())
    reference = cases.augmentation_draws(**_augmentation_inputs(), reference=True)
    theirs = jax_side["augmentation"]
    for name in ("crt", "binomial", "phi_counts", "topic_counts"):
        np.testing.assert_array_equal(fast[name], reference[name], err_msg=name)
        np.testing.assert_array_equal(fast[name], theirs[name], err_msg=name)
    for got, name in zip(theirs["jit"], ("crt", "binomial", "phi_counts", "topic_counts")):
        np.testing.assert_array_equal(got, theirs[name], err_msg=f"jit {name}")
    counts = _augmentation_inputs()["counts"]
    assert fast["crt"][0, 0, 0] >= 1 and np.all(fast["crt"] <= counts)
    np.testing.assert_array_equal(fast["topic_counts"].sum(-1), counts.sum(-1))


def test_tlasgr_update_agrees_on_tensorflow_and_jax_and_repeats_exactly(jax_side):
    """Two updates of Phi / Pi: the augmented counts are identical; the simplex step runs
    in float64 on TensorFlow and in float32 under JAX without x64, so Phi / Pi agree to
    float32 rounding of a step (atol 2e-6 on entries of columns that sum to 1); JAX's
    jit-compiled stateless update equals its eager one to atol 1e-6."""
    ours = cases.tlasgr_update(**_tlasgr_inputs())
    theirs = jax_side["tlasgr"]
    for run in (ours, theirs):                      # seeded: a repeated run is identical
        for name in ("phi_counts", "pi_counts", "phi", "pi", "phi_preconditioners"):
            for a, b in zip(run["first"][name], run["second"][name]):
                np.testing.assert_array_equal(a, b, err_msg=name)
    # Under JAX the update also runs jax.jit-compiled, statelessly (Keras' JAX trainer).
    jitted = theirs["jit"]
    ours, theirs = ours["first"], theirs["first"]
    assert jitted["iterations"] == 2
    for name in ("phi", "pi"):
        for a, b in zip(jitted[name], theirs[name]):
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-6, err_msg=f"jit {name}")
    for name in ("phi_counts", "pi_counts"):
        for a, b in zip(ours[name], theirs[name]):
            np.testing.assert_array_equal(a, b, err_msg=name)
    assert sum(c.sum() for c in ours["phi_counts"]) > 0
    for name in ("phi", "pi"):
        for a, b in zip(ours[name], theirs[name]):
            np.testing.assert_allclose(a, b, rtol=0, atol=2e-6, err_msg=name)
            np.testing.assert_allclose(b.sum(0), 1.0, atol=1e-5)
    for a, b in zip(ours["phi_preconditioners"], theirs["phi_preconditioners"]):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    assert ours["iterations"] == theirs["iterations"] == 2
    assert ours["change"] > 0


@pytest.mark.parametrize("optimizer", ["sgld", "psgld"])
def test_langevin_steps_agree_on_tensorflow_and_jax_and_repeat_exactly(optimizer, jax_side):
    """Three steps on a tiny two-layer model, T = 1: the noise bits are the same, the
    weights agree to float32 rounding (rtol 1e-5, atol 1e-6)."""
    ours = cases.langevin_steps(optimizer, **_tiny_model_inputs())
    theirs = jax_side[optimizer]
    for run in (ours, theirs):
        for a, b in zip(run["first"], run["second"]):
            np.testing.assert_array_equal(a, b)
    start = _tiny_model_inputs()["weights"]
    for a, b, w in zip(ours["first"], theirs["first"], start):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
        assert not np.allclose(a, w)                 # the step moved every weight


def test_importing_tfktopic_bayes_under_jax_does_not_import_tensorflow():
    """Only the package's own modules are imported (the top-level ``tfktopic/__init__``,
    which imports the other subpackages, is stood in for by an empty package)."""
    if not backend_available("jax"):
        pytest.skip("the jax backend is not installed here")
    script = textwrap.dedent("""
        import sys, types
        package = types.ModuleType("tfktopic")
        package.__path__ = ["tfktopic"]
        sys.modules["tfktopic"] = package
        import tfktopic.bayes
        from tfktopic.bayes import PSGLD, SGLD, SampleCollector, TLASGRTopics
        print("tensorflow" in sys.modules)
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, capture_output=True,
                          text=True, env={**os.environ, "KERAS_BACKEND": "jax"}, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "False"


@pytest.mark.parametrize("module", ["counter_random", "augmentation", "tlasgr", "sgmcmc"])
def test_docstring_examples_run(module):
    module = importlib.import_module(f"tfktopic.bayes.{module}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0, result
