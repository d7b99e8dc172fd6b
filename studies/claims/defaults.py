"""The defaults on corpora nobody tuned them on (issue 51: a newcomer's first hour).

Every family is trained exactly as a new user would: ``tfktopic train FAMILY --corpus FILE``
with nothing else (the default preset, ``small``), on corpora the defaults were NOT tuned on,
and judged against three criteria:

* topics: the NPMI of its top-10 words >= 0.9 x that of a gensim LDA with the same number of
  topics on the same training split (both from the run's own quality report: NPMI against the
  training split, window 20);
* language model: test perplexity (leak-free contexts) no worse than the sentence LSTM's of
  the same size (the shared small LM) on the same split;
* the streamed document LSTM beats the sentence LSTM.

The defaults were tuned on APNEWS (the ``coherent`` presets' measurements) and on Lee (the
tests' corpus); they are reported here on `CORPORA`, which none of that tuning saw. Each
run resumes from its ``--out`` directory; a finished run's numbers are recorded in
``studies/results/defaults/<corpus>/<family>-s<seed>.json`` with its command.

Usage::

    python -m studies.claims.defaults run --corpus war_and_peace imdb [--seeds 0 1 2]
    python -m studies.claims.defaults report     # -> results/defaults/summary.md
"""

import argparse
import json
import pathlib
import statistics
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]
RESULTS = REPO / "studies" / "results" / "defaults"
RUNS = REPO / "runs" / "defaults"
#: corpus -> (shared data file, ``tfktopic train`` corpus arguments). Held out from the tuning.
CORPORA = {
    "war_and_peace": ("war_and_peace/warpeace_input.txt", ["--format", "text"]),
    "imdb": ("imdb/aclImdb_reviews.jsonl.gz",
             ["--format", "imdb", "--max-documents", "2000", "--subset-seed", "0"]),
}
#: The families a user trains; the two LSTMs are the baselines of the criteria.
TOPIC_FAMILIES = ("tcnlm", "topicrnn", "rgbn_rnn", "gbn_rnn")
FAMILIES = ("lstm", "doc_lstm") + TOPIC_FAMILIES
#: NPMI of a family's topics must reach this share of LDA's.
NPMI_SHARE = 0.9


def command(corpus, family, seed, out):
    """The user's command: no preset, no option but the corpus, the seed and --out."""
    path, extra = CORPORA[corpus]
    data = REPO.parent / "shared" / "data" / path
    return [sys.executable, "-m", "tfktopic", "train", family, "--corpus", str(data), *extra,
            "--seed", str(seed), "--out", str(out), "--verbose", "2"]


def record_path(corpus, family, seed, results=RESULTS):
    return pathlib.Path(results) / corpus / f"{family}-s{seed}.json"


def summarize(results_json, cmd):
    """The numbers of a finished run's ``results.json`` that the criteria need."""
    result = json.loads(pathlib.Path(results_json).read_text())
    quality = result.get("topic_quality") or {}
    return {"model": result["model"], "preset": result["preset"], "seed": result["seed"],
            "test_ppl": result["test"]["perplexity"],
            "npmi": (quality.get("model") or {}).get("npmi"),
            "lda_npmi": (quality.get("lda") or {}).get("npmi"),
            "diversity": (quality.get("model") or {}).get("diversity"),
            "training": result.get("training"),
            "command": " ".join(["tfktopic"] + [str(c) for c in cmd[3:]]).replace(
                str(REPO.parent / "shared"), "../shared")}


def run(corpora, seeds, runs=RUNS, results=RESULTS):
    """Train (or resume) every family on every corpus and seed; record each finished run."""
    for corpus in corpora:
        data = REPO.parent / "shared" / "data" / CORPORA[corpus][0]
        if not data.exists():
            print(f"{corpus}: {data} is absent (the shared data folder); skipped", flush=True)
            continue
        for seed in seeds:
            for family in FAMILIES:
                target = record_path(corpus, family, seed, results)
                if target.exists():
                    continue
                out = pathlib.Path(runs) / corpus / f"{family}-s{seed}"
                cmd = command(corpus, family, seed, out)
                out.mkdir(parents=True, exist_ok=True)
                with open(out / "train.log", "a") as log:
                    code = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT).returncode
                if code != 0 or not (out / "results.json").exists():
                    print(f"{corpus} {family} s{seed}: exit {code} (see {out / 'train.log'})",
                          flush=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(json.dumps(summarize(out / "results.json", cmd), indent=1)
                                  + "\n")
                print(f"{corpus} {family} s{seed}: recorded {target.relative_to(REPO)}",
                      flush=True)


def _mean(values):
    values = [v for v in values if v is not None]
    return statistics.fmean(values) if values else None


def verdicts(records):
    """Criteria of one corpus from its records (dict family -> list of records).

    Returns:
        list of dicts: ``criterion``, ``family``, ``value``, ``target``, ``passed``
        (`None` while a needed family has no record).
    """
    rows = []
    lstm = _mean([r["test_ppl"] for r in records.get("lstm", [])])
    for family in TOPIC_FAMILIES:
        runs = records.get(family, [])
        npmi, lda = _mean([r["npmi"] for r in runs]), _mean([r["lda_npmi"] for r in runs])
        ok = None if npmi is None or lda is None else npmi >= NPMI_SHARE * lda
        rows.append({"criterion": f"NPMI >= {NPMI_SHARE} x LDA", "family": family,
                     "value": npmi, "target": None if lda is None else NPMI_SHARE * lda,
                     "passed": ok})
        ppl = _mean([r["test_ppl"] for r in runs])
        rows.append({"criterion": "test PPL <= sentence LSTM", "family": family, "value": ppl,
                     "target": lstm,
                     "passed": None if ppl is None or lstm is None else ppl <= lstm})
    doc = _mean([r["test_ppl"] for r in records.get("doc_lstm", [])])
    rows.append({"criterion": "test PPL < sentence LSTM", "family": "doc_lstm", "value": doc,
                 "target": lstm, "passed": None if doc is None or lstm is None else doc < lstm})
    return rows


def report(results=RESULTS):
    """Per corpus: every family's numbers (mean over its seeds) and the criteria."""
    lines = ["| corpus | family | seeds | test PPL | NPMI | LDA NPMI | diversity |",
             "|---|---|---|---|---|---|---|"]
    criteria = ["", "| corpus | criterion | family | ours | target | passed |",
                "|---|---|---|---|---|---|"]
    fmt = lambda v, spec=".3f": "--" if v is None else format(v, spec)
    summary = {}
    for corpus in CORPORA:
        records = {}
        for path in sorted((pathlib.Path(results) / corpus).glob("*-s*.json")):
            record = json.loads(path.read_text())
            records.setdefault(record["model"], []).append(record)
        if not records:
            continue
        for family in FAMILIES:
            runs = records.get(family, [])
            lines.append(f"| {corpus} | {family} | {len(runs)} | "
                         f"{fmt(_mean([r['test_ppl'] for r in runs]), '.2f')} | "
                         f"{fmt(_mean([r['npmi'] for r in runs]))} | "
                         f"{fmt(_mean([r['lda_npmi'] for r in runs]))} | "
                         f"{fmt(_mean([r['diversity'] for r in runs]), '.2f')} |")
        rows = verdicts(records)
        summary[corpus] = rows
        for row in rows:
            passed = "pending" if row["passed"] is None else ("yes" if row["passed"] else "NO")
            spec = ".3f" if row["criterion"].startswith("NPMI") else ".2f"
            criteria.append(f"| {corpus} | {row['criterion']} | {row['family']} | "
                            f"{fmt(row['value'], spec)} | {fmt(row['target'], spec)} | {passed} |")
    text = "\n".join(lines + criteria) + "\n"
    pathlib.Path(results).mkdir(parents=True, exist_ok=True)
    (pathlib.Path(results) / "summary.md").write_text(text)
    (pathlib.Path(results) / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(text)
    return summary


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("action", choices=["run", "report"])
    parser.add_argument("--corpus", nargs="+", default=list(CORPORA), choices=sorted(CORPORA))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    args = parser.parse_args(argv)
    if args.action == "run":
        run(args.corpus, args.seeds)
    else:
        report()
    return 0


if __name__ == "__main__":
    sys.exit(main())
