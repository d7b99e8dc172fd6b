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
seed-to-seed spread (the largest over the smallest float32 perplexity). The verdict is
"within seed noise" when every paired ratio lies inside that spread (``1 / spread <=
ratio <= spread``), else "outside seed noise"; with one seed there is no spread and the
verdict is "needs 2 seeds".
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


def verdict(float32, bfloat16):
    """Per model: the paired ratios, the float32 seed spread and the verdict.

    Args:
        float32, bfloat16: {seed: test perplexity} of one model.

    Returns:
        dict with ``ratios`` ({seed: bf16 / f32}), ``float32_spread`` (max / min over
        seeds, None for one seed) and ``verdict``.
    """
    seeds = sorted(set(float32) & set(bfloat16))
    ratios = {seed: bfloat16[seed] / float32[seed] for seed in seeds}
    spread = (max(float32.values()) / min(float32.values())) if len(float32) > 1 else None
    if not seeds:
        result = "no pair yet"
    elif spread is None:
        result = "needs 2 seeds"
    elif all(1.0 / spread <= r <= spread for r in ratios.values()):
        result = "within seed noise"
    else:
        result = "outside seed noise"
    return {"ratios": ratios, "float32_spread": spread, "verdict": result}


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
        results[name] = {"test_perplexity": runs,
                         **verdict(runs["float32"], runs["mixed_bfloat16"]),
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
