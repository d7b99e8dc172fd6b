"""TensorFlow's CPU memory is reused, not faulted in again every step (tfktopic/startup.py)."""

import json
import os
import subprocess
import sys

import pytest

from tfktopic import startup

# Repeated steps that free and re-ask for a 32 MB tensor, the shape of a softmax's logits;
# page faults counted over the repeats only (after one warm-up call).
_PROBE = """
import json, resource
import tfktopic
import tensorflow as tf
x = tf.random.normal([2000, 4000])
f = tf.function(lambda x: tf.reduce_sum(tf.exp(x) * 2.0 + 1.0))
f(x)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    f(x)
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
import os
print(json.dumps({"faults": faults, "value": os.environ.get("TF_CPU_ALLOCATOR_USE_BFC")}))
"""


def _probe(value=None):
    env = {k: v for k, v in os.environ.items() if k != startup.CPU_ALLOCATOR_VARIABLE}
    if value is not None:
        env[startup.CPU_ALLOCATOR_VARIABLE] = value
    env.update(TF_CPP_MIN_LOG_LEVEL="3", TF_NUM_INTRAOP_THREADS="1", KERAS_BACKEND="tensorflow")
    proc = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_reuse_cpu_memory_sets_the_bfc_switch_unless_the_user_did(monkeypatch):
    monkeypatch.delenv(startup.CPU_ALLOCATOR_VARIABLE, raising=False)
    assert startup.reuse_cpu_memory() == "true"
    assert os.environ[startup.CPU_ALLOCATOR_VARIABLE] == "true"
    monkeypatch.setenv(startup.CPU_ALLOCATOR_VARIABLE, "false")
    assert startup.reuse_cpu_memory() == "false"


def test_importing_tfktopic_stops_tensorflow_faulting_in_each_steps_memory_again():
    """After ``import tfktopic`` a repeated 32 MB step takes almost no page faults; with the
    user's ``false`` (TensorFlow's default allocator) each step faults its pages in again."""
    pytest.importorskip("tensorflow")
    reused, default = _probe(), _probe("false")
    assert reused["value"] == "true" and default["value"] == "false"
    assert reused["faults"] < 20 * 400           # well under one 8,000-page step's worth
    if default["faults"] <= 20 * 4000:           # 20 steps of >= 8,000 4-KiB pages each, halved
        pytest.skip(f"this machine's default allocator reuses the memory too ({default['faults']} "
                    "faults over 20 steps; some glibc/kernel builds do): nothing to compare with")
    assert reused["faults"] < default["faults"] / 20
