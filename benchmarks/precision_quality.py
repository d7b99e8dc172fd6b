"""Issue 18's quality checks: test perplexity after the same medium training under
``float32`` and ``mixed_bfloat16``, or at two batch sizes (benchmarks, never timed tests).

    python -m benchmarks.precision_quality [--models lstm,topicrnn] [--epochs 3] [--seeds 0,1]
    # -> benchmarks/results/medium/precision_quality.json
    python -m benchmarks.precision_quality --models lstm --batch-sizes 64,256
    # -> benchmarks/results/medium/batch_quality.json
    python -m benchmarks.precision_quality --models lstm --batch-sizes 64,256:0.008 \
        --out benchmarks/results/medium/batch_quality_lr.json   # the larger batch's lr scaled

Every run is one ``tfktopic train`` command: `benchmarks.precision.command` (the study's
medium presets and data rules on APNEWS, split seed 0) with ``--precision`` (and
``--batch-size`` when batch sizes are compared), a fixed ``--epochs`` (no early stopping:
the same training for both arms) and ``--seed``. Runs go to
``runs/precision/<model>-<arm>-s<seed>`` and resume there when cut off.

A comparison has two arms: a baseline (float32; with ``--batch-sizes``, the first batch
size) and the other (mixed_bfloat16; or the second batch size in float32, with the preset's
learning rate -- can the faster setting simply be switched on? -- or with the learning rate
given after a colon). A seed fixes the initial weights (the variables are float32 under
both policies) and the data order, so the two runs of one seed are a pair. The record has,
per model, the test perplexity of every run, the paired other / baseline ratios, and the
baseline's seed-to-seed spread (the largest over the smallest perplexity). The verdict is
the ratio PPL(other) / PPL(baseline) with its bootstrap interval over the test documents
(paired) and the seeds (DESIGN §5a): "within seed noise" when the interval contains 1, else
"<other> worse" or "<other> better"; with one seed per arm it is "needs 2 seeds".
"""

import argparse
import json
import os
import pathlib
import subprocess
import sys
import time

from benchmarks.common import code_snapshot, portable
from benchmarks.precision import add_models_argument, command, parse_models

REPO = pathlib.Path(__file__).resolve().parents[1]


def _log(message):
    print(f"[precision quality {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr,
          flush=True)


#: The arms of the default comparison: (precision, batch size, learning rate); None = the
#: preset's.
PRECISION_ARMS = (("float32", None, None), ("mixed_bfloat16", None, None))


def batch_arms(specs):
    """The arms comparing two batch sizes in float32, the first the baseline.

    Args:
        specs: two strings ``SIZE`` or ``SIZE:LEARNING_RATE`` (e.g. ``["64", "256:0.008"]``:
            the second arm with its learning rate scaled; without one, the preset's).

    Returns:
        ((``"float32"``, size, learning rate or None), ...), two arms.
    """
    arms = []
    for spec in specs:
        size, _, rate = str(spec).partition(":")
        try:
            arms.append(("float32", int(size), float(rate) if rate else None))
        except ValueError:
            raise ValueError(f"--batch-sizes: {spec!r} is not SIZE or SIZE:LEARNING_RATE") \
                from None
    if len(arms) != 2 or arms[0] == arms[1]:
        raise ValueError(f"--batch-sizes: two different arms expected, got {list(specs)}")
    return tuple(arms)


def arm_name(arm):
    """``float32``, ``mixed_bfloat16``, ``float32-b256`` or ``float32-b256-lr0.008``: an
    arm's run-directory part."""
    precision, batch_size, learning_rate = arm
    name = precision if batch_size is None else f"{precision}-b{batch_size}"
    return name if learning_rate is None else f"{name}-lr{learning_rate:g}"


def arm_label(arm):
    """How a verdict names an arm: ``bf16``, ``batch 256`` or ``batch 256, lr 0.008``."""
    precision, batch_size, learning_rate = arm
    if batch_size is None:
        label = {"mixed_bfloat16": "bf16", "mixed_float16": "fp16"}.get(precision, precision)
    else:
        label = f"batch {batch_size}"
    return label if learning_rate is None else f"{label}, lr {learning_rate:g}"


def run_command(name, arm, seed, epochs, out):
    """The ``tfktopic train`` command of one run of `arm` = (precision, batch size,
    learning rate)."""
    precision, batch_size, learning_rate = arm
    rate = [] if learning_rate is None else ["--learning-rate", str(learning_rate)]
    return [sys.executable, "-m", "tfktopic"] + command(name, "medium", precision,
                                                        batch_size) + rate + [
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


def verdict(baseline, other, documents=None, arms=PRECISION_ARMS):
    """Per model: the paired ratios, the baseline's seed spread and the verdict (DESIGN §5a).

    The verdict rests on PPL(other) / PPL(baseline) with its 95% bootstrap interval over
    the test documents (paired) and the seeds of each arm
    (`tfktopic.evaluation.comparison.paired_bootstrap`): an interval that contains 1 is
    "within seed noise"; above 1 "<other> worse", below 1 "<other> better" (e.g. "bf16
    worse"). It needs two seeds of each arm (one seed has no seed noise to compare with).

    Args:
        baseline, other: {seed: test perplexity} of one model under the two arms.
        documents: {arm_name: {seed: {"nll": [...], "tokens": [...]}}} for both arms, the
            runs' per-document test scores (`test_documents`); without them there is no
            verdict.
        arms: (baseline arm, other arm), each (precision, batch size, learning rate).

    Returns:
        dict with ``ratios`` ({seed: other / baseline}), ``baseline_spread`` (max / min
        over seeds, None for one seed), ``comparison`` (the bootstrap, or None) and
        ``verdict``.
    """
    names = [arm_name(arm) for arm in arms]
    label = arm_label(arms[1])
    seeds = sorted(set(baseline) & set(other))
    ratios = {seed: other[seed] / baseline[seed] for seed in seeds}
    spread = (max(baseline.values()) / min(baseline.values())) if len(baseline) > 1 else None
    comparison = None
    if not seeds:
        result = "no pair yet"
    elif len(seeds) < 2:
        result = "needs 2 seeds"
    elif documents is None or any(documents[n].get(seed) is None for n in names
                                  for seed in seeds):
        result = "no per-document scores"
    else:
        from studies.study.report import compare   # the study's comparison

        comparison = compare(
            [{"test_documents": documents[names[1]][seed]} for seed in seeds],
            [{"test_documents": documents[names[0]][seed]} for seed in seeds]).as_dict()
        result = {"A better": f"{label} better", "B better": f"{label} worse"}.get(
            comparison["verdict"], "within seed noise")
    return {"ratios": ratios, "baseline_spread": spread, "comparison": comparison,
            "verdict": result}


def run(models, seeds, epochs, workers, out_root, arms=PRECISION_ARMS):
    """Train every (model, arm, seed) not yet finished, `workers` at a time."""
    names = [arm_name(arm) for arm in arms]
    todo = [(name, arm, seed) for name in models for seed in seeds for arm in arms]
    active = []
    code, _ = code_snapshot(pathlib.Path(out_root) / "code", REPO)   # frozen HEAD code
    env = {**os.environ, "TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1",
           "OMP_NUM_THREADS": "1", "PYTHONPATH": str(code)}

    def directory(name, arm, seed):
        return pathlib.Path(out_root) / f"{name}-{arm_name(arm)}-s{seed}"

    while todo or active:
        active = [(p, key) for p, key in active if p.poll() is None]
        while todo and len(active) < workers:
            key = todo.pop(0)
            out = directory(*key)
            if test_perplexity(out) is not None:
                continue
            out.mkdir(parents=True, exist_ok=True)
            log = open(out / "train.log", "a")
            process = subprocess.Popen(run_command(*key, epochs, out), stdout=log,
                                       stderr=subprocess.STDOUT, env=env, cwd=code)
            active.append((process, key))
            _log(f"started {out.name}")
        time.sleep(5)
    results = {}
    for name in models:
        runs = {n: {s: test_perplexity(directory(name, arm, s)) for s in seeds}
                for n, arm in zip(names, arms)}
        runs = {n: {s: v for s, v in r.items() if v is not None} for n, r in runs.items()}
        documents = {n: {s: test_documents(directory(name, arm, s)) for s in runs[n]}
                     for n, arm in zip(names, arms)}
        varied = tuple(f"<{what}>" if a != b else a         # what the arms change
                       for what, a, b in zip(("precision", "batch_size", "learning_rate"),
                                             *arms))
        results[name] = {"test_perplexity": runs,
                         **verdict(runs[names[0]], runs[names[1]], documents, arms),
                         "command": portable(run_command(name, varied, "<seed>", epochs,
                                                         "<out>")[2:])}
        _log(f"{name}: {results[name]['verdict']} {results[name]['ratios']}")
    return {"epochs": epochs, "seeds": list(seeds), "arms": names, "models": results}


def merged(previous, result):
    """`result` with the models of an earlier record of the same comparison it did not rerun.

    Args:
        previous: the record already at ``--out`` (or None).
        result: this run's record (`run`).

    Returns:
        `result`, its ``models`` extended by `previous`'s other models when both compare the
        same arms after the same epochs with the same seeds (a record without ``arms`` is a
        float32 / mixed_bfloat16 one); otherwise `result` alone.
    """
    if not previous:
        return result
    arms = previous.get("arms", [arm_name(arm) for arm in PRECISION_ARMS])
    if (previous.get("epochs"), previous.get("seeds"), arms) != (
            result["epochs"], result["seeds"], result["arms"]):
        _log("the record at --out compares other runs; it is replaced")
        return result
    models = {**{n: m for n, m in previous["models"].items() if n not in result["models"]},
              **result["models"]}
    return {**result, "models": models}


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.precision_quality",
                                     description=__doc__.split("\n\n")[0])
    add_models_argument(parser)
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--batch-sizes",
                        help="compare two batch sizes in float32 instead of the two "
                             "precisions: SIZE[:LEARNING_RATE],SIZE[:LEARNING_RATE] (e.g. "
                             "64,256 or 64,256:0.008)")
    parser.add_argument("--runs", default=str(REPO / "runs" / "precision"))
    parser.add_argument("--out", help="default: benchmarks/results/medium/"
                                      "precision_quality.json (batch_quality.json with "
                                      "--batch-sizes)")
    args = parser.parse_args(argv)
    models = parse_models(parser, args.models)
    seeds = [int(s) for s in args.seeds.split(",") if s]
    arms = PRECISION_ARMS
    if args.batch_sizes:
        try:
            arms = batch_arms([b for b in args.batch_sizes.split(",") if b])
        except ValueError as error:
            parser.error(f"--batch-sizes {args.batch_sizes!r}: {error}")
    out = args.out or str(REPO / "benchmarks" / "results" / "medium" / (
        "batch_quality.json" if args.batch_sizes else "precision_quality.json"))
    result = run(models, seeds, args.epochs, args.workers, args.runs, arms)
    path = pathlib.Path(out)
    previous = json.loads(path.read_text()) if path.exists() else None
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(portable(merged(previous, result)), indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
