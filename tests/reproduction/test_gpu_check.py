"""`benchmarks.gpu_check` at its tiny sizes under JAX on the CPU: the record's schema and
that every family's training loss fell (first vs last timed steps)."""

import json
import os
import subprocess
import sys

import pytest

from benchmarks import gpu_check
from tests.backends import in_the_jax_job

pytestmark = [pytest.mark.backends, in_the_jax_job()]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: Keys of every family's record (see the module docstring of benchmarks.gpu_check).
FAMILY_KEYS = {"loss_first", "loss_last", "nll_first", "nll_last", "loss_fell", "tokens_per_s", "timed_steps",
               "parameters", "batch", "peak_bytes", "seconds"}
RECORD_KEYS = {"backend", "jax", "keras", "platform", "device_kind", "device_count",
               "tensorflow_imported", "corpus", "sizes", "lm_vocab", "topic_vocab", "steps",
               "warmup", "families", "all_losses_fell", "seconds"}


#: rGBN-RNN / GBN-RNN step eagerly under JAX (about 9 s a step at the tiny sizes on a loaded
#: 2-core CPU, over 7 minutes for the tiny run): their check is marked slow, the others'
#: module run stays in the JAX CI job.
SLOW = ("rgbn_rnn", "gbn_rnn")
FAST = tuple(f for f in gpu_check.FAMILIES if f not in SLOW)


def _tiny_run(out, families):
    env = {**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu",
           "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    # As on the GPU image: TensorFlow cannot be imported (tests.no_tensorflow's blocker).
    done = subprocess.run([sys.executable, "-m", "tests.no_tensorflow", "benchmarks.gpu_check",
                           "--tiny",
                           "--steps", "24", "--warmup", "2", "--families", ",".join(families),
                           "--out", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=2400)
    assert out.exists(), done.stderr[-3000:]
    return done.returncode, json.loads(out.read_text())


@pytest.fixture(scope="module")
def record(tmp_path_factory):
    return _tiny_run(tmp_path_factory.mktemp("gpu_check") / "record.json", FAST)


@pytest.mark.slow
def test_tiny_run_of_the_gbn_families_lowers_their_loss(tmp_path):
    returncode, result = _tiny_run(tmp_path / "record.json", SLOW)
    assert returncode == 0 and result["all_losses_fell"] is True
    for family in SLOW:
        entry = result["families"][family]
        assert entry["nll_last"] < entry["nll_first"], (family, entry)


def test_tiny_record_has_the_schema_and_every_family(record):
    _, result = record
    assert RECORD_KEYS <= set(result), RECORD_KEYS - set(result)
    assert result["backend"] == "jax" and result["platform"] == "cpu"
    assert result["sizes"] == "tiny" and result["steps"] == 24
    assert set(result["families"]) == set(FAST)
    assert result["tensorflow_imported"] is False          # it ran without TensorFlow
    for family, entry in result["families"].items():
        assert "error" not in entry, (family, entry)
        assert FAMILY_KEYS <= set(entry), (family, FAMILY_KEYS - set(entry))
        assert entry["tokens_per_s"] > 0 and entry["parameters"] > 0, (family, entry)
        assert entry["peak_bytes"] is None or entry["peak_bytes"] > 0, (family, entry)


def test_tiny_run_lowers_every_familys_loss_and_exits_zero(record):
    returncode, result = record
    fell = {family: (entry.get("nll_first"), entry.get("nll_last"))
            for family, entry in result["families"].items() if not entry.get("loss_fell")}
    assert not fell, fell
    assert result["all_losses_fell"] is True
    assert returncode == 0
    for family, entry in result["families"].items():
        assert entry["nll_last"] < entry["nll_first"], family


def test_unknown_family_is_refused_with_the_choices(capsys):
    with pytest.raises(SystemExit):
        gpu_check.main(["--families", "lstm,nonesuch"])
    err = capsys.readouterr().err
    assert "--families: unknown nonesuch" in err and "rgbn_rnn" in err
