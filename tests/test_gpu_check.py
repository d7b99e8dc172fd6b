"""`benchmarks.gpu_check` at its tiny sizes under JAX on the CPU: the record's schema and
that every family's training loss fell (first vs last timed steps)."""

import json
import os
import subprocess
import sys

import pytest

from benchmarks import gpu_check

pytestmark = pytest.mark.backends

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: Keys of every family's record (see the module docstring of benchmarks.gpu_check).
FAMILY_KEYS = {"loss_first", "loss_last", "nll_first", "nll_last", "loss_fell", "tokens_per_s", "timed_steps",
               "parameters", "batch", "peak_bytes", "seconds"}
RECORD_KEYS = {"backend", "jax", "keras", "platform", "device_kind", "device_count",
               "tensorflow_imported", "corpus", "sizes", "lm_vocab", "topic_vocab", "steps",
               "warmup", "families", "all_losses_fell", "seconds"}


# One run for the module's checks: the tiny run compiles nine train steps, rGBN-RNN's and
# GBN-RNN's the largest (measured on a 2-core CPU under a load of 10-17: over 20 minutes in
# all, over 7 of them on rgbn_rnn; the timeout leaves room for such a machine).
@pytest.fixture(scope="module")
def record(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu_check") / "record.json"
    env = {**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu",
           "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run([sys.executable, "-m", "benchmarks.gpu_check", "--tiny",
                           "--steps", "24", "--warmup", "2", "--out", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=2400)
    assert out.exists(), done.stderr[-3000:]
    return done.returncode, json.loads(out.read_text())


def test_tiny_record_has_the_schema_and_every_family(record):
    _, result = record
    assert RECORD_KEYS <= set(result), RECORD_KEYS - set(result)
    assert result["backend"] == "jax" and result["platform"] == "cpu"
    assert result["sizes"] == "tiny" and result["steps"] == 24
    assert set(result["families"]) == set(gpu_check.FAMILIES)
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
