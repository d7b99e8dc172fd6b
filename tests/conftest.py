"""Shared pytest fixtures: paths to the real corpora in ../shared/data.

Tests that need a corpus skip with a message naming the missing file when the
shared data folder is absent (users of the package do not have it).
"""

import os
import pathlib

import pytest

# The fast paths (the time loops of HoistedLSTM and factorized_recurrence, the fused SGLD /
# pSGLD update, TLASGR's simplex update: `tfktopic.xla`) run without XLA in the suite:
# hundreds of tiny models would each compile them (the whole suite with XLA loops
# everywhere: 690 tests in 733 s on 2 idle cores, over the 10-minute budget; the fused
# SG-MCMC and TLASGR updates cost test_collection, test_sgmcmc_models and test_rgbn_rnn
# 153 against 123 user-s, one loaded run each). The tests of those paths turn XLA back on
# (`xla_loops_on`), so the compiled code is tested against its plain graph and numpy.
os.environ.setdefault("TFKTOPIC_XLA_LOOPS", "0")
# Under pytest-xdist (README's `-n 2` on 2 cores) each worker process runs its TensorFlow ops
# on one thread: two workers with TF's default of one thread per core each put 4 busy threads
# on 2 cores. Measured on 2 idle cores, 4 model test files with `-n 2`: 114 s -> 94 s
# (user CPU 188 s -> 157 s). Set before any test module imports TensorFlow; the subprocesses
# that tests start inherit it.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("TF_NUM_INTRAOP_THREADS", "1")
# JAX compiles every program it runs, eager ops included (a JAX process building and stepping
# a tiny LSTM compiles ~100 programs, 19 of its 31 s), and the suite starts dozens of JAX
# processes that compile the same ones: one persistent compilation cache for the whole run
# (its workers and the subprocesses they start inherit it). One JAX objective-and-gradient
# case, run twice on a loaded 2-core machine: 22.8 -> 13.4 user-s for the second process.
if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
    import atexit
    import shutil
    import tempfile

    os.environ["JAX_COMPILATION_CACHE_DIR"] = tempfile.mkdtemp(prefix="tfktopic-tests-jax-")
    atexit.register(shutil.rmtree, os.environ["JAX_COMPILATION_CACHE_DIR"], True)
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")


REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"


def shared_file(relative):
    """Return the path of a file under ../shared/data or skip the test."""
    path = SHARED_DATA / relative
    if not path.exists():
        pytest.skip(
            f"real corpus {relative!r} not found at {path}: the shared data "
            "folder (../shared/data next to the repository) is absent"
        )
    return path


@pytest.fixture(scope="session")
def ptb_dir():
    return shared_file("ptb/ptb.train.txt").parent


@pytest.fixture(scope="session")
def apnews_path():
    return shared_file("apnews/apnews.txt")


@pytest.fixture(scope="session")
def apnews_toy_path():
    return shared_file("apnews/toy-train.txt")


@pytest.fixture(scope="session")
def imdb_path():
    return shared_file("imdb/aclImdb_reviews.jsonl.gz")


@pytest.fixture(scope="session")
def war_and_peace_path():
    return shared_file("war_and_peace/warpeace_input.txt")


@pytest.fixture(scope="session")
def mallet_stopwords_path():
    return shared_file("stopwords/mallet_en.txt")


@pytest.fixture()
def xla_loops_on(monkeypatch):
    """The fast paths compiled by XLA (`tfktopic.xla`), as outside the test suite."""
    monkeypatch.setenv("TFKTOPIC_XLA_LOOPS", "1")


def assert_objective_unchanged_by_xla_loops(model, batch, monkeypatch, keys):
    """`model.objective(batch)` (evaluation mode) and its gradients with the XLA fast paths
    (`TFKTOPIC_XLA_LOOPS=1`: row buckets, the XLA cross-entropy) equal the plain graph's.

    Args:
        model: a built model; batch: its batch dict; keys: the objective's terms to compare.
    """
    import numpy as np
    import tensorflow as tf

    results = {}
    for xla in ("0", "1"):
        monkeypatch.setenv("TFKTOPIC_XLA_LOOPS", xla)
        with tf.GradientTape() as tape:
            terms = model.objective(batch, training=False)
        results[xla] = (terms, tape.gradient(terms["loss"], model.trainable_weights))
    for key in keys:
        fast, plain = float(results["1"][0][key]), float(results["0"][0][key])
        assert np.isfinite(fast) and fast == pytest.approx(plain, rel=1e-5), key
    for a, b in zip(results["1"][1], results["0"][1]):
        if a is None:
            assert b is None
            continue
        np.testing.assert_allclose(tf.convert_to_tensor(a).numpy(),
                                   tf.convert_to_tensor(b).numpy(), rtol=1e-4, atol=1e-6)
