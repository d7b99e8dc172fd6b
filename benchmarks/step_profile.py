"""Where a training step's time goes, per model (issue 18: "what limits each model").

    python -m benchmarks.step_profile [--models lstm,tcnlm] --out benchmarks/results/medium/step_profile.json
    python -m benchmarks.step_profile --mode quick --models lstm     # a smoke run
    python -m benchmarks.step_profile --models lstm --precision mixed_bfloat16

Each model is built by `tfktopic.runs` from the same ``tfktopic train`` command as the
precision benchmark (`benchmarks.precision.command`: the study's medium presets on APNEWS,
float32 unless ``--precision`` says otherwise), and four compiled functions are timed on the same fixed batches, interleaved
over rounds (the fastest round counts):

* ``forward`` -- ``model.objective(batch, training=True)`` (the loss and its terms);
* ``forward_backward`` -- the same under a `tf.GradientTape`, and the gradients of every
  trainable weight;
* ``step`` -- Keras' compiled train function (`benchmarks.common.time_train_steps`): the
  above plus the optimizer update and the model's ``after_optimizer_step`` (rGBN's
  TLASGR-MCMC step);
* ``softmax_matmuls`` -- the three products of the output softmax alone, forward
  [real tokens, H] x [H, V] and its two gradient products, at the model's real-token count
  and softmax width, in the step's compute dtype: the floor no implementation of the same
  model can go below.

The record splits a step into forward, backward (forward_backward - forward) and optimizer
and after-step work (step - forward_backward), each as a fraction of the step, and gives
the softmax products' share of it.
"""

import argparse
import sys
import time

import numpy as np

from benchmarks.common import time_train_steps, write_result
from benchmarks.precision import MODES, add_models_argument, build_entry, parse_models

#: Timed calls per round and rounds.
STEPS, ROUNDS = 10, 3


def _log(message):
    print(f"[step profile] {message}", file=sys.stderr, flush=True)


def _seconds(function, batches):
    """Mean seconds per call of `function` over `batches` (after one untimed call)."""
    float(np.asarray(function(batches[0])))
    start = time.perf_counter()
    for batch in batches:
        result = function(batch)
    float(np.asarray(result))
    return (time.perf_counter() - start) / len(batches)


def functions(model):
    """The compiled forward and forward+backward functions of a built model."""
    import tensorflow as tf

    @tf.function
    def forward(batch):
        return model.objective(batch, training=True)["loss"]

    @tf.function
    def forward_backward(batch):
        with tf.GradientTape() as tape:
            loss = model.objective(batch, training=True)["loss"]
        gradients = tape.gradient(loss, model.trainable_weights)
        return loss + tf.add_n([tf.reduce_sum(g) for g in gradients if g is not None]) * 0.0

    return forward, forward_backward


def softmax_function(rows, width, vocab, dtype="float32"):
    """The output softmax's three products at a step's size, compiled, in `dtype`."""
    import tensorflow as tf

    features = tf.cast(tf.random.normal((rows, width)), dtype)
    kernel = tf.cast(tf.random.normal((width, vocab)), dtype)
    upstream = tf.cast(tf.random.normal((rows, vocab)), dtype)

    @tf.function
    def products(_):
        logits = tf.matmul(features, kernel)                           # forward
        d_features = tf.matmul(upstream, kernel, transpose_b=True)     # to the features
        d_kernel = tf.matmul(features, upstream, transpose_a=True)     # to the weights
        return tf.cast(tf.reduce_sum(logits[:1]) + tf.reduce_sum(d_features[:1])
                       + tf.reduce_sum(d_kernel[:1]), "float32")

    return products


def profile(name, mode, data_cache, precision="float32"):
    model, dataset, tokens, _settings, vocab = build_entry(name, mode, precision, data_cache)
    batches = [batch for batch in dataset.take(STEPS)]
    forward, forward_backward = functions(model)
    width = sum(model.hidden_sizes) if hasattr(model, "hidden_sizes") else model.hidden_dim
    if name == "lda_lstm":
        width += model.num_topics     # theta is concatenated to the softmax input
    softmax = softmax_function(int(round(tokens)), int(width), vocab,
                               "float32" if precision == "float32" else "bfloat16"
                               if "bfloat16" in precision else "float16")
    times = {key: [] for key in ("forward", "forward_backward", "step", "softmax_matmuls")}
    for _ in range(ROUNDS):
        times["forward"].append(_seconds(forward, batches))
        times["forward_backward"].append(_seconds(forward_backward, batches))
        times["step"].append(time_train_steps(model, dataset, STEPS, warmup=2))
        times["softmax_matmuls"].append(_seconds(softmax, batches))
    best = {key: min(values) for key, values in times.items()}
    step = best["step"]
    parts = {"forward": best["forward"],
             "backward": best["forward_backward"] - best["forward"],
             "optimizer_and_after_step": step - best["forward_backward"]}
    _log(f"{name} ({precision}): step {1e3 * step:.0f} ms: " + ", ".join(
        f"{k} {v / step:.2f}" for k, v in parts.items())
         + f"; softmax products {best['softmax_matmuls'] / step:.2f}")
    return {"model": name, "precision": precision, "seconds": best, "rounds": times,
            "fractions_of_step": {k: v / step for k, v in parts.items()},
            "softmax_matmuls_fraction": best["softmax_matmuls"] / step,
            "real_tokens_per_step": tokens, "softmax_width": int(width), "vocab": vocab}


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.step_profile",
                                     description=__doc__.split("\n\n")[0])
    add_models_argument(parser)
    parser.add_argument("--mode", choices=sorted(MODES), default="medium",
                        help="quick: 200 documents, small presets (a smoke run)")
    parser.add_argument("--precision", choices=("float32", "mixed_bfloat16", "mixed_float16"),
                        default="float32", help="the Keras dtype policy of the models")
    parser.add_argument("--out", help="write the JSON here")
    args = parser.parse_args(argv)
    models = parse_models(parser, args.models)
    data_cache = {}
    result = {"protocol": __doc__.split("\n\n", 2)[2].strip(), "steps": STEPS,
              "rounds": ROUNDS, "mode": args.mode,
              "precision": args.precision,
              "models": [profile(name, args.mode, data_cache, args.precision)
                         for name in models]}
    write_result(result, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
