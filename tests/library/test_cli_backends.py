"""`tfktopic train`, `generate` and `evaluate` of every family under Keras' JAX backend
without TensorFlow (issue 49).

Each command runs in a fresh ``KERAS_BACKEND=jax`` process (the backend is fixed when Keras
is first imported) started as ``python -m tests.no_tensorflow tfktopic ...``, which first
makes ``import tensorflow`` fail (a simulated install without TensorFlow: the runs feed
numpy `keras.utils.PyDataset`s, `tfktopic.data.batches`). Each family trains one epoch on
40 documents of the embedded Lee corpus at tiny sizes, generates, and its run directory
evaluates again to the same test perplexity. This is the CLI smoke run of the JAX CI job
(``-m backends``); the equivalence of the numbers with TensorFlow is tested layer by layer
and model by model elsewhere (tests/test_models_backends.py).
"""

import json
import math
import os
import subprocess
import sys

import pytest

from tests.backends import REPO_ROOT, backend_available, in_the_jax_job

pytestmark = [pytest.mark.backends, in_the_jax_job()]

TINY = ["--corpus", "lee", "--max-documents", "40", "--epochs", "1", "--verbose", "0"]
#: Sizes small enough for a one-epoch smoke run (the presets' own sizes take minutes).
SIZES = {
    "tcnlm": ["--batch-size", "512", "--set", "hidden_dim=32", "--set", "factor_dim=32",
              "--set", "embedding_dim=16"],
    "rgbn_rnn": ["--batch-size", "64", "--set", "hidden_sizes=[16, 8]",
                 "--set", "topic_sizes=[8, 4]", "--set", "embedding_dim=16"],
    "gbn_rnn": ["--batch-size", "64", "--set", "hidden_sizes=[16, 8]",
                "--set", "topic_sizes=[8, 4]", "--set", "embedding_dim=16"],
}
FAMILIES = ("lstm", "doc_lstm", "doc_lstm_chunked", "lda_lstm", "topicrnn", "doc_topicrnn",
            "tcnlm", "rgbn_rnn", "gbn_rnn")


@pytest.fixture(scope="module")
def jax_cache(tmp_path_factory):
    """One persistent JAX compilation cache for the module's processes: train, generate and
    evaluate compile the same programs (rGBN-RNN's eager step: ~1,200 op programs), and a
    warm cache cut a gbn_rnn `evaluate` from 36 s to 12 s (measured beside two trainings)."""
    return tmp_path_factory.mktemp("jax_cache")


def _tfktopic(args, cache):
    """``python -m tfktopic ARGS`` under JAX with TensorFlow blocked: (exit code, stdout,
    stderr)."""
    env = {**os.environ, "KERAS_BACKEND": "jax", "JAX_COMPILATION_CACHE_DIR": str(cache),
           "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
           "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
           "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "tests.no_tensorflow", "tfktopic",
                           *map(str, args)], env=env, capture_output=True, text=True,
                          timeout=900, cwd=REPO_ROOT)
    return done.returncode, done.stdout, done.stderr


@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_trains_generates_and_evaluates_under_jax_without_tensorflow(
        family, tmp_path, jax_cache):
    if not backend_available("jax"):
        pytest.skip("the jax backend is not installed here")
    out = tmp_path / family
    code, stdout, stderr = _tfktopic(["train", family, *TINY, *SIZES.get(family, []),
                                      "--out", out], jax_cache)
    assert code == 0, stderr[-3000:]
    result = json.loads((out / "results.json").read_text())
    ppl = result["test"]["perplexity"]
    # One epoch on 40 documents: finite and below a uniform guess over the vocabulary.
    vocab_size = len(json.loads((out / "lm_vocab.json").read_text())["tokens"])
    assert math.isfinite(ppl) and ppl < vocab_size
    # --unk: one epoch on 40 documents mostly predicts <unk>; without it a sentence can end
    # at once (seen for doc_lstm: two empty lines).
    code, stdout, stderr = _tfktopic(["generate", out, "--num", "2", "--max-len", "8",
                                      "--unk"], jax_cache)
    assert code == 0, stderr[-3000:]
    assert len([line for line in stdout.splitlines() if line.strip()]) >= 1
    # (--num-generated 0: no BLEU; `generate` above is the generation check.)
    code, stdout, stderr = _tfktopic(["evaluate", out, "--num-generated", "0",
                                      "--json", tmp_path / "again.json"], jax_cache)
    assert code == 0, stderr[-3000:]
    again = json.loads((tmp_path / "again.json").read_text())
    assert again["perplexity"]["perplexity"] == pytest.approx(ppl, rel=1e-4)


def test_export_says_it_needs_tensorflow_under_jax(tmp_path, jax_cache):
    if not backend_available("jax"):
        pytest.skip("the jax backend is not installed here")
    code, stdout, stderr = _tfktopic(["export", tmp_path / "no-run", "--saved-model",
                                      tmp_path / "sm"], jax_cache)
    assert code != 0
    message = stderr.strip().splitlines()[-1]
    assert "needs the TensorFlow backend" in message, stderr[-2000:]
