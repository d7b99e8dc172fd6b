"""Issue 18's quality check of mixed precision: test perplexity after the same medium
training under ``float32`` and ``mixed_bfloat16`` (benchmarks, never timed tests).

    python -m benchmarks.precision_quality [--models lstm,topicrnn] [--epochs 3] [--seeds 0,1]
    # -> benchmarks/results/medium/precision_quality.json

Every run is one ``tfktopic train`` command: `benchmarks.precision.command` (the study's
medium presets and data rules on APNEWS, split seed 0) with ``--precision``, a fixed
``--epochs`` (no early stopping: the same training for both precisions) and ``--seed``.
Runs go to ``runs/precision/<model>-<precision>-s<seed>`` and resume there when cut off.

A seed fixes the initial weights (the variables are float32 under both policies) and the
data order, so the bf16 and float32 runs of one seed are a pair. The record has, per
model, the test perplexity of every run, the paired bf16 / float32 ratios, and the float32
seed-to-seed spread (the largest over the smallest float32 perplexity). The verdict is the
ratio PPL(bf16) / PPL(float32) with its bootstrap interval over the test documents (paired)
and the seeds (DESIGN §5a): "within seed noise" when the interval contains 1, else "bf16
worse" or "bf16 better"; with one seed per precision it is "needs 2 seeds".
"""

import argparse
import json
import os
import pathlib
import subprocess
import sys
import time

from benchmarks.common import code_snapshot, portable
from benchmarks.precision import PRECISIONS, add_models_argument, command, parse_models

REPO = pathlib.Path(__file__).resolve().parents[1]


def _log(message):
    print(f"[precision quality {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr,
          flush=True)


def run_command(name, precision, seed, epochs, out):
    """The ``tfktopic train`` command of one run."""
    return [sys.executable, "-m", "tfktopic"] + command(name, "medium", precision) + [
        "--epochs", str(epochs), "--seed", str(seed), "--split-seed", "0", "--out", str(out),
        "--verbose", "2"]


def test_perplexity(out):
    """The test perplexity of a finished run directory, or None."""
    path = pathlib.Path(out) / "results.json"
    if not path.exists():
        return None
    return float(json.loads(path.read_text())["test"]["perplexity"])


def test_documents(out):
    """The per-document test NLL sums and token counts of a finished run, or None."""
    path = pathlib.Path(out) / "test_documents.json"
    if not path.exists():
        return None
    documents = json.loads(path.read_text())
    return {"nll": documents["nll"], "tokens": documents["tokens"]}


def verdict(float32, bfloat16, documents=None):
    """Per model: the paired ratios, the float32 seed spread and the verdict (DESIGN §5a).

    The verdict rests on PPL(bf16) / PPL(float32) with its 95% bootstrap interval over the
    test documents (paired) and the seeds of each precision
    (`tfktopic.evaluation.comparison.paired_bootstrap`): an interval that contains 1 is
    "within seed noise"; above 1 "bf16 worse", below 1 "bf16 better". It needs two seeds of
    each precision (one seed has no seed noise to compare with).

    Args:
        float32, bfloat16: {seed: test perplexity} of one model.
        documents: {"float32": {seed: {"nll": [...], "tokens": [...]}}, "mixed_bfloat16":
            ...}, the runs' per-document test scores (`test_documents`); without them there
            is no verdict.

    Returns:
        dict with ``ratios`` ({seed: bf16 / f32}), ``float32_spread`` (max / min over
        seeds, None for one seed), ``comparison`` (the bootstrap, or None) and ``verdict``.
    """
    seeds = sorted(set(float32) & set(bfloat16))
    ratios = {seed: bfloat16[seed] / float32[seed] for seed in seeds}
    spread = (max(float32.values()) / min(float32.values())) if len(float32) > 1 else None
    comparison = None
    if not seeds:
        result = "no pair yet"
    elif len(seeds) < 2:
        result = "needs 2 seeds"
    elif documents is None or any(documents[p].get(seed) is None for p in PRECISIONS
                                  for seed in seeds):
        result = "no per-document scores"
    else:
        from benchmarks.study_report import compare   # the study's comparison

        comparison = compare(
            [{"test_documents": documents["mixed_bfloat16"][seed]} for seed in seeds],
            [{"test_documents": documents["float32"][seed]} for seed in seeds]).as_dict()
        result = {"A better": "bf16 better", "B better": "bf16 worse"}.get(
            comparison["verdict"], "within seed noise")
    return {"ratios": ratios, "float32_spread": spread, "comparison": comparison,
            "verdict": result}


def run(models, seeds, epochs, workers, out_root):
    """Train every (model, precision, seed) not yet finished, `workers` at a time."""
    todo = [(name, precision, seed) for name in models for seed in seeds
            for precision in PRECISIONS]
    active = []
    code, _ = code_snapshot(pathlib.Path(out_root) / "code", REPO)   # frozen HEAD code
    env = {**os.environ, "TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1",
           "OMP_NUM_THREADS": "1", "PYTHONPATH": str(code)}
    while todo or active:
        active = [(p, key) for p, key in active if p.poll() is None]
        while todo and len(active) < workers:
            key = todo.pop(0)
            out = pathlib.Path(out_root) / f"{key[0]}-{key[1]}-s{key[2]}"
            if test_perplexity(out) is not None:
                continue
            out.mkdir(parents=True, exist_ok=True)
            log = open(out / "train.log", "a")
            process = subprocess.Popen(run_command(*key, epochs, out), stdout=log,
                                       stderr=subprocess.STDOUT, env=env, cwd=code)
            active.append((process, key))
            _log(f"started {key}")
        time.sleep(5)
    results = {}
    for name in models:
        runs = {p: {s: test_perplexity(pathlib.Path(out_root) / f"{name}-{p}-s{s}")
                    for s in seeds} for p in PRECISIONS}
        runs = {p: {s: v for s, v in r.items() if v is not None} for p, r in runs.items()}
        documents = {p: {s: test_documents(pathlib.Path(out_root) / f"{name}-{p}-s{s}")
                         for s in runs[p]} for p in PRECISIONS}
        results[name] = {"test_perplexity": runs,
                         **verdict(runs["float32"], runs["mixed_bfloat16"], documents),
                         "command": portable(run_command(name, "<precision>", "<seed>", epochs,
                                                         "<out>")[2:])}
        _log(f"{name}: {results[name]['verdict']} {results[name]['ratios']}")
    return {"epochs": epochs, "seeds": list(seeds), "models": results}


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.precision_quality",
                                     description=__doc__.split("\n\n")[0])
    add_models_argument(parser)
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--runs", default=str(REPO / "runs" / "precision"))
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "medium"
                                              / "precision_quality.json"))
    args = parser.parse_args(argv)
    models = parse_models(parser, args.models)
    seeds = [int(s) for s in args.seeds.split(",") if s]
    result = run(models, seeds, args.epochs, args.workers, args.runs)
    pathlib.Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(args.out).write_text(json.dumps(portable(result), indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
