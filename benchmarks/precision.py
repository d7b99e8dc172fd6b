"""Issue 18's speed measurements: float32 against mixed_bfloat16, the matmul roofline, the model
FLOP utilisation and the batch size (benchmarks, never timed tests).

    python -m benchmarks.precision --mode medium --out benchmarks/results/medium/precision.json
    python -m benchmarks.precision --mode quick            # a smoke run, about 2 minutes

What one run measures, all in one process:

* **Roofline.** The float32 and bfloat16 GFLOP/s of the largest matmul of each model's step:
  the output projection [real tokens of a step, H] x [H, V] (`matmul_gflops`). It is measured at the start
  and again at the end, so that a change in load during the run shows.
* **Precision.** The training tokens/s of each model under ``float32`` and ``mixed_bfloat16``.
  Each model is built by `tfktopic.runs` from the same resolved ``tfktopic train`` command,
  with ``--precision`` added, and timed in interleaved rounds (`benchmarks.common.time_train_steps`,
  the fastest round is kept). The record is the ratio bf16 / f32 (issue 18's target: >= 1.5).
* **FLOP utilisation.** The useful FLOP/s of a step divided by the roofline of its precision.
  Useful FLOP/s are 3 x 2 x the multiply-adds per real token x real tokens/s: forward plus a
  backward of about twice its cost, counting only the LSTM stack and the output softmax.
  (`core_multiply_adds`). Each topic model's extra work (encoder, topic bias, mixture) is not
  counted, so its fraction is a lower bound. Issue 18's target for the LSTM LM is >= 0.5.
  Two LSTM LMs are measured: ``lstm`` trains on sentence windows of 30 positions, of which
  about a third are padding that its recurrence runs over and its useful FLOPs leave out;
  ``doc_lstm`` on streamed documents, every position a real token.
* **Batch size.** The LSTM LM's float32 tokens/s at batch sizes 64, 128 and 256 (throughput
  only; whether a larger batch keeps the perplexity needs training runs:
  ``python -m benchmarks.precision_quality --batch-sizes 64,256``).

The machine is shared with the comparison study unless the study is paused: record the load
(the JSON has the load average before and after).
"""

import argparse
import os
import platform
import sys
import time

import numpy as np

from benchmarks.common import (cpu_name, portable, record, shared_file, time_train_steps,
                               write_result)

#: The entries, each a `tfktopic train` model (with the study's medium data rules).
MODELS = ("lstm", "doc_lstm", "lda_lstm", "topicrnn", "doc_topicrnn", "tcnlm", "rgbn_rnn",
          "gbn_rnn")
PRECISIONS = ("float32", "mixed_bfloat16")
BATCH_SIZES = (64, 128, 256)
MODES = {
    # quick: 200 APNEWS documents, tiny sizes, few steps (checks the pipeline end to end)
    "quick": {"max_documents": 200, "steps": 4, "rounds": 2, "preset": "small",
              "sets": ["min_doc_freq=2"], "batch_sizes": (32, 64)},
    # medium: all 2,000 documents, the study's medium presets and data rules
    "medium": {"max_documents": None, "steps": 20, "rounds": 3, "preset": "medium",
               "sets": ["min_doc_freq=5", "max_freq_fraction=0.001"],
               "batch_sizes": BATCH_SIZES},
}


def _log(message):
    print(f"[precision] {message}", file=sys.stderr, flush=True)


def command(name, mode, precision="float32", batch_size=None):
    """The ``tfktopic train`` arguments of an entry (as the study writes them)."""
    cfg = MODES[mode]
    argv = ["train", name, "--corpus", str(shared_file("apnews/apnews.txt")), "--format", "tdlm",
            "--preset", cfg["preset"], "--stopwords",
            str(shared_file("stopwords/mallet_en.txt")), "--precision", precision]
    for item in cfg["sets"]:
        argv += ["--set", item]
    if batch_size is not None:
        argv += ["--batch-size", str(batch_size)]
    return argv


def matmul_gflops(rows, inner, cols, dtype, seconds=2.0):
    """Sustained GFLOP/s of a [rows, inner] x [inner, cols] matmul in `dtype`.

    The matmul runs 10 times per call of a `tf.function` (a graph while loop, so that the
    graph optimiser cannot merge the identical products into one; each product is reduced
    in full, so that none is pruned), repeated for at least `seconds` after a warm-up call.
    """
    import tensorflow as tf

    a = tf.random.normal((rows, inner), dtype="float32")
    b = tf.random.normal((inner, cols), dtype="float32")
    a, b = tf.cast(a, dtype), tf.cast(b, dtype)

    @tf.function
    def ten(x, y):
        total = tf.zeros((), "float32")
        for _ in tf.range(10):
            total += tf.cast(tf.reduce_sum(tf.matmul(x, y)), "float32")
        return total

    float(ten(a, b))
    calls, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds or calls < 3:
        float(ten(a, b))
        calls += 1
    elapsed = time.perf_counter() - start
    return 2.0 * rows * inner * cols * 10 * calls / elapsed / 1e9


def _lstm_multiply_adds(input_dim, hidden_sizes):
    """Multiply-adds per position of a stacked LSTM (4 gates, input and recurrent kernels)."""
    total, width = 0, int(input_dim)
    for h in hidden_sizes:
        total += 4 * int(h) * (width + int(h))
        width = int(h)
    return total


def core_multiply_adds(model, vocab_size):
    """Forward multiply-adds per real token of a model's LSTM stack and output softmax.

    The padding positions the LSTM also runs over and each model's topic parts are left
    out, so FLOP/s computed from this are *useful* FLOP/s (a lower bound of the executed).
    """
    if hasattr(model, "hidden_sizes"):                              # rGBN-RNN / GBN-RNN
        hidden = [int(h) for h in model.hidden_sizes]
        return _lstm_multiply_adds(model.embedding_dim, hidden) + sum(hidden) * vocab_size
    hidden = [int(model.hidden_dim)] * int(getattr(model, "num_layers", 1))
    return _lstm_multiply_adds(model.embedding_dim, hidden) + hidden[-1] * vocab_size


def build_entry(name, mode, precision, data_cache, batch_size=None):
    """(model, dataset, real tokens per step, settings) of one entry under `precision`."""
    from tfktopic import cli, runs

    _, settings = cli.train_settings(command(name, mode, precision, batch_size))
    key = name                      # the data do not depend on the batch size
    if key not in data_cache:
        _log(f"data for {name} ({mode})")
        data_cache[key] = runs.prepare_data(
            settings, str(shared_file("apnews/apnews.txt")), format="tdlm",
            max_documents=MODES[mode]["max_documents"], seed=0, subset_seed=0)
    data = data_cache[key]
    model = runs.build_model(settings, data, seed=0)
    batch = int(settings["training"]["batch_size"])
    dataset = data.dataset("train", batch, shuffle=False, drop_remainder=True)
    steps = MODES[mode]["steps"]
    tokens = float(np.mean([np.sum(b["mask"]) for b in dataset.take(steps)]))
    return model, dataset, tokens, settings, len(data.lm_vocab)


def _interleaved(entries, steps, rounds):
    """Fastest seconds per step of each entry over interleaved rounds, and every round."""
    times = {key: [] for key in entries}
    for _ in range(rounds):
        for key, (model, dataset) in entries.items():
            times[key].append(time_train_steps(model, dataset, steps, warmup=2))
    return {key: min(values) for key, values in times.items()}, times


def _roofline(rows, inner, cols):
    return {"shape": [rows, inner, cols],
            "float32_gflops": matmul_gflops(rows, inner, cols, "float32"),
            "bfloat16_gflops": matmul_gflops(rows, inner, cols, "bfloat16")}


def run(mode, models):
    cfg = MODES[mode]
    steps, rounds = cfg["steps"], cfg["rounds"]
    load_before = os.getloadavg()
    data_cache, records, rooflines = {}, [], []
    for name in models:
        built = {p: build_entry(name, mode, p, data_cache) for p in PRECISIONS}
        model, dataset, tokens, settings, vocab = built["float32"]
        # The output softmax of a step: [real tokens, softmax input width] x [width, V].
        width = (sum(model.hidden_sizes) if hasattr(model, "hidden_sizes") else model.hidden_dim)
        rows = int(round(tokens))
        roof = _roofline(rows, int(width), vocab)
        rooflines.append({"model": name, "when": "before", **roof})
        best, every = _interleaved({p: built[p][:2] for p in PRECISIONS}, steps, rounds)
        roof_after = _roofline(rows, int(width), vocab)
        rooflines.append({"model": name, "when": "after", **roof_after})
        rate = {p: built[p][2] / best[p] for p in PRECISIONS}
        flops = 6.0 * core_multiply_adds(model, vocab)
        config = {"command": portable(command(name, mode)), "steps": steps, "rounds": rounds,
                  "seconds_per_step": best, "rounds_seconds": every,
                  "tokens_per_step": tokens, "useful_flops_per_token": flops,
                  "compute_dtypes": {p: built[p][0].compute_dtype for p in PRECISIONS},
                  "timing": "fastest of interleaved rounds of benchmarks.common.time_train_steps"}
        _log(f"{name}: float32 {rate['float32']:.0f}, bf16 {rate['mixed_bfloat16']:.0f} tokens/s")
        records.append(record("precision", name, "tokens_per_s", rate["mixed_bfloat16"],
                              f"{name} float32", rate["float32"],
                              protocol="training tokens/s, mixed_bfloat16 / float32 (target "
                                       ">= 1.5)", dataset="apnews", config=config))
        for p, key in (("float32", "float32_gflops"), ("mixed_bfloat16", "bfloat16_gflops")):
            peak = max(roof[key], roof_after[key])
            records.append(record(
                "precision", name, f"roofline_fraction_{p}", rate[p] * flops / 1e9 / peak,
                protocol="useful FLOP/s (LSTM + output softmax, 3 x forward) / the larger of the "
                         "two matmul roofline measurements of the same precision (target for "
                         "lstm, float32: >= 0.5)", dataset="apnews",
                config={"tokens_per_s": rate[p], "useful_gflops": rate[p] * flops / 1e9,
                        "roofline_gflops": peak}))
        for p in PRECISIONS:
            del built[p]
    if "lstm" in models:
        batch_rates = {}
        for size in cfg["batch_sizes"]:
            model, dataset, tokens, _s, _v = build_entry("lstm", mode, "float32", data_cache, size)
            best, _ = _interleaved({size: (model, dataset)}, steps, rounds)
            batch_rates[size] = tokens / best[size]
            _log(f"lstm float32 batch {size}: {batch_rates[size]:.0f} tokens/s")
        base = cfg["batch_sizes"][0]
        for size, value in batch_rates.items():
            records.append(record("precision", "lstm", f"tokens_per_s_batch_{size}", value,
                                  f"lstm batch {base}", batch_rates[base],
                                  protocol="float32 training tokens/s by batch size "
                                           "(throughput; the perplexity: "
                                           "benchmarks.precision_quality --batch-sizes)",
                                  dataset="apnews", config={"batch_size": size}))
    return {"mode": mode, "machine": {"cpu": cpu_name(), "cores": os.cpu_count(),
                                      "load_before": load_before,
                                      "load_after": os.getloadavg(),
                                      "python": platform.python_version(),
                                      "tensorflow": _version("tensorflow"),
                                      "keras": _version("keras")},
            "rooflines": rooflines, "records": records}


def _version(module):
    from importlib.metadata import version

    return version(module)


def add_models_argument(parser):
    """The ``--models`` option of the benchmarks over `MODELS` (precision, step_profile,
    precision_quality)."""
    parser.add_argument("--models", default=",".join(MODELS),
                        help="comma-separated subset of: " + ", ".join(MODELS))


def parse_models(parser, value):
    """The model list of a ``--models`` value; unknown names are a parser error."""
    models = [m for m in value.split(",") if m]
    unknown = sorted(set(models) - set(MODELS))
    if unknown:
        parser.error(f"--models: unknown {unknown}; expected some of {', '.join(MODELS)}")
    return models


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.precision",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=sorted(MODES), default="medium")
    add_models_argument(parser)
    parser.add_argument("--out", help="write the JSON here")
    args = parser.parse_args(argv)
    result = run(args.mode, parse_models(parser, args.models))
    write_result(result, args.out)


if __name__ == "__main__":
    main()
