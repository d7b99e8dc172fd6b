"""The two kernels behind issue 18's mixed-precision speed, each with and without XLA.

    python -m benchmarks.kernels --out benchmarks/results/medium/kernels_amx.json

In one process, interleaved rounds (the fastest round of each counts), at the medium
LSTM LM's sizes on APNEWS (a step's N = 1,210 gathered positions, H = 256, V = 4,591;
batch 64 x 30 steps):

* ``softmax``: the output layer's forward and backward, [N, H] x [H, V] and the softmax
  cross-entropy of the gathered targets, with TensorFlow's fused kernel
  (``TFKTOPIC_XLA_LOOPS=0``) against the XLA program of
  `tfktopic.evaluation.cross_entropy` (the default), float32 and bfloat16 products;
* ``lstm``: `tfktopic.layers.hoisted_lstm.hoisted_lstm_sequence` forward and hand-written
  backward with XLA-compiled loops against plain `tf.scan` loops, float32 and bfloat16
  (since the half-precision switch of `tfktopic.xla`, a bfloat16 sequence takes the plain
  loops by default; this times both).

Read the ratios on a loaded machine; the absolute milliseconds need an idle one.
"""

import argparse
import os
import sys
import time

import numpy as np

from benchmarks.common import cpu_name, write_result

ROWS, HIDDEN, VOCAB = 1210, 256, 4591
BATCH, STEPS = 64, 30
CALLS, ROUNDS = 10, 5


def _softmax_case(dtype, xla):
    import tensorflow as tf

    from tfktopic.evaluation.cross_entropy import target_log_softmax

    rng = np.random.default_rng(0)
    features = tf.cast(rng.normal(size=(ROWS, HIDDEN)).astype(np.float32), dtype)
    kernel = tf.cast((rng.normal(size=(HIDDEN, VOCAB)) * 0.05).astype(np.float32), dtype)
    targets = tf.constant(rng.integers(0, VOCAB, size=ROWS), tf.int32)
    os.environ["TFKTOPIC_XLA_LOOPS"] = "1" if xla else "0"   # read when traced

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            tape.watch([features, kernel])
            loss = -tf.reduce_sum(target_log_softmax(targets, tf.matmul(features, kernel)))
        d_features, d_kernel = tape.gradient(loss, [features, kernel])
        return loss + 0.0 * tf.cast(d_features[0, 0] + d_kernel[0, 0], tf.float32)

    step()
    return step


def _lstm_case(dtype, xla):
    import tensorflow as tf

    from tfktopic.layers import hoisted_lstm

    rng = np.random.default_rng(1)
    inputs = tf.cast(rng.normal(size=(BATCH, STEPS, HIDDEN)).astype(np.float32), dtype)
    weights = [tf.Variable((rng.normal(size=s) * 0.05).astype(np.float32))
               for s in ((HIDDEN, 4 * HIDDEN), (HIDDEN, 4 * HIDDEN), (4 * HIDDEN,))]
    loops = hoisted_lstm._LSTM[bool(xla)]

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            cast = [tf.cast(w, dtype) for w in weights]
            time_major = tf.transpose(inputs, (1, 0, 2))
            zeros = tf.zeros((BATCH, HIDDEN), dtype)
            hidden, _ = loops(time_major, *cast, zeros, zeros)
            loss = tf.reduce_sum(tf.cast(hidden, tf.float32) ** 2)
        gradients = tape.gradient(loss, weights)
        return loss + 0.0 * tf.add_n([tf.reduce_sum(g) for g in gradients])

    step()
    return step


def _seconds(step):
    start = time.perf_counter()
    for _ in range(CALLS):
        result = step()
    float(result)
    return (time.perf_counter() - start) / CALLS


def run():
    load_before = list(os.getloadavg())
    cases = {}
    for kernel, build in (("softmax", _softmax_case), ("lstm", _lstm_case)):
        for dtype in ("float32", "bfloat16"):
            for xla in (False, True):
                cases[(kernel, dtype, xla)] = build(dtype, xla)
    rounds = {key: [] for key in cases}
    for _ in range(ROUNDS):
        for key, step in cases.items():
            rounds[key].append(_seconds(step))
    rows = [{"kernel": k, "dtype": d, "xla": x, "ms": 1e3 * min(times),
             "rounds_ms": [1e3 * t for t in times]} for (k, d, x), times in rounds.items()]
    best = {(r["kernel"], r["dtype"], r["xla"]): r["ms"] for r in rows}
    ratios = {f"{k} {d}: plain / xla": best[(k, d, False)] / best[(k, d, True)]
              for k in ("softmax", "lstm") for d in ("float32", "bfloat16")}
    return {"sizes": {"rows": ROWS, "hidden": HIDDEN, "vocab": VOCAB, "batch": BATCH,
                      "steps": STEPS},
            "calls_per_round": CALLS, "rounds": ROUNDS,
            "machine": {"cpu": cpu_name(), "cores": os.cpu_count(),
                        "load_before": load_before, "load_after": list(os.getloadavg())},
            "rows": rows, "ratios": ratios}


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.kernels",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="write the JSON here")
    args = parser.parse_args(argv)
    result = run()
    write_result(result, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
