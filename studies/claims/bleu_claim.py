"""rGBN-RNN's generation claim with uncertainty: test-BLEU and self-BLEU (issue 53).

Guo et al. (2020, Fig. 3 and Appendices E/F) report that rGBN-RNN's generated sentences have
a higher test-BLEU (closer to real text) *and* a lower self-BLEU (more diverse) than
GBN-RNN's and the LSTM baselines'. This module scores converged APNEWS models of the
comparison study (`studies.study.protocol`: the same ``tfktopic train`` commands, each
training seed of each arm's chosen configuration) over several generation seeds, and decides
each comparison with an interval.

Protocol (the same for every model):

* sentences are drawn by ancestral sampling from the model (``method="sample"``,
  temperature 1, ``<unk>`` allowed, as it is in the references: the test split is scored
  with the run's LM vocabulary; `SETTINGS` adds top-10 sampling as a sensitivity check),
  at most `MAX_LEN` tokens, `NUM_SENTENCES` per generation
  seed, seeds `GENERATION_SEEDS`; the topic models draw each sentence's topics from their
  prior (no conditioning); ``<eos>`` ends a sentence and is not scored;
* test-BLEU-n: each generated sentence against every sentence of the run's test split
  (Texygen semantics, `tfktopic.evaluation.bleu`), averaged; self-BLEU-n: each generated
  sentence against the other sentences of its seed's set, averaged;
* per model: mean +- sd; per comparison: the difference of the means with a Welch
  t-interval (95 %). When both arms have at least two training seeds, the unit is the
  training seed (each seed's mean over its generation seeds): the interval covers the
  training seed and the sampling of sentences. With one training seed in either arm it falls
  back to the generation seeds of that seed and covers only the sampling of sentences (the
  `units` field of each row says which). Inside the interval is "inconclusive".

Usage::

    python -m studies.claims.bleu_claim train [--arms ...] [--seeds 1 2]
        # retrain the study's runs into runs/bleu/<arm>-s<seed> (resumable) and score them
    python -m studies.claims.bleu_claim score RUN_DIR --arm ARM [--seed S] [--setting sample|top_k10]
        # -> results/bleu_claim/<setting>/<arm>.json (seed 0) or <arm>-s<S>.json
    python -m studies.claims.bleu_claim report [--setting ...]   # -> .../<setting>/summary.{json,md}
        # and the verdict rows of every setting into docs/results/study.md (`paste_verdicts`)
"""

import argparse
import json
import math
import pathlib
import statistics
import time

from studies.common import paste_between

REPO = pathlib.Path(__file__).resolve().parents[2]
RESULTS = REPO / "studies" / "results" / "bleu_claim"
ORDERS = (3, 4)
NUM_SENTENCES = 1000
GENERATION_SEEDS = (0, 1, 2, 3, 4)
MAX_LEN = 30
#: Generation settings, the same for every model: ancestral sampling (the primary protocol)
#: and, as a sensitivity check, the package's default of sampling among the 10 most likely.
SETTINGS = {"sample": {"method": "sample", "temperature": 1.0, "allow_unk": True},
            "top_k10": {"method": "top_k", "top_k": 10, "temperature": 1.0, "allow_unk": True}}
#: The comparisons of the claim: (claimed better, other).
CLAIMS = (("rgbn_rnn_1", "gbn_rnn_1"), ("rgbn_rnn_1", "lstm"), ("gbn_rnn_1", "lstm"),
          ("rgbn_rnn_1_preceding", "gbn_rnn_1"), ("rgbn_rnn_1_preceding", "lstm"),
          ("rgbn_rnn_1", "gbn_rnn_3"))
#: Student t quantiles (0.975) by degrees of freedom, for the Welch interval.
_T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
         9: 2.262, 10: 2.228, 12: 2.179, 15: 2.131, 20: 2.086, 30: 2.042}


def _tokens(rows, lm_vocab):
    """LM id rows -> token lists, cut at the first ``<eos>`` (id 2), padding dropped."""
    sentences = []
    for row in rows:
        words = []
        for i in row:
            i = int(i)
            if i == 2:
                break
            if i > 1:
                words.append(lm_vocab.id_to_token(i))
        sentences.append(words)
    return sentences


def references(run):
    """The run's test-split sentences in its LM vocabulary (``<unk>`` for unknown words)."""
    from tfktopic.runs import run_splits

    return [list(run.lm_vocab.map_unknown(sentence))
            for document in run_splits(run.config)["test"].documents for sentence in document
            if sentence]


def _study_record(arm, seed=0):
    """The study record (a seed of the arm's chosen configuration) whose command trained it."""
    from studies.study.protocol import chosen_config, record_path

    return str(record_path("apnews", arm, chosen_config("apnews", arm), seed).relative_to(REPO))


def arm_record_path(setting, arm, seed=0):
    """``results/bleu_claim/<setting>/<arm>.json`` for training seed 0 (the first records'
    name), ``<arm>-s<seed>.json`` for the others."""
    return RESULTS / setting / (f"{arm}.json" if int(seed) == 0 else f"{arm}-s{int(seed)}.json")


def score(run_dir, arm, setting="sample", out=None, seed=0):
    """Generate and score one run's sentences; write `arm_record_path`'s file.

    Args:
        run_dir: the run (trained by the study's command of `arm` and training `seed`).
        arm: the study arm.
        setting: a key of `SETTINGS`.
        out: another output path.
        seed: the training seed of the run.
    """
    from tfktopic.evaluation.bleu import BleuScorer, SelfBleuScorer
    from tfktopic.runs import load_run

    run = load_run(run_dir)
    refs = references(run)
    scorer = BleuScorer(refs, max_order=max(ORDERS))
    record = {"arm": arm, "training_seed": int(seed), "model": run.name,
              "run_dir": str(run_dir),
              "run": {key: run.config.get(key) for key in (
                  "model", "preset", "corpus", "seed", "split_seed", "data", "training")},
              "study_record": _study_record(arm, seed), "num_references": len(refs),
              "setting": setting, "generation": {**SETTINGS[setting], "max_len": MAX_LEN, "num_sentences": NUM_SENTENCES,
                             "seeds": list(GENERATION_SEEDS), "conditioning": "the prior"},
              "seeds": {}}
    results = run_dir / "results.json"
    if results.exists():
        record["test_perplexity"] = json.loads(results.read_text())["test"]["perplexity"]
    study = REPO / record["study_record"]
    if study.exists():   # the study's own run of this command: a retrained run should match
        record["study_test_perplexity"] = json.loads(study.read_text())["test"]["perplexity"]
    for generation_seed in GENERATION_SEEDS:
        start = time.time()
        # LM ids, never the attached tokenizer's detokenised text: the references are token
        # lists, and text re-split on spaces glues punctuation to words ("million?").
        ids = run.model.generate(num_sentences=NUM_SENTENCES, max_len=MAX_LEN,
                                 seed=generation_seed, tokenizer=False, **SETTINGS[setting])
        hyps = _tokens(ids, run.lm_vocab)
        empty = sum(1 for h in hyps if not h)
        hyps = [h for h in hyps if h]
        self_scorer = SelfBleuScorer(hyps, max_order=max(ORDERS))
        entry = {"empty_dropped": empty, "num_scored": len(hyps),
                 "mean_length": statistics.fmean(len(h) for h in hyps),
                 "unk_fraction": sum(h.count("<unk>") for h in hyps) / sum(map(len, hyps)),
                 "examples": [" ".join(h) for h in hyps[:5]]}
        for n in ORDERS:
            entry[f"test_bleu_{n}"] = statistics.fmean(scorer.sentence_scores(hyps, n=n))
            entry[f"self_bleu_{n}"] = statistics.fmean(self_scorer.sentence_scores(n=n))
        entry["seconds"] = round(time.time() - start, 1)
        record["seeds"][str(generation_seed)] = entry
        print(f"{arm} s{seed}, generation seed {generation_seed}: " + ", ".join(
            f"{k} {entry[k]:.4f}" for k in entry if "bleu" in k), flush=True)
    out = pathlib.Path(out) if out else arm_record_path(setting, arm, seed)
    out.parent.mkdir(parents=True, exist_ok=True)
    # The shared data folder as the study's commands name it (relative to the repository).
    text = json.dumps(record, indent=1).replace(str(REPO.parent / "shared"), "../shared")
    out.write_text(text.replace(str(REPO) + "/", "") + "\n")
    return record


def _t975(df):
    """The 0.975 t quantile at the tabulated degrees of freedom just below `df`
    (conservative: a wider interval); 2.042 beyond 30."""
    return _T975[max([key for key in _T975 if key <= max(df, 1)])]


def welch(a, b):
    """Difference of means a - b with its 95 % Welch t-interval: (diff, low, high)."""
    ma, mb = statistics.fmean(a), statistics.fmean(b)
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    se = math.sqrt(va + vb)
    if se == 0.0:
        return ma - mb, ma - mb, ma - mb
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    half = _t975(df) * se
    return ma - mb, ma - mb - half, ma - mb + half


#: The claim as the paper makes it, beside our rows (Guo et al. 2020, Fig. 3 plots the scores
#: as bars, without intervals or seeds).
PAPER_FIGURE = ("Guo et al. 2020, Fig. 3: rGBN-RNN has the highest test-BLEU and the lowest "
                "self-BLEU of all models (bars, one run, no interval)")
#: docs/results/study.md's markers around the generated verdict rows.
MARKERS = ("<!-- claim:bleu -->", "<!-- /claim:bleu -->")


def joint_verdict(quality, diversity):
    """The claim "better (higher test-BLEU) AND more diverse (lower self-BLEU)".

    Held when both parts are held, not held when either is not held, otherwise
    inconclusive.
    """
    if "not held" in (quality, diversity):
        return "not held"
    return "held" if quality == diversity == "held" else "inconclusive"


def verdict_markdown(summaries):
    """The claim's verdict rows of every setting's summary (dict setting -> summary)."""
    lines = ["| comparison (claimed better first) | generation | BLEU-n | test-BLEU difference "
             "[95 % CI] | self-BLEU difference [95 % CI] | better and more diverse? | "
             "interval over |",
             "|---|---|---|---|---|---|---|"]
    for setting, summary in summaries.items():
        rows = {(row["claim"], row["metric"]): row for row in summary["claims"]}
        for claim in dict.fromkeys(row["claim"] for row in summary["claims"]):
            for n in ORDERS:
                test, own = rows[(claim, f"test_bleu_{n}")], rows[(claim, f"self_bleu_{n}")]
                cells = [f"{r['difference']:+.4f} [{r['low']:+.4f}, {r['high']:+.4f}] "
                         f"{r['verdict']}" for r in (test, own)]
                lines.append(f"| {claim} | {setting} | {n} | {cells[0]} | {cells[1]} | "
                             f"{joint_verdict(test['verdict'], own['verdict'])} | "
                             f"{test.get('units', 'generation seeds')} |")
    return "\n".join(lines) + "\n"


def paste_verdicts(path=None, results=RESULTS):
    """Write every setting's verdict rows between `MARKERS` of docs/results/study.md.

    Returns:
        bool: whether the markers were there (without them nothing is written).
    """
    path = pathlib.Path(path) if path else REPO / "docs" / "results" / "study.md"
    results = pathlib.Path(results)
    summaries = {setting: json.loads((results / setting / "summary.json").read_text())
                 for setting in SETTINGS if (results / setting / "summary.json").exists()}
    return paste_between(path, MARKERS,
                         f"\nThe paper: {PAPER_FIGURE}.\n\n{verdict_markdown(summaries)}")


def verdict(low, high, better_is_higher):
    """'held' / 'not held' / 'inconclusive' for a claimed direction."""
    if low > 0.0:
        return "held" if better_is_higher else "not held"
    if high < 0.0:
        return "not held" if better_is_higher else "held"
    return "inconclusive"


def _units(better, other, metric):
    """The samples a comparison's interval is over: (values of `better`, of `other`, the unit).

    With at least two training seeds in both arms, one value per training seed (the mean of
    its generation seeds); otherwise the generation seeds of each arm's first training seed.
    """
    if min(len(better["training_seeds"]), len(other["training_seeds"])) >= 2:
        return ([statistics.fmean(v) for v in better["values"][metric].values()],
                [statistics.fmean(v) for v in other["values"][metric].values()],
                "training seeds")
    return better["first_values"][metric], other["first_values"][metric], "generation seeds"


def report(setting="sample", results=RESULTS, page=None):
    """Per-arm table and claim rows from a setting's arm records -> its summary.{json,md},
    and every setting's verdict rows into `page` (default docs/results/study.md)."""
    root, results = pathlib.Path(results), pathlib.Path(results) / setting
    records = {}                                    # arm -> training seed -> record
    for path in sorted(results.glob("*.json")):
        if path.stem != "summary":
            record = json.loads(path.read_text())
            records.setdefault(record["arm"], {})[int(record.get("training_seed", 0))] = record
    metrics = [f"{kind}_bleu_{n}" for n in ORDERS for kind in ("test", "self")]
    arms = {}
    for arm, by_seed in records.items():
        # per training seed, its generation seeds' scores (and their mean)
        values = {m: {seed: [s[m] for s in r["seeds"].values()] for seed, r in by_seed.items()}
                  for m in metrics}
        pooled = {m: [v for seed in sorted(by_seed) for v in values[m][seed]] for m in metrics}
        arms[arm] = {m: {"mean": statistics.fmean(v), "sd": statistics.stdev(v), "n": len(v)}
                     for m, v in pooled.items()}
        arms[arm]["training_seeds"] = sorted(by_seed)
        arms[arm]["values"] = values
        arms[arm]["test_perplexity"] = {seed: r.get("test_perplexity")
                                        for seed, r in sorted(by_seed.items())}
        arms[arm]["first_values"] = {m: values[m][min(by_seed)] for m in metrics}
    rows = []
    for better, other in CLAIMS:
        if better not in arms or other not in arms:
            continue
        for m in metrics:
            a, b, units = _units(arms[better], arms[other], m)
            diff, low, high = welch(a, b)
            rows.append({"claim": f"{better} vs {other}", "metric": m, "difference": diff,
                         "low": low, "high": high, "units": units,
                         "verdict": verdict(low, high, better_is_higher=m.startswith("test"))})
    summary = {"protocol": __doc__.split("Usage::")[0].strip(), "arms": {
        arm: {k: v for k, v in a.items() if k not in ("values", "first_values")}
        for arm, a in arms.items()}, "claims": rows}
    (results / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    lines = ["| arm | training seeds | " + " | ".join(metrics) + " |",
             "|---|---|" + "---:|" * len(metrics)]
    for arm, a in arms.items():
        lines.append(f"| {arm} | {', '.join(map(str, a['training_seeds']))} | " + " | ".join(
            f"{a[m]['mean']:.4f} +- {a[m]['sd']:.4f}" for m in metrics) + " |")
    lines += ["", "| claim (first is claimed better) | metric | difference [95 % CI] | verdict "
              "| interval over |", "|---|---|---|---|---|"]
    for row in rows:
        lines.append(f"| {row['claim']} | {row['metric']} | {row['difference']:+.4f} "
                     f"[{row['low']:+.4f}, {row['high']:+.4f}] | {row['verdict']} | "
                     f"{row['units']} |")
    (results / "summary.md").write_text("\n".join(lines) + "\n")
    paste_verdicts(page, root)
    print("\n".join(lines))
    return summary


#: The arms whose sentences the claims compare (every arm of `CLAIMS`).
ARMS = tuple(dict.fromkeys(arm for claim in CLAIMS for arm in claim))
#: Where `train` keeps its runs (not committed; each resumes from its checkpoint).
RUNS = REPO / "runs" / "bleu"


def train(arms=ARMS, seeds=(1, 2), settings=tuple(SETTINGS), runs=RUNS, runner=None):
    """Retrain the study's APNEWS runs whose models are gone and score them.

    Each (arm, training seed) is trained by the study's own command
    (`studies.study.protocol.command` with the arm's chosen configuration, the study's
    split seed) into ``runs/<arm>-s<seed>`` -- resumed from its checkpoint when
    interrupted -- then scored under every setting (`score`). Runs whose records exist
    under every setting are skipped; a run that fails is reported and left for the next
    call.

    Args:
        arms: study arms (default `ARMS`).
        seeds: training seeds (seed 0's models were scored first).
        settings: keys of `SETTINGS`.
        runs: the folder of the runs.
        runner: ``runner(cmd, log_file) -> exit code`` (default: a subprocess).

    Returns:
        list of (arm, seed, status) with status "recorded", "skipped" or "exit N".
    """
    import subprocess

    from studies.study.protocol import chosen_config, command

    def subprocess_runner(cmd, log):
        return subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT).returncode

    runner = runner or subprocess_runner
    done = []
    for seed in seeds:
        for arm in arms:
            todo = [name for name in settings if not arm_record_path(name, arm, seed).exists()]
            if not todo:
                done.append((arm, seed, "skipped"))
                continue
            out = pathlib.Path(runs) / f"{arm}-s{seed}"
            if not (out / "results.json").exists():
                config = chosen_config("apnews", arm)
                if config is None:
                    raise ValueError(f"{arm}: the study has not chosen its configuration")
                out.mkdir(parents=True, exist_ok=True)
                with open(out / "train.log", "a") as log:
                    code = runner(command("apnews", arm, config, seed, out), log)
                if code != 0 or not (out / "results.json").exists():
                    print(f"{arm} s{seed}: exit {code} (see {out / 'train.log'})", flush=True)
                    done.append((arm, seed, f"exit {code}"))
                    continue
            for name in todo:
                score(out, arm, name, seed=seed)
            done.append((arm, seed, "recorded"))
    return done


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("action", choices=["train", "score", "report"])
    parser.add_argument("--arms", nargs="+", default=list(ARMS), help="train: study arms")
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2],
                        help="train: training seeds")
    parser.add_argument("run_dir", nargs="?")
    parser.add_argument("--arm")
    parser.add_argument("--setting", choices=sorted(SETTINGS), default="sample")
    parser.add_argument("--out")
    parser.add_argument("--seed", type=int, default=0, help="score: the run's training seed")
    args = parser.parse_args(argv)
    if args.action == "train":
        train(args.arms, args.seeds)
    elif args.action == "score":
        if not args.run_dir or not args.arm:
            parser.error("score needs RUN_DIR and --arm")
        score(pathlib.Path(args.run_dir), args.arm, args.setting, args.out, args.seed)
    else:
        report(args.setting)


if __name__ == "__main__":
    main()
