"""What tf.data's autotuning costs our training and evaluation (issue 18).

    python -m benchmarks.input_pipeline --out benchmarks/results/medium/input_pipeline.json

The package's pipelines end in `tfktopic.data.pipeline.prefetched`: a fixed prefetch buffer
and ``options.autotune.enabled = False``. This measures, in one process and interleaved
rounds, the same pipelines with TensorFlow's default (autotuning on, re-enabled by
``with_options``) against ours, for three arms of the APNEWS study built exactly as
``python -m studies.study`` builds them (`studies.study.protocol.command`, `tfktopic.runs`):

* ``doc_lstm``: the streamed document LSTM (an endless ``from_generator`` stream);
* ``lstm``: the sentence-window LSTM LM (`tfktopic.runs.checkpoints.epoch_data`'s repeated
  pipeline of in-memory tensors);
* ``topicrnn``: sentence windows with their topic contexts (the heaviest per-batch map: a
  bag of words by ``tf.math.bincount``).

Per round and setting: ``model.fit`` over `--steps` training steps of the run's training
stream (wall time from the call to its return; the median interval between batches 1..S-1,
i.e. the steady step; the time from the last batch to the return, i.e. the iterator's
teardown) and one ``model.evaluate`` pass over the validation split (wall time: the pass and
its teardown). Threads: ``TF_NUM_INTRAOP_THREADS`` / ``TF_NUM_INTEROP_THREADS`` as set by
``--threads`` before TensorFlow starts (2 by default: the cores of this machine, as a user
runs ``tfktopic train``). Read the milliseconds on an idle machine.
"""

import argparse
import os
import pathlib
import statistics
import sys
import tempfile
import time

from benchmarks.common import cpu_name, portable, record, write_result

ARMS = ("doc_lstm", "lstm", "topicrnn")
SETTINGS = ("autotune", "fixed")


def _setting(dataset, setting):
    """The package's pipeline (``fixed``) or the same with tf.data's autotuning on."""
    import tensorflow as tf

    if setting == "fixed":
        return dataset
    options = tf.data.Options()
    options.autotune.enabled = True
    return dataset.with_options(options)


def build(arm, quick=False):
    """(model, training stream, validation dataset, steps of an epoch) of a study arm."""
    from studies.study import protocol as study
    from tfktopic import runs
    from tfktopic.cli import train_settings
    from tfktopic.runs import checkpoints

    out = pathlib.Path(tempfile.gettempdir()) / "input_pipeline_unused"
    argv = study.command("apnews", arm, "lr4e-3_do0.5", 0, out)[3:]
    if quick:
        argv += ["--max-documents", "300", "--batch-size", "8", "--set", "hidden_dim=16",
                 "--set", "embedding_dim=16"]
    args, settings = train_settings(argv)
    data = runs.prepare_data(settings, args.corpus, args.format, args.max_documents,
                             args.split_seed)
    batch = int(settings["training"]["batch_size"])
    model = runs.build_model(settings, data, 0)
    if data.preprocessor.kind == "streams":
        train = data.dataset("train", batch, seed=0)
        steps = data.steps("train", batch)
    else:
        train, steps = checkpoints.epoch_data(data.dataset("train", batch, shuffle=True), 0)
    return model, train, data.dataset("valid", batch, shuffle=False), steps


def _fit(model, train, steps):
    import keras

    class Stamps(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            self.batches = [time.perf_counter()]

        def on_train_batch_end(self, batch, logs=None):
            self.batches.append(time.perf_counter())

    stamps = Stamps()
    start = time.perf_counter()
    model.fit(train, steps_per_epoch=steps, epochs=1, verbose=0, callbacks=[stamps])
    end = time.perf_counter()
    gaps = [b - a for a, b in zip(stamps.batches[1:-1], stamps.batches[2:])]
    return {"fit_seconds": end - start, "fit_ms_per_step": 1e3 * (end - start) / steps,
            "steady_ms_per_step": 1e3 * statistics.median(gaps),
            "teardown_seconds": end - stamps.batches[-1]}


def _evaluate(model, valid):
    start = time.perf_counter()
    model.evaluate(valid, verbose=0)
    return {"evaluate_seconds": time.perf_counter() - start}


def run(arms=ARMS, steps=200, rounds=3, quick=False):
    """Rounds of (arm, setting) measurements; see the module docstring."""
    import tensorflow as tf

    load_before = list(os.getloadavg())
    cases, epoch_steps = {}, {}
    for arm in arms:
        model, train, valid, epoch_steps[arm] = build(arm, quick)
        _fit(model, train, min(steps, 5))       # traces the step and the evaluation
        _evaluate(model, valid.take(2))
        cases[arm] = (model, train, valid)
    rows = []
    for r in range(rounds):
        for arm, (model, train, valid) in cases.items():
            for setting in SETTINGS:
                row = {"round": r, "arm": arm, "setting": setting, "steps": steps}
                row.update(_fit(model, _setting(train, setting), steps))
                row.update(_evaluate(model, _setting(valid, setting)))
                rows.append(row)
                print(f"[input_pipeline] {arm} {setting} round {r}: " + ", ".join(
                    f"{k} {v:.2f}" for k, v in row.items() if isinstance(v, float)),
                    file=sys.stderr, flush=True)
    summary = {}
    keys = ("fit_ms_per_step", "steady_ms_per_step", "teardown_seconds", "evaluate_seconds")
    for arm in cases:
        mine = {s: [row for row in rows if row["arm"] == arm and row["setting"] == s]
                for s in SETTINGS}
        # The stall depends on where a pass ends against the thread's sleeps, so it hits
        # some calls and not others: the mean is the expected cost, the median the usual one.
        mean = {s: {k: statistics.fmean(row[k] for row in mine[s]) for k in keys}
                for s in SETTINGS}
        med = {s: {k: statistics.median(row[k] for row in mine[s]) for k in keys}
               for s in SETTINGS}
        summary[arm] = {"mean": mean, "median": med,
                        # fit calls that took over 1 s more than their steps at the steady step
                        "stalled_fits": {s: sum(row["fit_seconds"] - row["steps"] * 1e-3
                                                * row["steady_ms_per_step"] > 1.0
                                                for row in mine[s]) for s in SETTINGS},
                        "fit_speedup": mean["autotune"]["fit_ms_per_step"]
                        / mean["fixed"]["fit_ms_per_step"],
                        "steady_step_speedup": med["autotune"]["steady_ms_per_step"]
                        / med["fixed"]["steady_ms_per_step"],
                        "evaluate_speedup": mean["autotune"]["evaluate_seconds"]
                        / mean["fixed"]["evaluate_seconds"],
                        "steps_per_epoch": epoch_steps[arm]}
    return portable({
        "records": records(summary, steps, rounds),
        "benchmark": "input_pipeline", "steps": steps, "rounds": rounds, "quick": quick,
        # as set before TensorFlow started (the threading API reports 0 for "from the
        # environment")
        "threads": {name: os.environ.get(name) for name in
                    ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS")},
        "machine": {"cpu": cpu_name(), "cores": os.cpu_count(), "load_before": load_before,
                    "load_after": list(os.getloadavg())},
        "versions": {"tensorflow": tf.__version__},
        "rows": rows, "summary": summary})


def records(summary, steps, rounds):
    """docs/results/benchmarks.md's rows: per arm, the package's pipelines against the same with tf.data's
    autotuning on (means over the rounds; ratio = ours / autotuned, lower is faster)."""
    protocol = (f"`python -m benchmarks.input_pipeline`: APNEWS study arm (medium preset), "
                f"{steps} training steps of model.fit (call to return) and one evaluate pass "
                f"of the validation split, mean of {rounds} interleaved rounds; baseline = the "
                f"same pipeline with tf.data's autotuning on (TensorFlow's default)")
    out = []
    for arm, item in summary.items():
        mean = item["mean"]
        out.append(record("speed", arm, "fit_time_per_step",
                          mean["fixed"]["fit_ms_per_step"] / 1e3, f"{arm}, tf.data autotuning",
                          mean["autotune"]["fit_ms_per_step"] / 1e3, protocol, "apnews"))
        out.append(record("speed", arm, "validation_pass_time",
                          mean["fixed"]["evaluate_seconds"], f"{arm}, tf.data autotuning",
                          mean["autotune"]["evaluate_seconds"], protocol, "apnews"))
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.input_pipeline",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--arms", default=",".join(ARMS))
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--quick", action="store_true",
                        help="300 documents, batch 8, 16 units, 10 steps, 1 round (smoke)")
    parser.add_argument("--out", help="write the JSON here")
    args = parser.parse_args(argv)
    for name in ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS"):
        os.environ[name] = str(args.threads)
    steps, rounds = (10, 1) if args.quick else (args.steps, args.rounds)
    result = run(args.arms.split(","), steps, rounds, args.quick)
    write_result(result, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
