"""Why T = 1 pSGLD lags RMSprop on PTB: per-group noise-to-drift ratios (issue 15).

    python -m studies.claims.sgmcmc_diagnostics --steps 600 --out studies/results/sgmcmc_diag.json
    python -m studies.claims.sgmcmc_diagnostics --quick          # tiny model, a few steps

Trains the PTB-small LSTM (2 x 200, 20-token windows, batch 20) for `--steps`
steps under RMSprop and several pSGLD variants (the paper's T = 1, a floor on
V, sparse-aware "hold" V, a larger λ, a cold T), all from the same
initialisation and batches, and measures per parameter group (embedding rows
and softmax columns of rare / mid / frequent words, LSTM kernels, biases):

* noise / drift: RMS of the per-step injected noise sqrt(2ηTG/N) over the
  RMS of the per-step drift η·G·|ḡ| (ḡ averaged over 10 held-out batches, G
  from the optimizer's V at the end of the run);
* G: median preconditioner 1/(λ + sqrt(V));
* moved: RMS distance of the group's weights from their initial values;

and the validation perplexity after the run. One JSON record per variant.
"""

import argparse
import json
import pathlib
import time

import keras
import numpy as np
import tensorflow as tf

RESULTS = pathlib.Path(__file__).resolve().parents[1] / "results"

#: The variants compared (keyword arguments of `PSGLD`; "rmsprop" is T = 0).
VARIANTS = {
    "rmsprop": {"temperature": 0.0, "prior_precision": 0.0},
    "psgld_T1": {},
    "psgld_T1_v_floor_1e-6": {"v_floor": 1e-6},
    "psgld_T1_sparse_hold": {"sparse_v": "hold"},
    "psgld_T1_epsilon_1e-3": {"epsilon": 1e-3},
    "psgld_T0.01": {"temperature": 0.01},
}


def _word_groups(counts):
    """Word ids by training frequency: rare (<= 5), mid (6..100), frequent (> 100)."""
    ids = np.arange(len(counts))
    return {"rare": ids[(counts > 0) & (counts <= 5)],
            "mid": ids[(counts > 5) & (counts <= 100)],
            "frequent": ids[counts > 100]}


def _group_slices(model, counts):
    """name -> (variable index, function selecting the group's coordinates)."""
    groups = _word_groups(counts)
    out = {}
    names = [v.path for v in model.trainable_variables]
    for i, name in enumerate(names):
        if "embedding" in name:
            for g, ids in groups.items():
                out[f"embedding_{g}"] = (i, lambda a, ids=ids: a[ids])
        elif "softmax" in name and name.endswith("kernel"):
            for g, ids in groups.items():
                out[f"softmax_{g}"] = (i, lambda a, ids=ids: a[:, ids])
        elif "softmax" in name:
            out["softmax_bias"] = (i, lambda a: a)
        elif name.endswith("bias"):
            out.setdefault("lstm_biases", []).append(i)
        else:
            out.setdefault("lstm_kernels", []).append(i)
    return out


def _select(group, arrays):
    if isinstance(group, list):
        return np.concatenate([arrays[i].ravel() for i in group])
    index, select = group
    return select(arrays[index]).ravel()


def _mean_gradient(model, batches):
    grads = None
    for batch in batches:
        with tf.GradientTape() as tape:
            loss = model.objective(batch, training=False)["loss"]
        g = [tf.convert_to_tensor(x).numpy() for x in tape.gradient(loss, model.trainable_weights)]
        grads = g if grads is None else [a + b for a, b in zip(grads, g)]
    return [g / len(batches) for g in grads]


def run_variant(name, kwargs, data, vocab_size, hidden, steps, lr, num_examples, counts, seed=0):
    """Train one variant for `steps` steps; returns its record (dict)."""
    from tfktopic.bayes import PSGLD
    from tfktopic.evaluation import evaluate_perplexity
    from tfktopic.models import LSTMLanguageModel

    keras.utils.set_random_seed(seed)
    model = LSTMLanguageModel(vocab_size, hidden, hidden, num_layers=2)
    options = {"num_examples": num_examples, "seed": seed, "clipnorm": 5.0, **kwargs}
    optimizer = PSGLD(lr, **options)
    model.compile(optimizer=optimizer)
    train = data["train"]
    model(next(iter(train)))
    initial = [v.numpy().copy() for v in model.trainable_variables]
    start = time.perf_counter()
    model.fit(train.repeat(), steps_per_epoch=steps, epochs=1, verbose=0)
    seconds = time.perf_counter() - start
    final = [v.numpy() for v in model.trainable_variables]
    held_out = list(data["valid"].take(10))
    grads = _mean_gradient(model, held_out)
    v_arrays = [optimizer.squared_average(v).numpy() for v in model.trainable_variables]
    floor = optimizer.v_floor
    v_used = [np.maximum(v, floor) for v in v_arrays]
    if optimizer.epsilon_placement == "inside":
        g_arrays = [1.0 / np.sqrt(v + optimizer.epsilon) for v in v_used]
    else:
        g_arrays = [1.0 / (np.sqrt(v) + optimizer.epsilon) for v in v_used]
    temperature = optimizer.temperature
    groups = {}
    for group_name, group in _group_slices(model, counts).items():
        g_pre = _select(group, g_arrays)
        drift = lr * g_pre * np.abs(_select(group, grads))
        noise = np.sqrt(2 * lr * temperature * g_pre / num_examples)
        moved = _select(group, final) - _select(group, initial)
        groups[group_name] = {
            "size": int(g_pre.size),
            "median_G": float(np.median(g_pre)),
            "rms_drift_per_step": float(np.sqrt(np.mean(drift**2))),
            "rms_noise_per_step": float(np.sqrt(np.mean(noise**2))),
            "noise_over_drift": (float(np.sqrt(np.mean(noise**2)) / np.sqrt(np.mean(drift**2)))
                                 if temperature > 0 else 0.0),
            "rms_moved": float(np.sqrt(np.mean(moved**2))),
            "rms_initial": float(np.sqrt(np.mean(_select(group, initial)**2))),
        }
    valid_ppl = evaluate_perplexity(model, data["valid"]).perplexity
    return {"variant": name, "optimizer_options": kwargs, "steps": steps, "learning_rate": lr,
            "hidden_dim": hidden, "num_examples": num_examples, "train_seconds": seconds,
            "valid_ppl": valid_ppl, "groups": groups}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ptb-dir", default=str(pathlib.Path(__file__).resolve().parents[3]
                                                 / "shared" / "data" / "ptb"))
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--quick", action="store_true", help="hidden 32, 60k tokens, 30 steps")
    parser.add_argument("--out", default=str(RESULTS / "sgmcmc_diagnostics.json"))
    args = parser.parse_args(argv)

    from tfktopic.bayes.setups import ptb_data
    from tfktopic.data import Vocabulary, read_ptb

    ptb_dir = pathlib.Path(args.ptb_dir)
    if not (ptb_dir / "ptb.train.txt").exists():
        parser.error(f"--ptb-dir: {ptb_dir / 'ptb.train.txt'} not found")
    vocab = Vocabulary.build(read_ptb(ptb_dir / "ptb.train.txt"), min_count=1)
    data = ptb_data(ptb_dir, vocab, 20, 20, limit_tokens=60_000 if args.quick else None)
    counts = np.zeros(len(vocab), np.int64)
    for batch in data["train"]:
        counts += np.bincount(batch["targets"].numpy().ravel(), minlength=len(vocab))
    hidden, steps = (32, 30) if args.quick else (200, args.steps)
    out = pathlib.Path(args.out)
    records = json.loads(out.read_text()) if out.exists() else {}
    for name in args.variants.split(","):
        if name in records:
            print(f"{name}: done (in {out})")
            continue
        record = run_variant(name, VARIANTS[name], data, len(vocab), hidden, steps, 1e-3,
                             data["num_train_tokens"], counts)
        records[name] = record
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(records, indent=1))
        summary = {g: (round(r["noise_over_drift"], 2), round(r["rms_moved"], 4))
                   for g, r in record["groups"].items()}
        print(f"{name}: valid ppl {record['valid_ppl']:.1f} after {steps} steps; "
              f"(noise/drift, rms moved) {summary}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
