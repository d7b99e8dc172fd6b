"""Run every benchmark of the model issues and write ``docs/results/benchmarks.md``.

Each family's speed and quality entries run in their own Python process (so one
family's memory and traced functions do not slow down or inflate the next one's),
one after another, each writing its records to
``benchmarks/results/<mode>/<kind>_<family>.json``; then `benchmarks.report` renders
every mode's records into ``docs/results/benchmarks.md``.

    python -m benchmarks.run_all --quick          # every entry, tiny sizes (minutes)
    python -m benchmarks.run_all --mode medium    # whole corpora, about an hour per family
    python -m benchmarks.run_all --mode full      # the papers' sizes (many hours)
    python -m benchmarks.run_all --render-only    # only rewrite docs/results/benchmarks.md

A missing corpus skips its entries with a message (the runner's `MissingData`); a
failing entry is reported, the others still run, and the exit status is 1.
"""

import argparse
import subprocess
import sys
import time

from benchmarks.common import MODES, REPO_ROOT
from benchmarks.report import RESULTS
from benchmarks.report import main as render_report
from benchmarks.speed import FAMILIES, MODULES

#: Entries left out of a mode, with the reason printed when they are skipped.
SKIPPED = {
    "medium": {"tcnlm_moe": "the naive mixture of experts runs one LSTM per topic (50 at "
                            "medium size, about 50x an LSTM's cost); its quick-mode numbers "
                            "stand for Table 6"},
}


def entries(family, kind):
    """Names of the `kind` ("speed" or "quality") entries of a benchmark family."""
    return list(getattr(MODULES[family], kind.upper(), {}))


def run_family(family, kind, mode, out_dir):
    """One family's entries of one kind in a subprocess; returns (status, seconds)."""
    names = [n for n in entries(family, kind) if n not in SKIPPED.get(mode, {})]
    for name in set(entries(family, kind)) & set(SKIPPED.get(mode, {})):
        print(f"[run_all] {kind} {name}: skipped in mode {mode}: {SKIPPED[mode][name]}",
              flush=True)
    if not names:
        return 0, 0.0
    short = family.rsplit(".", 1)[-1]
    out = out_dir / f"{kind}_{short}.json"
    command = [sys.executable, "-m", f"benchmarks.{kind}", "--mode", mode,
               "--models", ",".join(names), "--out", str(out)]
    print(f"[run_all] {' '.join(command[1:])}", flush=True)
    start = time.perf_counter()
    status = subprocess.call(command, cwd=REPO_ROOT)
    return status, time.perf_counter() - start


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run_all",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=MODES, default="full")
    parser.add_argument("--quick", dest="mode", action="store_const", const="quick",
                        help="same as --mode quick")
    parser.add_argument("--kinds", default="speed,quality",
                        help="comma-separated subset of speed,quality")
    parser.add_argument("--families", default=",".join(f.rsplit(".", 1)[-1] for f in FAMILIES),
                        help="comma-separated subset of the benchmark modules")
    parser.add_argument("--render-only", action="store_true",
                        help="do not run anything; rewrite docs/results/benchmarks.md from the records")
    args = parser.parse_args(argv)
    failures = []
    if not args.render_only:
        out_dir = RESULTS / args.mode
        out_dir.mkdir(parents=True, exist_ok=True)
        wanted = {f.strip() for f in args.families.split(",") if f.strip()}
        total = time.perf_counter()
        for family in FAMILIES:
            if family.rsplit(".", 1)[-1] not in wanted:
                continue
            for kind in [k.strip() for k in args.kinds.split(",") if k.strip()]:
                status, seconds = run_family(family, kind, args.mode, out_dir)
                print(f"[run_all] {family} {kind}: exit {status} in {seconds:.0f} s", flush=True)
                if status:
                    failures.append(f"{family} {kind}")
        print(f"[run_all] mode {args.mode}: {time.perf_counter() - total:.0f} s in all",
              flush=True)
    render_report([])
    if failures:
        print(f"[run_all] failed: {', '.join(failures)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
