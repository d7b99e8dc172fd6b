"""Tracing the gap to Zheng, Vafa & Blei's LSTM-LM one difference at a time (issue 13).

At the configuration the study chose (lr 4e-3, dropout 0.5, seed 0) our streamed document
LSTM scored 1.075x their own code's test perplexity on their targets, while the two
TopicRNNs agreed (1.014). Each variant below changes one training difference of
``README.md`` "Remaining differences" (beside this file) on our side, with everything else
the study's command (`studies.study.protocol.command`); `compare.py` then scores it on their
targets.

Two more variants asked whether Zheng et al.'s recipe (their initialisation and clipping,
`studies.study.protocol.RECIPE`) helps the study's sentence-level arms as much as it helped the
document arms (``sentence_*_recipe``): there is no peer run of those models, so they are
scored against the study's own Keras-initialisation run of the same configuration and
seed (`SENTENCE_BASELINES`), with the paired document-level bootstrap.

Usage::

    python -m studies.study.peer.trace commands            # the tfktopic train command of each
    python -m studies.study.peer.trace run NAME [NAME...]  # run in the background, resumable
    python -m studies.study.peer.trace summary             # -> results/peer/doc_lstm_trace.json

Runs go to ``runs/trace/<name>`` (one TensorFlow thread each, a frozen code snapshot as the
study's); the Keras-init baselines are the runs the study / the first cross-check made
(``BASELINES``), linked there when present.
"""

import argparse
import json
import os
import pathlib
import subprocess
import sys

from studies.common import code_snapshot, portable
from studies.study.protocol import RECIPE, RESULTS, arms_of, command

REPO = pathlib.Path(__file__).resolve().parents[3]
RUNS = REPO / "runs" / "trace"
OUT = REPO / "studies" / "results" / "peer" / "doc_lstm_trace.json"
CONFIG = "lr4e-3_do0.5"
#: Their code at that configuration, one seed each (the logs of README.md's "Runs").
PEER_LOGS = {"doc_lstm": "../peer-runs/lstm_lm_lr4e-3_do0.5.log",
             "doc_topicrnn": "../peer-runs/trnn_lr4e-3_do0.5.log"}
#: `studies.study.protocol.RECIPE` as --set overrides.
RECIPE_OVERRIDES = [f"{key}={json.dumps(value)}" for key, value in RECIPE.items()]
#: name -> (study arm, extra --set overrides, what differs from that arm's run): the arms
#: with Keras' initialisation, as the study first ran its document arms.
VARIANTS = {
    "keras": ("doc_lstm_keras", [], "the study's doc_lstm (Keras initialisation, per-variable "
                              "clipnorm 5)"),
    "gclip0.5": ("doc_lstm_keras", ["clipnorm=null", "global_clipnorm=0.5"],
                 "their clipping: the global norm of all gradients at 0.5"),
    "torchinit": ("doc_lstm_keras", ["initialization=\"torch\""],
                  "their initialisation: embedding and softmax U(+-0.1), LSTM at PyTorch's "
                  "defaults"),
    "torchinit_gclip0.5": ("doc_lstm_keras", ["initialization=\"torch\"", "clipnorm=null",
                                        "global_clipnorm=0.5"],
                           "their initialisation and clipping"),
    "torchinit_lstm_only": ("doc_lstm_keras", ['initialization={"lstm": "torch"}'],
                            "PyTorch's LSTM initialisation only (U(+-1/16), no forget-gate "
                            "offset)"),
    "torchinit_embedding_softmax": (
        "doc_lstm_keras", ['initialization={"embedding": "torch", "softmax": "torch"}'],
        "their embedding and softmax initialisation only (U(+-0.1), softmax bias "
        "U(+-1/16))"),
    "topicrnn_keras": ("doc_topicrnn_keras", [],
                       "the study's doc_topicrnn (Keras initialisation)"),
    "topicrnn_torchinit": ("doc_topicrnn_keras", ["initialization=\"torch\""],
                           "their initialisation of the language-model part"),
    "topicrnn_torchinit_gclip0.5": ("doc_topicrnn_keras", ["initialization=\"torch\"",
                                                           "clipnorm=null", "global_clipnorm=0.5"],
                                    "their initialisation and clipping"),
    "sentence_lstm_recipe": ("lstm_keras", RECIPE_OVERRIDES,
                             "the sentence-level LSTM with their initialisation and clipping"),
    "sentence_topicrnn_recipe": ("topicrnn_keras", RECIPE_OVERRIDES,
                                 "the sentence-level TopicRNN with their initialisation and "
                                 "clipping"),
}
#: The study's runs the sentence-level variants are scored against (records: the same
#: configuration and seed with Keras' initialisation).
SENTENCE_BASELINES = {name: RESULTS / "apnews" / VARIANTS[name][0] / f"{CONFIG}-s0.json"
                      for name in VARIANTS if name.startswith("sentence_")}
#: The Keras-initialisation runs made before the trace (seed 0, the chosen configuration).
BASELINES = {"keras": REPO / "runs" / "peer" / "doc_lstm_lr4e-3_do0.5-s0",
             "topicrnn_keras": REPO / "runs" / "study" / "apnews" / "doc_topicrnn_keras" /
             "lr4e-3_do0.5-s0"}


def trace_command(name, out):
    """The ``tfktopic train`` command of variant `name`."""
    arm, overrides, _ = VARIANTS[name]
    cmd = command("apnews", arm, CONFIG, 0, out)
    for override in overrides:
        cmd += ["--set", override]
    return cmd


def start(name, runs=RUNS):
    """Start variant `name` in the background (resumes its ``--out``); returns the Popen."""
    out = pathlib.Path(runs) / name
    out.parent.mkdir(parents=True, exist_ok=True)
    code, _ = code_snapshot(pathlib.Path(runs) / "code", REPO)
    env = {**os.environ, "TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1",
           "OMP_NUM_THREADS": "1", "PYTHONPATH": str(code)}
    log = open(pathlib.Path(runs) / f"{name}.log", "a")
    return subprocess.Popen(trace_command(name, out), stdout=log, stderr=subprocess.STDOUT,
                            env=env, cwd=REPO, start_new_session=True)


def run_directory(name, runs=RUNS):
    """Where variant `name`'s finished run is (its own directory, or the baseline's)."""
    own = pathlib.Path(runs) / name
    if (own / "results.json").exists() or name not in BASELINES:
        return own
    return BASELINES[name]


def summarize(name, runs=RUNS):
    """One variant's row: training, test perplexity (ours), their-target perplexity and
    the ratio to their run; None while it is not finished."""
    from studies.study.peer.compare import compare

    directory = run_directory(name, runs)
    if not (directory / "results.json").exists():
        return None
    if name in SENTENCE_BASELINES:
        return summarize_sentence(name, directory)
    arm, overrides, what = VARIANTS[name]
    cached = pathlib.Path(runs) / f"{name}-vs-peer.json"
    if cached.exists() and (REPO / json.loads(cached.read_text())["run"]).resolve() == \
            directory.resolve():
        scored = json.loads(cached.read_text())
    else:
        model = arms_of("apnews")[arm][0]
        scored = compare(str(directory), "test", 30, str(REPO / PEER_LOGS[model]))
        cached.write_text(json.dumps(scored, indent=1) + "\n")
    progress = json.loads((directory / "run.json").read_text())["progress"]
    best = min(progress["history"], key=lambda e: e["val_ppl"])
    ours = scored["ours"]
    return {"arm": arm, "overrides": overrides, "changes": what,
            "run": str(directory), "epochs": progress["epochs_done"], "best_epoch": best["epoch"],
            "best_val_ppl": best["val_ppl"], "test_ppl_all": ours["all"]["perplexity"],
            "test_ppl_their_scored": ours["their_scored"]["perplexity"],
            "peer_test_ppl": scored["peer"]["test_ppl"],
            "ratio_to_peer": scored["ratio_ours_their_scored_to_peer"]}


def summarize_sentence(name, directory):
    """A sentence-level variant's row: its test perplexity against the study's
    Keras-initialisation run of the same configuration and seed, with the paired
    document-level bootstrap interval of the ratio (one seed each: the interval covers
    the test documents, not the seeds)."""
    from tfktopic.evaluation.comparison import paired_bootstrap

    arm, overrides, what = VARIANTS[name]
    baseline = json.loads(SENTENCE_BASELINES[name].read_text())
    documents = json.loads((directory / "test_documents.json").read_text())
    if documents["tokens"] != baseline["test_documents"]["tokens"]:
        raise ValueError(f"{directory}: its test targets differ from "
                         f"{SENTENCE_BASELINES[name]}'s; the two runs are not comparable")
    paired = paired_bootstrap(documents["nll"], baseline["test_documents"]["nll"],
                              documents["tokens"])
    progress = json.loads((directory / "run.json").read_text())["progress"]
    best = min(progress["history"], key=lambda e: e["val_ppl"])
    return {"arm": arm, "overrides": overrides, "changes": what, "run": str(directory),
            "epochs": progress["epochs_done"], "best_epoch": best["epoch"],
            "best_val_ppl": best["val_ppl"], "test_ppl_all": paired.ppl_a[0],
            "keras_record": str(SENTENCE_BASELINES[name].relative_to(REPO)),
            "keras_test_ppl": paired.ppl_b[0],
            "keras_best_val_ppl": baseline["training"]["best_val_ppl"],
            "ratio_to_keras": paired.ratio, "ratio_to_keras_ci95": [paired.low, paired.high]}


def _line(row):
    if row is None:
        return "pending"
    tail = f"(epochs {row['epochs']}, best {row['best_epoch']})"
    if "ratio_to_keras" in row:
        low, high = row["ratio_to_keras_ci95"]
        return (f"test {row['test_ppl_all']:.2f}  / Keras-init {row['keras_test_ppl']:.2f} = "
                f"{row['ratio_to_keras']:.3f} [{low:.3f}, {high:.3f}]  {tail}")
    return (f"test {row['test_ppl_all']:.2f}  their targets {row['test_ppl_their_scored']:.2f}"
            f"  / theirs {row['peer_test_ppl']:.2f} = {row['ratio_to_peer']:.3f}  {tail}")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m studies.study.peer.trace",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("commands", "run", "summary"))
    parser.add_argument("names", nargs="*", help=f"variants: {', '.join(VARIANTS)}")
    parser.add_argument("--runs", default=str(RUNS))
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in VARIANTS]
    if unknown:
        parser.error(f"unknown variant {unknown[0]!r}; the variants are {', '.join(VARIANTS)}")
    names = args.names or list(VARIANTS)
    if args.action == "commands":
        for name in names:
            print(f"# {name}: {VARIANTS[name][2]}")
            print(" ".join(portable(trace_command(name, f"runs/trace/{name}"))[2:]))
    elif args.action == "run":
        for name in names:
            print(f"{name}: started (pid {start(name, args.runs).pid})")
    else:
        rows = {name: summarize(name, args.runs) for name in names}
        record = {"config": CONFIG, "seed": 0, "peer_logs": PEER_LOGS,
                  "variants": {n: r for n, r in rows.items() if r is not None},
                  "pending": [n for n, r in rows.items() if r is None]}
        pathlib.Path(args.out).write_text(json.dumps(portable(record), indent=1) + "\n")
        for name, row in rows.items():
            print(f"{name:30s} {_line(row)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
