"""TensorFlow's CPU allocator: the default one against the BFC one tfktopic turns on.

`tfktopic/startup.py` sets ``TF_CPU_ALLOCATOR_USE_BFC=true`` (unless the user set it) because
TensorFlow's default CPU allocator returns each large freed tensor to the system, and every
training step then faults its pages in again. This benchmark trains the same run with each
setting, one process each, in alternation, and records what the kernel counted for it
(``wait4``'s resource usage: user and system CPU seconds, minor page faults, peak RSS) and
the epoch time Keras printed.

Usage::

    python -m benchmarks.cpu_allocator [--rounds 1] [--out benchmarks/results/cpu_allocator.json]

The run: one epoch of ``tfktopic train lstm`` (the `small` preset) on War and Peace
(``../shared/data``), one TensorFlow thread.
"""

import argparse
import json
import os
import pathlib
import platform
import re
import subprocess
import sys
import tempfile
import time

from studies.common import SHARED_DATA

REPO = pathlib.Path(__file__).resolve().parents[1]
CORPUS = SHARED_DATA / "war_and_peace" / "warpeace_input.txt"
SETTINGS = ("false", "true")
_EPOCH = re.compile(r"^\s*(\d+)/\1 - (\d+)s - (\d+)ms/step", re.M)


def measure(setting, out):
    """One epoch under ``TF_CPU_ALLOCATOR_USE_BFC=setting``: the kernel's counts for it."""
    cmd = [sys.executable, "-m", "tfktopic", "train", "lstm", "--corpus", str(CORPUS),
           "--format", "text", "--epochs", "1", "--seed", "0", "--out", str(out),
           "--verbose", "2"]
    env = {**os.environ, "TF_CPU_ALLOCATOR_USE_BFC": setting, "TF_NUM_INTRAOP_THREADS": "1",
           "TF_NUM_INTEROP_THREADS": "1", "KERAS_BACKEND": "tensorflow"}
    env.pop("LD_PRELOAD", None)
    start = time.perf_counter()
    with open(pathlib.Path(out).with_suffix(".log"), "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    text = pathlib.Path(out).with_suffix(".log").read_text()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"TF_CPU_ALLOCATOR_USE_BFC={setting}: exit "
                         f"{os.waitstatus_to_exitcode(status)}\n{text[-2000:]}")
    epoch = _EPOCH.search(text)
    return {"setting": setting, "wall_s": round(wall, 1),
            "user_s": round(usage.ru_utime, 1), "sys_s": round(usage.ru_stime, 1),
            "minor_faults": usage.ru_minflt, "peak_rss_mb": round(usage.ru_maxrss / 1024),
            "epoch_s": int(epoch.group(2)) if epoch else None,
            "ms_per_step": int(epoch.group(3)) if epoch else None,
            "steps": int(epoch.group(1)) if epoch else None}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" /
                                             "cpu_allocator.json"))
    args = parser.parse_args(argv)
    if not CORPUS.exists():
        raise SystemExit(f"{CORPUS} is absent (the shared data folder): nothing to measure")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for setting in SETTINGS:
                row = {"round": r, **measure(setting, pathlib.Path(tmp) / f"{setting}-{r}")}
                rows.append(row)
                print(json.dumps(row), flush=True)
    load = os.getloadavg()
    record = {"what": __doc__.split("\n")[0], "command": "python -m benchmarks.cpu_allocator "
              f"--rounds {args.rounds}", "machine": {"cpus": os.cpu_count(),
              "processor": platform.processor() or platform.machine(),
              "kernel": platform.release(), "load_average_at_end": [round(x, 2) for x in load]},
              "rows": rows}
    pathlib.Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    print(f"written {args.out}")


if __name__ == "__main__":
    main()
