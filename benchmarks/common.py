"""Shared pieces of the benchmarks: the JSON record, argument parsing, timing.

Every benchmark writes a JSON list of records (DESIGN.md §7)::

    {"benchmark", "model", "metric", "value", "baseline_model",
     "baseline_value", "ratio", "protocol", "dataset", "config"}

Each model family keeps its entries in its own module (``benchmarks/sgmcmc.py``,
``benchmarks/topic_models.py``, ``benchmarks/rgbn.py``) as two dicts,
``SPEED`` and ``QUALITY``, mapping a model name to ``fn(mode) -> list of
records``, where ``mode`` is one of `MODES` (``quick``, ``medium``, ``full``). `benchmarks.speed` and `benchmarks.quality` merge them.
"""

import argparse
import json
import pathlib
import platform
import resource
import sys
import time

from studies.common import (REPO_ROOT, SHARED_DATA, MissingData, code_snapshot,  # noqa: F401
                            portable, shared_file, spread)


def cpu_name():
    """The CPU's model name (``/proc/cpuinfo``), else what `platform` says."""
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def write_result(result, out=None):
    """Print `result` as JSON (paths made portable) and write it to `out` when given."""
    text = json.dumps(portable(result), indent=1)
    if out:
        pathlib.Path(out).parent.mkdir(parents=True, exist_ok=True)
        pathlib.Path(out).write_text(text + "\n")
    print(text)


def record(benchmark, model, metric, value, baseline_model=None, baseline_value=None,
           protocol="", dataset="", config=None):
    """One benchmark record; ``ratio = value / baseline_value`` when both exist."""
    ratio = None
    if baseline_value not in (None, 0) and value is not None:
        ratio = float(value) / float(baseline_value)
    return {"benchmark": benchmark, "model": model, "metric": metric,
            "value": None if value is None else float(value),
            "baseline_model": baseline_model,
            "baseline_value": None if baseline_value is None else float(baseline_value),
            "ratio": ratio, "protocol": protocol, "dataset": dataset, "config": config or {}}


def peak_memory_mb():
    """Peak resident set size of this process so far (MiB, Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def reset_peak_rss():
    """Reset the kernel's peak-RSS mark of this process; False if not permitted."""
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
        return True
    except OSError:
        return False


def status_mb(field="VmHWM"):
    """A /proc/self/status memory field (VmHWM: peak RSS, VmRSS: current) in MiB."""
    try:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return peak_memory_mb()


def time_train_steps(model, dataset, steps, warmup=3):
    """Seconds per training step of a compiled model, after `warmup` steps.

    Uses Keras' own compiled train function, so the measured step is what
    `model.fit` runs; the first (tracing) steps are excluded.

    Args:
        model: a compiled keras.Model.
        dataset: a tf.data.Dataset of batches (repeated as needed).
        steps: timed steps.
        warmup: untimed steps before timing.

    Returns:
        Mean seconds per step.
    """
    iterator = iter(dataset.repeat())
    model.fit(dataset.repeat(), steps_per_epoch=warmup, epochs=1, verbose=0)
    train_function = model.make_train_function()
    batches = [next(iterator) for _ in range(steps)]
    # The first call on a one-batch iterator traces the step again (a new input
    # signature; measured 0.59 s on a small model): keep it off the clock.
    logs = train_function(iter([batches[0]]))
    float(next(iter(logs.values())) if isinstance(logs, dict) else 0.0)
    start = time.perf_counter()
    for batch in batches:
        logs = train_function(iter([batch]))
    # Force completion of the last step before stopping the clock.
    float(next(iter(logs.values())) if isinstance(logs, dict) else 0.0)
    return (time.perf_counter() - start) / steps


#: Benchmark budgets; every registry function takes one of these as its only argument.
MODES = ("quick", "medium", "full")


def run(kind, registries, argv=None):
    """Command-line runner shared by `benchmarks.speed` and `benchmarks.quality`."""
    available = {}
    for registry in registries:
        available.update(registry)
    parser = argparse.ArgumentParser(prog=f"python -m benchmarks.{kind}")
    parser.add_argument("--models", default=",".join(available),
                        help="comma-separated subset of: " + ", ".join(available))
    parser.add_argument("--mode", choices=MODES, default="full",
                        help="quick: small subset and sizes, minutes; medium: the whole corpus "
                             "at sizes a 2-core CPU trains in about an hour; full: the papers' "
                             "sizes, many hours (default)")
    parser.add_argument("--quick", dest="mode", action="store_const", const="quick",
                        help="same as --mode quick")
    parser.add_argument("--out", default=None, help="JSON file to write (default: stdout)")
    args = parser.parse_args(argv)
    names = [name.strip() for name in args.models.split(",") if name.strip()]
    unknown = [name for name in names if name not in available]
    if unknown:
        parser.error(f"unknown model(s) {unknown}; available: {', '.join(available)}")
    records = []
    for name in names:
        start = time.perf_counter()
        try:
            new = available[name](args.mode)
        except MissingData as error:
            print(f"[{kind}] {name}: skipped, {error}", file=sys.stderr)
            continue
        for item in new:
            item.setdefault("config", {})
            item["config"].setdefault("mode", args.mode)
            item["config"].setdefault("host", platform.node())
        records.extend(new)
        print(f"[{kind}] {name}: {len(new)} record(s) in {time.perf_counter() - start:.0f} s",
              file=sys.stderr)
        for item in new:
            print(f"    {item['model']:<14} {item['metric']:<12} {item['value']!s:<24}"
                  f" ratio {item['ratio']}", file=sys.stderr)
    text = json.dumps(portable(records), indent=1)
    if args.out:
        pathlib.Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        pathlib.Path(args.out).write_text(text + "\n")
    else:
        print(text)
    return records
