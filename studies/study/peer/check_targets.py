"""Which test targets does Zheng et al.'s evaluation score? Measured, not assumed.

Run with the PyTorch venv's python (it imports their patched code from the
scratch copy, not tfktopic)::

    ../peer-venv/bin/python studies/study/peer/check_targets.py \\
        --scratch ../peer-scratch --data ../peer-data/apnews [--split test]

It builds their vocabulary and evaluation data exactly as their ``train.py``
does, runs their ``train.evaluate`` with a tiny untrained LSTM_LM (the scores do
not matter) and records, through their own loss function, which targets of
which window are not padding. Each window is mapped back to its document and
to the index k of the target in their document sequence
``[<sos>, w_1, ..., w_N, <eos>]`` (k = 1 .. N + 1). The claim checked
(README.md, "Target sets"): their evaluation scores every k except
k = L, 2L, ... (L = ``--max_seqlen``), because ``elif is_last:`` on a
one-element list is always true and pads the last target of every window.
Prints a JSON summary; exit status 1 if the claim fails.
"""

import argparse
import json
import os
import sys


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scratch", required=True)
    parser.add_argument("--data", required=True, help="their data_path (…/apnews)")
    parser.add_argument("--dataset", default="apnews")
    parser.add_argument("--split", default="test", choices=("valid", "test"))
    parser.add_argument("--max_seqlen", type=int, default=30)
    parser.add_argument("--num_docs", type=int, default=None)
    args = parser.parse_args(argv)

    sys.path.insert(0, os.path.abspath(args.scratch))
    os.chdir(args.scratch)
    import numpy as np
    import torch

    torch.set_num_threads(1)
    import models
    import train as their_train
    from data import process_dataset
    from utils import PAD

    L = args.max_seqlen
    _, val_data, test_data, vocab, _ = process_dataset(
        "LSTM_LM", args.dataset, args.data, L, has_tm=False, num_docs=args.num_docs)
    data = test_data if args.split == "test" else val_data
    windows = data["lm_sequences"]
    is_last = data["is_last"]
    data["lm_sequences"] = windows.reshape((-1, 1))  # as their train.py / test.py do
    pad = vocab[PAD]

    scored = []  # per window: the window positions (1 .. L-1) whose target is scored
    original = their_train.compute_loss_ll

    def recording_loss(output, target, pad_idx):
        scored.append([j + 1 for j in np.flatnonzero(target.cpu().numpy() != pad_idx)])
        return original(output, target, pad_idx)

    their_train.compute_loss_ll = recording_loss
    torch.manual_seed(0)
    model = models.LSTM_LM(rnn_type="LSTM", vocab_size=len(vocab), embed_dim=8, hidden_dim=8,
                           num_layers=1)
    their_train.evaluate(model, None, data, L, pad, None)
    their_train.compute_loss_ll = original
    if len(scored) != len(windows):
        raise SystemExit(f"{len(scored)} evaluated windows for {len(windows)} windows")

    # Map windows to documents: a document's windows end with is_last = 1.
    lines = open(os.path.join(args.data, f"{args.split}.txt"), encoding="utf-8").readlines()
    lines = lines[:args.num_docs]
    doc, w = 0, 0
    per_doc_scored = [set() for _ in lines]
    for i, positions in enumerate(scored):
        per_doc_scored[doc].update(w * L + j for j in positions)
        w += 1
        if is_last[i]:
            doc, w = doc + 1, 0
    if doc != len(lines):
        raise SystemExit(f"{doc} documents from the windows, {len(lines)} lines")

    mismatches, total, expected_total, dropped = 0, 0, 0, 0
    for line, got in zip(lines, per_doc_scored):
        n = len(line.strip().split())
        expected = {k for k in range(1, n + 2) if k % L != 0}
        mismatches += got != expected
        total += len(got)
        expected_total += len(expected)
        dropped += (n + 1) - len(expected)
    words = sum(len(line.strip().split()) for line in lines)
    report = {
        "split": args.split, "documents": len(lines), "max_seqlen": L,
        "windows": int(len(windows)), "words": words,
        "targets_in_their_data": words + len(lines),
        "targets_scored_by_their_evaluation": total,
        "dropped_by_is_last_bug": words + len(lines) - total,
        "claim": "scored = every k in 1..N+1 of [<sos>, w_1..w_N, <eos>] except k = L, 2L, ...",
        "documents_not_matching_claim": int(mismatches),
        "claim_holds": bool(mismatches == 0 and total == expected_total),
    }
    print(json.dumps(report, indent=1))
    return 0 if report["claim_holds"] else 1


if __name__ == "__main__":
    sys.exit(main())
