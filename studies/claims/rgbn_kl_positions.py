"""Where rGBN-RNN's topic prior misfits: the KL of each sentence position of a chunk.

rGBN-RNN's prior chains the sentences of a document (Guo et al. eq. 2: theta_j ~
Gam(tau0 (Phi theta^{l+1}_j + Pi theta_{j-1}), tau0)); GBN-RNN's does not (every theta_j ~
Gam(tau0, tau0) at one layer). For a finished run of either, this scores
KL(q(theta^1_j | d_{<=j}) || p(theta^1_j | theta^1_{j-1})) at the Weibull mean of the
encoder (the theta the LM reads) for each position j of the J-sentence chunks, on a split
(train / valid / test) and under a context protocol, with the mean theta mass and context
size per position: does the transition prior fit held-out documents as it fits the
training ones?

    python -m studies.claims.rgbn_kl_positions runs/study/apnews/rgbn_rnn_1/lr4e-3_do0.5-s0 \
        runs/study/apnews/gbn_rnn_1/lr4e-3_do0.5-s0 --splits train valid \
        --out studies/results/study/rgbn_kl_positions.json
"""

import argparse
import json
import pathlib
import sys

import numpy as np


def kl_by_position(run, split, protocol, batch_size=64):
    """Mean first-layer KL, theta mass and context words per chunk position.

    Args:
        run: a loaded rGBN-RNN / GBN-RNN run (`tfktopic.runs.load_run`).
        split: "train", "valid" or "test" (the run's own split).
        protocol: the topic context ("preceding" or "all_other").
        batch_size: chunks per batch.

    Returns:
        dict of lists over positions: ``kl`` (nats), ``theta_mass`` (sum of theta^1),
        ``context_words`` and ``sentences`` (how many real sentences were averaged).
    """
    from keras import ops

    from tfktopic.distributions import weibull_gamma_kl
    from tfktopic.runs.data import make_dataset, make_examples
    from tfktopic.runs.reports import run_splits

    model = run.model
    part = run_splits(run.config)[split]
    examples = make_examples(run.name, part, run.lm_vocab, run.topic_vocab, run.config["data"],
                             protocol=protocol)
    J = int(run.config["data"]["sentences_per_chunk"])
    sums = {key: np.zeros(J) for key in ("kl", "theta_mass", "context_words", "sentences")}
    tau0 = model.topic_model.tau0
    for batch in make_dataset(run.name, examples, batch_size):
        thetas, ks, lams = model.encoder(batch["context_bow"], training=False)
        shapes = model.topic_model.gamma_shapes(thetas)
        kl = np.asarray(ops.sum(weibull_gamma_kl(ks[0], lams[0], tau0 * shapes[0], tau0),
                                axis=-1))
        real = np.asarray(batch["mask"]).max(-1)          # [B, J]: real sentences
        sums["kl"] += (kl * real).sum(0)
        sums["theta_mass"] += (np.asarray(thetas[0]).sum(-1) * real).sum(0)
        sums["context_words"] += (np.asarray(batch["context_bow"]).sum(-1) * real).sum(0)
        sums["sentences"] += real.sum(0)
    count = np.maximum(sums["sentences"], 1)
    return {"kl": (sums["kl"] / count).round(2).tolist(),
            "theta_mass": (sums["theta_mass"] / count).round(2).tolist(),
            "context_words": (sums["context_words"] / count).round(1).tolist(),
            "sentences": sums["sentences"].astype(int).tolist()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="finished rgbn_rnn / gbn_rnn run directories")
    parser.add_argument("--splits", nargs="+", default=["train", "valid"],
                        choices=["train", "valid", "test"])
    parser.add_argument("--protocols", nargs="+", default=["all_other", "preceding"],
                        choices=["all_other", "preceding"])
    parser.add_argument("--out", default=None, help="write the table as JSON here")
    args = parser.parse_args(argv)
    from tfktopic.runs import load_run

    rows = []
    for path in args.runs:
        run = load_run(path)
        if run.name not in ("rgbn_rnn", "gbn_rnn"):
            parser.error(f"{path}: a {run.name} run (rgbn_rnn or gbn_rnn wanted)")
        for split in args.splits:
            for protocol in args.protocols:
                row = {"run": str(path), "model": run.name, "split": split,
                       "protocol": protocol, **kl_by_position(run, split, protocol)}
                rows.append(row)
                print(f"{path} {split} {protocol}: KL per position {row['kl']}", flush=True)
    if args.out:
        pathlib.Path(args.out).write_text(json.dumps({"about": __doc__.split("\n\n")[1],
                                                      "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
