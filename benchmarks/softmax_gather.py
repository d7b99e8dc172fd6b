"""Training speed of the softmax at the predicted positions only, against the full softmax.

The objectives of the language models gather the real (mask > 0) positions of the
padded [B, T] sentence windows before the output layer
(`tfktopic.evaluation.perplexity.gather_real_positions`, issue 18). This script
times, in ONE process and interleaved rounds, a training step of each model with
today's objective against a copy of the objective before the change (the full
[B, T, V] softmax, masked afterwards) on the study's data (APNEWS, the study's data
rules, split seed 0, preset ``medium``), and reports the ratio of the medians:

    TF_NUM_INTEROP_THREADS=1 TF_NUM_INTRAOP_THREADS=1 \\
        python -m benchmarks.softmax_gather --models lstm,topicrnn,tcnlm \\
        --out benchmarks/results/medium/softmax_gather.json

Both models of a pair start from the same weights (seed 0) and train on the same
batches; the first batch's loss of the two objectives is checked equal first.
On a shared, loaded machine the absolute tokens/s are not comparable across runs:
read the ratios.
"""

import argparse
import json
import pathlib
import statistics
import sys
import time

import numpy as np
import tensorflow_probability as tfp
from keras import ops

from benchmarks.common import portable, record, shared_file, time_train_steps
from tfktopic import runs
from tfktopic.cli import train_settings
from tfktopic.evaluation.perplexity import masked_token_nll
from tfktopic.layers.topic_decoder import topic_diversity

MODELS = ("lstm", "topicrnn", "tcnlm", "lda_lstm")
#: The study's data rules (`studies.study.protocol.DATA_SETTINGS`) and split seed.
STUDY_SETS = ("min_doc_freq=5", "max_freq_fraction=0.001")
SPLIT_SEED = 0


def _log(message):
    print(f"[softmax_gather {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# -------------------------------------------------- the objectives before the change (copies)
def _lm_full(model, data, training=False):
    """`LSTMLanguageModel.objective` before the change: the softmax at every position."""
    logits = model(data, training=training)
    nll_sum, num_tokens = masked_token_nll(data["targets"], logits, data["mask"])
    return {"loss": nll_sum / ops.maximum(num_tokens, 1.0), "units": num_tokens,
            "nll_sum": nll_sum, "num_tokens": num_tokens}


def _topicrnn_full(model, data, training=False):
    """`TopicRNN.objective` (and `elbo_terms`) before the change (no KL warm-up)."""
    targets, mask = data["targets"], ops.cast(data["mask"], "float32")
    hidden = model.hidden_states(data["tokens"], training=training)
    theta, mean, log_std = model.topic_posterior(data["context_bow"], training=training)
    share = ops.sum(mask, axis=-1) / ops.maximum(ops.cast(data["doc_targets"], "float32"), 1.0)
    stop = model.gate.stop_indicator(targets)
    outputs = model.gate(hidden, theta, stop_indicator=stop, marginal=not training)
    token_nll, num_tokens = masked_token_nll(targets, outputs["logits"], mask)
    stop_log_prob = tfp.distributions.Bernoulli(logits=outputs["stop_logits"],
                                                dtype="float32").log_prob(stop)
    terms = {"token_nll": token_nll, "stop_nll": -ops.sum(stop_log_prob * mask),
             "kl": ops.sum(share * ops.cast(model.encoder.kl(mean, log_std), "float32")),
             "num_tokens": num_tokens, "units": num_tokens}
    if not training:
        terms["marginal_nll"], _ = masked_token_nll(targets, outputs["log_probs"], mask,
                                                    from_logits=False)
    per_token = lambda value: value / ops.maximum(num_tokens, 1.0)
    terms["nll_sum"] = (terms["token_nll"] + terms["stop_nll"] if training
                        else terms["marginal_nll"])
    terms["loss"] = per_token(terms["token_nll"] + terms["stop_nll"] + terms["kl"])
    terms["report"] = {name: (per_token(terms[name]), num_tokens)
                       for name in model.reported_terms}
    return terms


def _tcnlm_full(model, data, training=False):
    """`TCNLM.objective` before the change (no warm-ups)."""
    bow = data["context_bow"]
    t, kl, tm_log_likelihood = model.topic_model(bow, training=training)
    predictions, _ = model.language_model(data["tokens"], t, training=training)
    nll_sum, num_tokens = masked_token_nll(data["targets"], predictions, data["mask"],
                                           from_logits=model.mixture == "factorized")
    tm_nll_sum = -ops.sum(ops.cast(tm_log_likelihood, "float32"))
    tm_words = ops.sum(ops.cast(bow, "float32"))
    kl = ops.cast(kl, "float32")
    diversity = ops.cast(topic_diversity(model.topic_model.decoder.beta()), "float32")
    loss = ((nll_sum + tm_nll_sum + ops.sum(kl)) / ops.maximum(num_tokens, 1.0)
            - model.diversity_weight * diversity)
    sentences = ops.cast(ops.shape(kl)[0], "float32")
    return {"loss": loss, "units": num_tokens, "nll_sum": nll_sum, "num_tokens": num_tokens,
            "report": {"kl": (ops.divide_no_nan(ops.sum(kl), sentences), sentences),
                       "tm_nll": (ops.divide_no_nan(tm_nll_sum, tm_words), tm_words),
                       "diversity": (diversity, 1.0)}}


FULL_OBJECTIVES = {"lstm": _lm_full, "lda_lstm": _lm_full, "topicrnn": _topicrnn_full,
                   "tcnlm": _tcnlm_full}


# ------------------------------------------------------------------------------ timing
def _settings(name, precision):
    argv = ["train", name, "--corpus", str(shared_file("apnews/apnews.txt")), "--format", "tdlm",
            "--preset", "medium", "--stopwords", str(shared_file("stopwords/mallet_en.txt")),
            "--split-seed", str(SPLIT_SEED), "--precision", precision]
    for item in STUDY_SETS:
        argv += ["--set", item]
    return train_settings(argv)[1]


def _check_same_objective(gathered, full, batch):
    """The two objectives' loss on one batch (evaluation mode: deterministic)."""
    new = float(gathered.objective(batch, training=False)["loss"])
    old = float(full.objective(batch, training=False)["loss"])
    if not np.isclose(new, old, rtol=1e-5):
        raise AssertionError(f"gathered loss {new} != full-softmax loss {old}")
    return new, old


def measure(name, data, steps, rounds, precision):
    """Interleaved rounds of `time_train_steps` of the gathered and the full objective."""
    settings = _settings(name, precision)
    data = data.for_model(name)
    lda = None
    if name == "lda_lstm":
        from tfktopic.lda import fit_lda

        lda = fit_lda(data.parts["train"], data.topic_vocab,
                      num_topics=settings["model"]["num_topics"],
                      passes=settings["training"].get("lda_passes", 10), seed=0)
    gathered = runs.build_model(settings, data, seed=0, lda=lda)
    full = runs.build_model(settings, data, seed=0, lda=lda)
    full.objective = lambda batch, training=False: FULL_OBJECTIVES[name](full, batch, training)
    batch_size = int(settings["training"]["batch_size"])
    dataset = data.dataset("train", batch_size, shuffle=True, seed=0, drop_remainder=True)
    batches = list(dataset.take(steps))
    mask = np.concatenate([np.asarray(b["mask"]).ravel() for b in batches])
    losses = _check_same_objective(gathered, full, batches[0])
    timed = dataset.take(steps).cache()
    seconds = {"gathered": [], "full": []}
    for index in range(rounds):
        for key, model in (("gathered", gathered), ("full", full)) if index % 2 == 0 else \
                (("full", full), ("gathered", gathered)):
            seconds[key].append(time_train_steps(model, timed, steps, warmup=2))
        _log(f"{name} round {index + 1}/{rounds}: gathered {seconds['gathered'][-1]:.3f} s, "
             f"full {seconds['full'][-1]:.3f} s per step")
    tokens = float(mask.sum()) / steps
    median = {key: statistics.median(values) for key, values in seconds.items()}
    ratios = [f / g for g, f in zip(seconds["gathered"], seconds["full"])]
    config = {
        "preset": "medium", "precision": precision, "batch_size": batch_size,
        "max_len": int(settings["data"]["max_len"]), "lm_vocab": len(data.lm_vocab),
        "hidden_dim": settings["model"]["hidden_dim"], "steps": steps, "rounds": rounds,
        "padding_fraction_of_timed_batches": float(1.0 - mask.mean()),
        "real_tokens_per_step": tokens,
        "seconds_per_step_gathered": seconds["gathered"], "seconds_per_step_full": seconds["full"],
        "per_round_speedup": ratios, "median_per_round_speedup": statistics.median(ratios),
        "first_batch_eval_loss_gathered_vs_full": list(losses),
        "timing": "median of interleaved rounds (order alternating) of "
                  "benchmarks.common.time_train_steps, one process; the machine was shared "
                  "with the study's training processes: compare the ratio, not tokens/s",
    }
    return [record("softmax_gather", name, "tokens_per_s", tokens / median["gathered"],
                   f"{name} (full softmax)", tokens / median["full"],
                   protocol="training step (forward + backward + Adam), real tokens only; "
                            "ratio = full-softmax median s/step / gathered median s/step",
                   dataset="apnews (study data rules, split seed 0)", config=config)]


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.softmax_gather")
    parser.add_argument("--models", default="lstm,topicrnn,tcnlm",
                        help=f"comma-separated subset of {', '.join(MODELS)}")
    parser.add_argument("--steps", type=int, default=20, help="timed steps per measurement")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    parser.add_argument("--precision", default="float32",
                        choices=("float32", "mixed_bfloat16", "mixed_float16"))
    parser.add_argument("--out", default=None, help="JSON file (default: stdout); records of "
                                                    "other models already in it are kept")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.models.split(",") if n.strip()]
    unknown = sorted(set(names) - set(MODELS))
    if unknown:
        parser.error(f"unknown model(s) {unknown}; available: {', '.join(MODELS)}")
    data = runs.prepare_data(_settings("lstm", args.precision),
                             str(shared_file("apnews/apnews.txt")), format="tdlm",
                             seed=SPLIT_SEED)
    _log(f"data: {data.describe()}")
    records = []
    for name in names:
        start = time.perf_counter()
        records += measure(name, data, args.steps, args.rounds, args.precision)
        item = records[-1]
        _log(f"{name}: gathered {item['value']:.0f} tokens/s, full {item['baseline_value']:.0f} "
             f"tokens/s, ratio {item['ratio']:.3f} ({time.perf_counter() - start:.0f} s)")
    if args.out:
        path = pathlib.Path(args.out)
        kept = []
        if path.exists():
            kept = [r for r in json.loads(path.read_text())
                    if (r["model"], r["config"].get("precision")) not in
                    {(n, args.precision) for n in names}]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(portable(kept + records), indent=1) + "\n")
    else:
        print(json.dumps(portable(records), indent=1))


if __name__ == "__main__":
    main()
