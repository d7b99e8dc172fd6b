"""SG-MCMC benchmarks (issue 5): optimizer step time and PTB quality with averaging.

Speed (``python -m benchmarks.speed --models psgld_lstm,sgld_lstm``):
    seconds per training step of the same 2-layer LSTM LM under pSGLD vs
    RMSprop (and SGLD vs SGD), and the test-time cost of averaging S samples.
Quality (``python -m benchmarks.quality --models psgld_lstm``):
    PTB, 2-layer LSTM, the same epoch budget: pSGLD with thinned sample
    averaging vs a single RMSprop model (Gan et al. Table 7), and the
    perplexity-vs-number-of-samples curves of thinned / forward / backward
    collection (Fig. 2), written as JSON and PNG next to the output.
"""

import json
import pathlib
import shutil
import time

import keras
import numpy as np

from benchmarks.common import MissingData, peak_memory_mb, record, shared_file, time_train_steps

RESULTS = pathlib.Path(__file__).resolve().parent / "results"


def _lstm(vocab_size, hidden, layers=2, dropout=0.0, seed=0):
    from tfktopic.models import LSTMLanguageModel

    keras.utils.set_random_seed(seed)
    return LSTMLanguageModel(vocab_size, embedding_dim=hidden, hidden_dim=hidden,
                             num_layers=layers, dropout=dropout)


def _random_windows(vocab_size, batch_size, steps, num_batches=8, seed=0):
    from tfktopic.bayes.setups import window_dataset

    rng = np.random.default_rng(seed)
    ids = rng.integers(4, vocab_size, size=(num_batches, batch_size, steps + 1)).astype(np.int32)
    return window_dataset(ids[..., :-1], ids[..., 1:], batch_size, shuffle=False)


def speed_optimizers(mode):
    """Step time of pSGLD / RMSprop and SGLD / SGD on the PTB-small LSTM (medium = full).

    The machine may be shared, so the four optimizers are timed interleaved
    in one process: `rounds` rounds of `timed` steps each, and the reported
    ratio is the median of the per-round ratios (spread in the config).
    The RMSprop baseline is `keras.optimizers.RMSprop` (rho 0.99).
    """
    quick = mode == "quick"
    from tfktopic.bayes import PSGLD, SGLD

    vocab, hidden, batch, steps = 10_000, (64 if quick else 200), 20, 20
    data = _random_windows(vocab, batch, steps)
    timed, rounds = (5, 3) if quick else (8, 12)
    config = {"vocab_size": vocab, "hidden_dim": hidden, "num_layers": 2, "batch_size": batch,
              "num_steps": steps, "timed_steps_per_round": timed, "rounds": rounds}
    makers = {"rmsprop_lstm": lambda: keras.optimizers.RMSprop(1e-3, rho=0.99),
              "psgld_lstm": lambda: PSGLD(1e-3, num_examples=900_000, seed=0),
              "sgd_lstm": lambda: keras.optimizers.SGD(1.0),
              "sgld_lstm": lambda: SGLD(1.0, num_examples=900_000, seed=0)}
    models = {}
    for name, make in makers.items():
        model = _lstm(vocab, hidden)
        model.compile(optimizer=make())
        time_train_steps(model, data, steps=1)  # trace and warm up
        models[name] = model
    times = {name: [] for name in makers}
    for _ in range(rounds):
        for name, model in models.items():
            times[name].append(time_train_steps(model, data, steps=timed, warmup=1))

    def ratios(a, b):
        r = np.asarray(times[a]) / np.asarray(times[b])
        return {"median": float(np.median(r)), "min": float(r.min()), "max": float(r.max()),
                "per_round": r.tolist()}

    psgld, sgld = ratios("psgld_lstm", "rmsprop_lstm"), ratios("sgld_lstm", "sgd_lstm")
    medians = {name: float(np.median(t)) for name, t in times.items()}
    out = [record("speed", "psgld_lstm", "step_time", psgld["median"] * medians["rmsprop_lstm"],
                  "rmsprop_lstm", medians["rmsprop_lstm"],
                  protocol="train step; value = median per-round ratio x median RMSprop time",
                  dataset="random ids",
                  config={**config, "ratio": psgld, "median_step_s": medians}),
           record("speed", "sgld_lstm", "step_time", sgld["median"] * medians["sgd_lstm"],
                  "sgd_lstm", medians["sgd_lstm"],
                  protocol="train step; value = median per-round ratio x median SGD time",
                  dataset="random ids",
                  config={**config, "ratio": sgld, "median_step_s": medians})]
    out.append(_averaging_cost(vocab, hidden, quick))
    return out


def step_breakdown(mode):
    """Where pSGLD's extra step time goes: one setting of `PSGLD` switched off at a time.

    The same model and batches as `speed_optimizers`; every variant's step time is divided
    by RMSprop's of the same round (interleaved rounds, median of the per-round ratios):

    * ``as_rmsprop``: T = 0, no prior, V_0 = 0, epsilon inside the root -- the optimizer is
      Keras' RMSprop written as our update (the cost of the update's structure);
    * ``no_noise``: T = 0 with the defaults (prior, ``v_init="first_gradient"``): the prior
      term and the first-step initialisation of V, unfused (T = 0 runs unfused);
    * ``no_noise_no_prior`` / ``no_noise_v_zeros``: one of those two removed;
    * ``default``: T = 1, the fused XLA update and the noise draw from 16-bit uniforms,
      two per Philox word (what users run);
    * ``default_unfused``: the same with ``fused_update=False``;
    * ``noise_bits_23``: the default with 23-bit uniforms, one per Philox word (twice the
      Philox bits; the default before 2026-11-24, see
      `tfktopic.bayes.counter_random.stateless_standard_normal`).
    """
    quick = mode == "quick"
    from tfktopic.bayes import PSGLD

    vocab, hidden, batch, steps = 10_000, (64 if quick else 200), 20, 20
    data = _random_windows(vocab, batch, steps)
    timed, rounds = (3, 2) if quick else (8, 8)
    base = dict(num_examples=900_000, seed=0)
    makers = {
        "rmsprop": lambda: keras.optimizers.RMSprop(1e-3, rho=0.99),
        "as_rmsprop": lambda: PSGLD(1e-3, temperature=0.0, prior_precision=0.0, v_init="zeros",
                                    epsilon_placement="inside", epsilon=1e-7, **base),
        "no_noise": lambda: PSGLD(1e-3, temperature=0.0, **base),
        "no_noise_no_prior": lambda: PSGLD(1e-3, temperature=0.0, prior_precision=0.0, **base),
        "no_noise_v_zeros": lambda: PSGLD(1e-3, temperature=0.0, v_init="zeros", **base),
        "default": lambda: PSGLD(1e-3, **base),
        "default_unfused": lambda: PSGLD(1e-3, fused_update=False, **base),
        "noise_bits_23": lambda: PSGLD(1e-3, noise_bits=23, **base),
    }
    models = {}
    for name, make in makers.items():
        model = _lstm(vocab, hidden)
        model.compile(optimizer=make())
        time_train_steps(model, data, steps=1)
        models[name] = model
    times = {name: [] for name in makers}
    for _ in range(rounds):
        for name, model in models.items():
            times[name].append(time_train_steps(model, data, steps=timed, warmup=1))
    rms = np.asarray(times["rmsprop"])
    ratios = {name: float(np.median(np.asarray(t) / rms)) for name, t in times.items()}
    config = {"vocab_size": vocab, "hidden_dim": hidden, "num_layers": 2, "batch_size": batch,
              "num_steps": steps, "timed_steps_per_round": timed, "rounds": rounds,
              "median_step_s": {name: float(np.median(t)) for name, t in times.items()},
              "per_round_s": times}
    return [record("speed", f"psgld_{name}", "step_time_ratio", ratios[name], "rmsprop_lstm",
                   1.0, protocol="train step / RMSprop's in the same round (median)",
                   dataset="random ids", config=config)
            for name in makers if name != "rmsprop"]


def _averaging_cost(vocab, hidden, quick):
    """Test-time cost of averaging S samples vs evaluating one model."""
    from tfktopic.bayes import SampleCollector

    samples = 5 if quick else 20
    test = _random_windows(vocab, 20, 20, num_batches=20 if quick else 100, seed=1)
    model = _lstm(vocab, hidden)
    model.compile(optimizer="sgd")
    collector = SampleCollector(test)
    collector.set_model(model)
    collector.collect(0)  # trace once
    start = time.perf_counter()
    for s in range(samples):
        collector.collect(s + 1)
    predict_time = (time.perf_counter() - start) / samples
    stored = collector.samples()
    start = time.perf_counter()
    stored.perplexity()
    combine_time = time.perf_counter() - start
    tokens = 20 * 20 * (20 if quick else 100)
    return record("speed", "psgld_lstm", "averaging_time", samples * predict_time + combine_time,
                  "rmsprop_lstm", predict_time, protocol=f"evaluate {tokens} tokens",
                  dataset="random ids",
                  config={"num_samples": samples + 1, "per_sample_eval_s": predict_time,
                          "combine_s": combine_time, "hidden_dim": hidden})


def averaging_scaling(mode):
    """Cost of the predictive average against the number of samples S (issue 15).

    Two parts: collecting a sample is one deterministic pass over the
    evaluation data (timed for every collected sample: it must not grow with
    the samples already stored), and combining S stored samples into the
    averaged perplexity (log-sum-exp over the S per-token log-probabilities,
    from ``.npy`` files) on PTB-test-sized predictions (82,430 tokens).
    Linear means: the per-sample collection time is flat, and the combine
    time per sample is flat in S.
    """
    import tempfile

    from tfktopic.bayes import PredictiveSamples, SampleCollector

    quick = mode == "quick"
    sizes = [1, 2, 4, 8, 16] if quick else [1, 2, 4, 8, 16, 32, 64]
    tokens = 82_430
    rng = np.random.default_rng(0)
    combine = {}
    with tempfile.TemporaryDirectory() as tmp:
        directory = pathlib.Path(tmp)
        stored = []
        for k in range(max(sizes)):
            log_probs = np.log(rng.uniform(1e-4, 1.0, tokens)).astype(np.float32)
            np.save(directory / f"test_sample_{k:05d}.npy", log_probs)
            stored.append(f"test_sample_{k:05d}.npy")
        (directory / "samples.json").write_text(json.dumps(
            {"kind": "lm", "steps": list(range(len(stored))), "files": {"test": stored},
             "labels": {}}))
        samples = PredictiveSamples.load(directory, "test")
        for size in sizes:
            best = min(_timed(lambda: samples.perplexity(num_samples=size, scheme="forward"))
                       for _ in range(3))
            combine[size] = best
    vocab, hidden = 10_000, (32 if quick else 200)
    test = _random_windows(vocab, 20, 20, num_batches=10 if quick else 40, seed=1)
    model = _lstm(vocab, hidden)
    model.compile(optimizer="sgd")
    collector = SampleCollector(test)
    collector.set_model(model)
    collector.collect(0)  # trace once
    collect_times = [_timed(lambda s=s: collector.collect(s + 1)) for s in range(max(sizes[:5]))]
    per_sample = {str(s): combine[s] / s for s in sizes}
    slope, intercept = np.polyfit(sizes, [combine[s] for s in sizes], 1)
    config = {"tokens": tokens, "combine_seconds": {str(k): v for k, v in combine.items()},
              "combine_seconds_per_sample": per_sample, "linear_fit_slope_s": float(slope),
              "linear_fit_intercept_s": float(intercept),
              "collect_seconds_each": collect_times,
              "collect_tokens": 20 * 20 * (10 if quick else 40), "hidden_dim": hidden}
    # S = 1 skips the log-sum-exp; compare per-sample costs from S = 8 on.
    return [record("speed", "psgld_averaging", "combine_seconds_per_sample",
                   per_sample[str(max(sizes))], "psgld_averaging_8_samples", per_sample["8"],
                   protocol=f"combine S={max(sizes)} vs S=8 stored samples, seconds per "
                            "sample (ratio 1.0 = linear)",
                   dataset="random log-probs, PTB-test size", config=config)]


def _timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def quality_ptb(mode):
    """PTB: pSGLD + thinned averaging vs a single RMSprop model, same budget (medium = full)."""
    quick = mode == "quick"
    from tfktopic.bayes import SampleCollector
    from tfktopic.bayes.setups import optimizer, ptb_data
    from tfktopic.data import Vocabulary, read_ptb
    from tfktopic.evaluation import evaluate_perplexity

    try:
        ptb_dir = shared_file("ptb/ptb.train.txt").parent
    except MissingData:
        raise
    vocab = Vocabulary.build(read_ptb(ptb_dir / "ptb.train.txt"), min_count=1)
    hidden = 64 if quick else 200
    epochs = 2 if quick else 3
    batch = 64
    lr = 3e-3
    data = ptb_data(ptb_dir, vocab, num_steps=20, batch_size=batch,
                    limit_tokens=120_000 if quick else None)
    steps_per_epoch = sum(1 for _ in data["train"])
    config = {"hidden_dim": hidden, "num_layers": 2, "num_steps": 20, "batch_size": batch,
              "epochs": epochs, "learning_rate": lr, "dropout": 0.0,
              "train_tokens": data["num_train_tokens"], "steps_per_epoch": steps_per_epoch,
              "rmsprop": "pSGLD preconditioner at T=0 (rho 0.99, eps outside sqrt)"}
    protocol = "independent 20-token windows from a zero state (Theano 'random' setup)"

    start = time.perf_counter()
    rms = _lstm(len(vocab), hidden)
    rms.compile(optimizer=optimizer("rmsprop", lr, clipnorm=5.0))
    rms.fit(data["train"], epochs=epochs, verbose=2)
    rms_ppl = evaluate_perplexity(rms, data["test"]).perplexity
    rms_time = time.perf_counter() - start

    start = time.perf_counter()
    burn_in = epochs - 1
    thin = max(1, steps_per_epoch // 8)
    directory = RESULTS / ("ptb_samples_quick" if quick else "ptb_samples")
    # The samples of an earlier run of this benchmark belong to another sampler: start afresh.
    shutil.rmtree(directory, ignore_errors=True)
    collector = SampleCollector({"test": data["test"]}, burn_in_epochs=burn_in, thin=thin,
                                directory=directory)
    sampler = _lstm(len(vocab), hidden)
    sampler.compile(optimizer=optimizer("psgld", lr, num_examples=data["num_train_tokens"],
                                        clipnorm=5.0, seed=0))
    sampler.fit(data["train"], epochs=epochs, verbose=2, callbacks=[collector])
    psgld_time = time.perf_counter() - start
    samples = collector.samples("test")
    averaged = samples.perplexity()
    last = float(samples.sample_perplexities()[-1])
    curves = {scheme: samples.curve(scheme) for scheme in ("thinned", "forward", "backward")}
    _save_curves(curves, quick, {"rmsprop": rms_ppl, "last_sample": last})
    config = {**config, "num_samples": len(samples), "burn_in_epochs": burn_in,
              "thin_steps": thin, "rmsprop_seconds": rms_time, "psgld_seconds": psgld_time,
              "peak_memory_mb": peak_memory_mb()}
    return [
        record("quality", "psgld_lstm", "perplexity", averaged, "rmsprop_lstm", rms_ppl,
               protocol=protocol + f"; average of all {len(samples)} thinned samples",
               dataset="PTB test", config=config),
        record("quality", "psgld_lstm_last_sample", "perplexity", last, "rmsprop_lstm", rms_ppl,
               protocol=protocol + "; the last sample alone", dataset="PTB test", config=config),
    ]


def _save_curves(curves, quick, references):
    RESULTS.mkdir(parents=True, exist_ok=True)
    stem = RESULTS / ("ptb_sample_curve_quick" if quick else "ptb_sample_curve")
    stem.with_suffix(".json").write_text(json.dumps({"curves": curves,
                                                     "references": references}, indent=1))
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: curve written as JSON only "
              "(pip install 'tfktopic[bench]')")
        return
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for scheme, points in curves.items():
        ax.plot([s for s, _ in points], [v for _, v in points], label=scheme)
    ax.axhline(references["rmsprop"], color="grey", linestyle="--", label="RMSprop (single)")
    ax.set_xlabel("number of samples")
    ax.set_ylabel("test perplexity")
    ax.set_title("PTB pSGLD: sample averaging (Gan et al. Fig. 2)", fontsize=10)
    ax.legend()
    fig.tight_layout()
    fig.savefig(stem.with_suffix(".png"), dpi=120)
    plt.close(fig)


SPEED = {"psgld_lstm": speed_optimizers, "psgld_averaging": averaging_scaling,
         "psgld_breakdown": step_breakdown}
QUALITY = {"psgld_lstm": quality_ptb}
