"""Tables of the comparison study, from its committed run records alone (DESIGN.md §5a).

``python -m studies.study.report --corpus CORPUS`` reads ``studies/results/study/<corpus>/*/*.json``
(written by `studies.study.scheduler` as each run finishes) and writes

* ``studies/results/study/<corpus>_summary.json`` -- per arm: the chosen
  configuration, test perplexity per seed, mean +- sd, epochs to convergence,
  what stopped each run; per claim: the paired document-level bootstrap
  interval of the perplexity ratio and the verdict;
* ``studies/results/study/<corpus>_summary.md`` -- the same as Markdown tables,
  which `benchmarks.report` includes in docs/results/benchmarks.md and `paste` writes into docs/results/study.md
  between its ``<!-- study:<corpus> -->`` and ``<!-- /study:<corpus> -->`` lines.

The baselines' budget sensitivity (their runs on the rest of the grid, seed 0) is a third
table: how much lower the test perplexity of the best of the whole grid is than the tuned
choice's.

A verdict needs both arms complete: the tuning done, 3 seeds of the chosen
configuration, every one stopped by early stopping (converged). Then, with
ratio = PPL(claimed better) / PPL(other) and its 95 % interval:
"held" if the interval lies below 1, "not held" if it lies above 1,
"inconclusive" if it contains 1. Otherwise the row says what is missing.

Each claim is also compared under the papers' protocol (topic context = every other
sentence of the document; `studies.study.protocol.PAPERS_PROTOCOL`), with the same rule, once
every seed of a topic arm has been scored that way: how much of a paper's margin its
protocol accounts for. The arm table also shows each topic model with every context empty
(`studies.study.protocol.NO_CONTEXT`): what its topics are worth to it.
"""

import argparse
import json
import pathlib
import re
import sys

import numpy as np

from studies.common import spread
from studies.study.protocol import (NO_CONTEXT, PAPERS_PROTOCOL, RESULTS, SEEDS, STUDIES, VARIANTS,
                              arms_of, base_arm, chosen_config, finished, grid, record_path,
                              sensitivity_configs)
from tfktopic.evaluation.comparison import paired_bootstrap, seed_summary
from tfktopic.models import registry

TOPIC_MODELS = registry.names("has_topics")

#: The epoch limit a corpus's paper trained under, and where it says so: the report puts
#: each arm's best validation perplexity within it next to its converged one
#: (`within_epochs`), to show what the limit did to each side of the paper's comparison.
PAPER_EPOCHS = {"ptb": (15, "Dieng et al. 2017, §4.1: at most 15 epochs")}
#: The page whose marked sections `report` rewrites (`paste`): the study's results page of
#: the documentation (they were in README.md; the name README is kept for callers).
README = RESULTS.parents[2] / "docs" / "results" / "study.md"
#: (claim, paper, better arm, other arm, the paper's figure)
CLAIMS = [
    ("TopicRNN beats an RNN of the same size", "Dieng et al. 2017", "topicrnn", "lstm",
     "PTB Table 2: 122.3 vs 142.1 (100 units); APNEWS: TCNLM Table 2 56.77 vs 64.13"),
    ("TopicRNN beats an RNN of the same size (streamed, document level)",
     "Zheng et al. 2023", "doc_topicrnn", "doc_lstm",
     "Zheng et al.: no topic-guided LM beats the document LSTM"),
    ("TopicRNN beats an RNN of the same size (Keras' initialisation)", "Dieng et al. 2017",
     "topicrnn_keras", "lstm_keras",
     "the sentence arms as first run, before every arm took Zheng et al.'s recipe"),
    ("TopicRNN beats an RNN of the same size (streamed, Keras' initialisation)",
     "Zheng et al. 2023", "doc_topicrnn_keras", "doc_lstm_keras",
     "the document arms as first run; their LSTM baseline 7.5 % weaker than Zheng et al.'s"),
    ("TCNLM beats LSTM", "Wang et al. 2018", "tcnlm", "lstm",
     "Table 2 APNEWS small, 50 topics: 52.75 vs 64.13"),
    ("TCNLM beats LDA+LSTM", "Wang et al. 2018", "tcnlm", "lda_lstm",
     "Table 2: 52.75 vs 57.05"),
    ("TCNLM beats TopicRNN", "Wang et al. 2018", "tcnlm", "topicrnn",
     "Table 2: 52.75 vs 56.77"),
    ("LDA+LSTM beats LSTM", "Lau et al. 2017 (TCNLM Table 2)", "lda_lstm", "lstm",
     "Table 2: 57.05 vs 64.13"),
    ("rGBN-RNN beats GBN-RNN (1 layer)", "Guo et al. 2020", "rgbn_rnn_1", "gbn_rnn_1",
     "Table 1: rGBN-RNN below GBN-RNN at every depth"),
    ("rGBN-RNN beats GBN-RNN (1 layer, both trained on preceding contexts)",
     "Guo et al. 2020", "rgbn_rnn_1_preceding", "gbn_rnn_1_preceding",
     "Table 1, trained with every other sentence as context (our rows above and below)"),
    ("rGBN-RNN beats GBN-RNN (3 layers, both trained on preceding contexts)",
     "Guo et al. 2020", "rgbn_rnn_3", "gbn_rnn_3", "Table 1"),
    ("more layers help rGBN-RNN (3 vs 1, both trained on preceding contexts)",
     "Guo et al. 2020", "rgbn_rnn_3", "rgbn_rnn_1_preceding",
     "Table 1: perplexity falls with depth"),
    ("more layers help GBN-RNN (3 vs 1, both trained on preceding contexts)",
     "Guo et al. 2020", "gbn_rnn_3", "gbn_rnn_1_preceding",
     "Table 1: perplexity falls with depth"),
    ("rGBN-RNN beats an LSTM of its depth (3 layers)", "Guo et al. 2020", "rgbn_rnn_3",
     "lstm_3", "Table 1"),
    # not a paper's claim: whether depth pays on this corpus at all, to read the depth rows by
    ("control: more layers help the LSTM (3 vs 1)", "none (a control)", "lstm_3", "lstm",
     "none; a 3-layer rGBN-RNN that beats lstm_3 but not lstm gains on a weak baseline"),
]
CLAIMS += [
    ("TopicRNN beats an RNN of the same size (PTB, 100 units)", "Dieng et al. 2017",
     "topicrnn_100", "rnn_100", "Table 2: 122.3 vs 142.1"),
]
#: "topic-guided models beat a document-level LSTM" (Zheng et al.'s question), one row each.
DOCUMENT_BASELINE_ARMS = ("doc_topicrnn", "topicrnn", "tcnlm", "lda_lstm", "rgbn_rnn_1",
                          "gbn_rnn_1", "rgbn_rnn_1_preceding", "gbn_rnn_1_preceding",
                          "gbn_rnn_3", "rgbn_rnn_3")


def _records(corpus, arm):
    """The chosen configuration's seed records of an arm (possibly fewer than 3)."""
    best = chosen_config(corpus, arm)
    tuning = {c: json.loads(record_path(corpus, arm, c, 0).read_text())
              for c in grid(corpus, arm) if record_path(corpus, arm, c, 0).exists()}
    if best is None:
        return None, tuning, []
    seeds = [json.loads(record_path(corpus, arm, best, s).read_text()) for s in SEEDS
             if record_path(corpus, arm, best, s).exists()]
    return best, tuning, seeds


def within_epochs(record, epochs):
    """The best validation perplexity of a run within its first `epochs` epochs (from its
    per-epoch history), or `None` if its history is empty."""
    values = [e["val_ppl"] for e in record.get("history", []) if e["epoch"] <= epochs]
    return min(values) if values else None


def _run_summary(record):
    return {"best_val_ppl": record["training"]["best_val_ppl"],
            "test_ppl": record.get("test", {}).get("perplexity"),
            "epochs": record["training"]["epochs"],
            "stopped_by": record["training"]["stopped_by"]}


def sensitivity(corpus, arm, tuning):
    """A baseline's budget sensitivity: its seed-0 runs of the whole grid, and what the
    best of them on validation scores against the tuned choice (`None` until all ran)."""
    extra = {c: json.loads(record_path(corpus, arm, c, 0).read_text())
             for c in sensitivity_configs(corpus, arm) if record_path(corpus, arm, c, 0).exists()}
    if not sensitivity_configs(corpus, arm):
        return None
    runs = {c: _run_summary(r) for c, r in {**tuning, **extra}.items()}
    result = {"runs": runs, "done": len(extra), "of": len(sensitivity_configs(corpus, arm))}
    if len(extra) == result["of"] and len(tuning) == len(grid(corpus, arm)):
        val = {c: r["best_val_ppl"] or float("inf") for c, r in runs.items()}
        best = min(val, key=val.get)
        chosen = chosen_config(corpus, arm)
        result.update(best_of_grid=best, chosen=chosen,
                      test_gain=runs[chosen]["test_ppl"] - runs[best]["test_ppl"])
    return result


def arm_summary(corpus, arm):
    best, tuning, seeds = _records(corpus, arm)
    summary = {"arm": arm, "tuning": {c: _run_summary(r) for c, r in tuning.items()},
               "tuning_done": sum(finished(corpus, arm, c, 0) for c in tuning),
               "chosen": best, "seeds": len(seeds)}
    budget = sensitivity(corpus, arm, tuning)
    if budget is not None:
        summary["sensitivity"] = budget
    if seeds:
        ppl = [r["test"]["perplexity"] for r in seeds]
        summary.update(
            test_ppl=ppl, test=seed_summary(ppl),
            best_epoch=[r["training"]["best_epoch"] for r in seeds],
            stopped_by=[r["training"]["stopped_by"] for r in seeds],
            hours=round(sum(r["training"]["seconds"] for r in seeds) / 3600, 2),
            model=seeds[0]["model"], model_config=seeds[0]["model_config"],
            settings=grid(corpus, arm)[best])
        if corpus in PAPER_EPOCHS:
            limit = PAPER_EPOCHS[corpus][0]
            summary["best_val_ppl"] = [r["training"]["best_val_ppl"] for r in seeds]
            summary["val_within_paper_epochs"] = [within_epochs(r, limit) for r in seeds]
            # tuned under the limit, an arm may choose another configuration
            summary["grid_val_within_paper_epochs"] = {
                c: within_epochs(r, limit) for c, r in tuning.items()}
        for key, name in ((PAPERS_PROTOCOL, "papers_protocol"), (NO_CONTEXT, "no_context")):
            if seeds[0]["model"] in TOPIC_MODELS and all(key in r for r in seeds):
                values = [r[key]["perplexity"] for r in seeds]
                summary.update({f"{name}_ppl": values, name: seed_summary(values)})
    # every run of an arm has the same sizes (the grid is learning rate x dropout): the
    # count is known from its first record, before its configuration is chosen
    counted = [r["parameters"] for r in [*seeds, *tuning.values()] if "parameters" in r]
    if counted:
        summary["parameters"] = counted[0]
    summary["tuned_on"] = list(grid(corpus, arm))
    if base_arm(corpus, arm):   # one run of its base arm's choice, not tuned
        summary["variant_of"] = VARIANTS[arm]
    summary["complete"] = (len(seeds) == len(SEEDS)
                           and all(s == "early_stopping" for s in summary.get("stopped_by", [])))
    return summary, seeds


def document_nll(record, protocol="leak_free"):
    """A run's per-document test NLLs under a protocol: "leak_free" (the record's
    ``test_documents``) or "papers" (`PAPERS_PROTOCOL`; a model without a topic context
    scores the same under both); `None` if the run was not scored that way."""
    if protocol == "leak_free" or record["model"] not in TOPIC_MODELS:
        return record["test_documents"]["nll"]
    if protocol != "papers":
        raise ValueError(f"protocol must be 'leak_free' or 'papers', got {protocol!r}")
    scored = record.get(PAPERS_PROTOCOL)
    return None if scored is None else scored["nll"]


def compare(a_seeds, b_seeds, protocol="leak_free"):
    """PPL(A) / PPL(B) with its bootstrap interval over seeds and paired test documents.

    Args:
        a_seeds, b_seeds: run records of the two arms (one per seed), each with
            ``test_documents`` = {"nll": [...], "tokens": [...]}.
        protocol: "leak_free" or "papers" (`document_nll`).

    Returns:
        A `PerplexityComparison` (2,000 resamples, seed 0), or `None` when a record
        was not scored under `protocol`.

    Raises:
        ValueError: the records did not score the same target tokens.
    """
    nll = [[document_nll(r, protocol) for r in seeds] for seeds in (a_seeds, b_seeds)]
    if any(v is None for side in nll for v in side):
        return None
    nll_a, nll_b = np.array(nll[0]), np.array(nll[1])
    tokens = np.array(a_seeds[0]["test_documents"]["tokens"])
    for r in list(a_seeds) + list(b_seeds):
        if r["test_documents"]["tokens"] != a_seeds[0]["test_documents"]["tokens"]:
            raise ValueError("the two arms did not score the same target tokens")
    return paired_bootstrap(nll_a, nll_b, tokens, num_resamples=2000, seed=0)


def _verdict(interval):
    low, high = interval
    if high < 1.0:
        return "held"
    if low > 1.0:
        return "not held"
    return "inconclusive"


def claim_row(claim, paper, better, other, figure, arms):
    (a, a_seeds), (b, b_seeds) = arms[better], arms[other]
    row = {"claim": claim, "paper": paper, "better": better, "other": other,
           "paper_figure": figure,
           # a ratio reads differently when one side has more weights (e.g. lstm_3 is
           # 3 x 256, rGBN-RNN 256-128-64): the counts stand next to each verdict
           "parameters": [a.get("parameters"), b.get("parameters")]}
    if not (a["complete"] and b["complete"]):
        missing = [f"{s['arm']}: "
                   + (f"variant of {s['variant_of']}" if "variant_of" in s
                      else f"tuning {s['tuning_done']}/{len(s['tuned_on'])}")
                   + f", seeds {s['seeds']}/{len(SEEDS)}"
                   + ("" if all(x == "early_stopping" for x in s.get("stopped_by", []))
                      else " (not all converged)")
                   for s in (a, b) if not s["complete"]]
        row.update(verdict="pending", missing=missing)
        if a_seeds and b_seeds:   # a provisional number, clearly labelled
            result = compare(a_seeds, b_seeds)
            row["provisional"] = {"ratio": result.ratio, "interval": [result.low, result.high],
                                  "seeds": [len(a_seeds), len(b_seeds)]}
            papers = compare(a_seeds, b_seeds, "papers")
            if papers is not None:
                row["papers_protocol"] = {"ratio": papers.ratio,
                                          "interval": [papers.low, papers.high],
                                          "seeds": [len(a_seeds), len(b_seeds)],
                                          "verdict": "pending"}
        return row
    result = compare(a_seeds, b_seeds)
    row.update(ratio=result.ratio, interval=[result.low, result.high],
               verdict=_verdict((result.low, result.high)),
               ppl=[a["test"]["mean"], b["test"]["mean"]])
    papers = compare(a_seeds, b_seeds, "papers")
    if papers is not None:
        row["papers_protocol"] = {"ratio": papers.ratio, "interval": [papers.low, papers.high],
                                  "verdict": _verdict((papers.low, papers.high)),
                                  "ppl": [float(np.mean(papers.ppl_a)),
                                          float(np.mean(papers.ppl_b))]}
    return row


def report(corpus):
    directory = RESULTS / corpus
    arms = {}
    for path in sorted(p for p in directory.iterdir() if p.is_dir()) if directory.exists() else []:
        arms[path.name] = arm_summary(corpus, path.name)
    # Every claim of the corpus's study gets a row, pending until its arms are complete.
    known = {**{arm: arm_summary(corpus, arm) for arm in arms_of(corpus)}, **arms}
    claims = [claim_row(*claim, known) for claim in CLAIMS
              if claim[2] in known and claim[3] in known]
    claims += [claim_row(f"{arm} beats the streamed document LSTM", "Zheng et al. 2023", arm,
                         "doc_lstm", "Zheng et al.: none of TDLM, TopicRNN, VRTM, rGBN-RNN does",
                         known)
               for arm in DOCUMENT_BASELINE_ARMS if arm in known and "doc_lstm" in known]
    summary = {"corpus": corpus, "protocol": "see studies/study/protocol.py",
               "arms": {name: s for name, (s, _) in arms.items()}, "claims": claims}
    (RESULTS / f"{corpus}_summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    text = markdown(summary)
    (RESULTS / f"{corpus}_summary.md").write_text(text)
    paste(text, corpus)
    print(text)
    return 0


def paste(text, corpus, readme=None):
    """Put `text` between README's ``<!-- study:<corpus> -->`` and ``<!-- /study:<corpus> -->``
    lines (the rest of the file untouched).

    Returns:
        bool: whether the markers were there (without them nothing is written).
    """
    readme = pathlib.Path(README if readme is None else readme)
    pattern = re.compile(rf"(<!-- study:{corpus} -->\n).*?(<!-- /study:{corpus} -->)", re.S)
    old = readme.read_text() if readme.exists() else ""
    if not pattern.search(old):
        return False
    text = re.sub(r"^### ", "#### ", text, flags=re.M)   # under README's own "###" heading
    readme.write_text(pattern.sub(lambda m: m.group(1) + text + m.group(2), old, count=1))
    return True


def _ci(row):
    if "interval" in row:
        return f"{row['ratio']:.3f} [{row['interval'][0]:.3f}, {row['interval'][1]:.3f}]"
    if "provisional" in row:
        p = row["provisional"]
        return (f"provisional {p['ratio']:.3f} [{p['interval'][0]:.3f}, {p['interval'][1]:.3f}]"
                f" ({p['seeds'][0]} vs {p['seeds'][1]} seeds)")
    return "--"


def _papers_ci(row):
    """The papers' protocol's cell of a claim: ratio [CI] and its verdict."""
    p = row.get("papers_protocol")
    if p is None:
        return "--"
    cell = f"{p['ratio']:.3f} [{p['interval'][0]:.3f}, {p['interval'][1]:.3f}]"
    if p["verdict"] == "pending":
        return f"provisional {cell} ({p['seeds'][0]} vs {p['seeds'][1]} seeds)"
    return f"{cell}, {p['verdict']}"


def parameters_cell(counts):
    """``2.16`` or ``2.85 + 0.38`` (millions trained by gradient + sampled); ``--`` unknown."""
    if not counts:
        return "--"
    cell = f"{counts['gradient'] / 1e6:.2f}"
    return cell + (f" + {counts['sampled'] / 1e6:.2f}" if counts["sampled"] else "")


def paper_epochs_table(summary):
    """Markdown lines: each arm's best validation perplexity within the paper's epoch limit
    (`PAPER_EPOCHS`) -- at its chosen configuration (mean over seeds), and at the
    configuration of its tuning grid that is best within the limit (seed 0: how it would
    have been tuned under the limit) -- and converged; then each claim's ratios of those
    (validation, no interval: an explanation of the paper's figure, not a verdict)."""
    corpus = summary["corpus"]
    arms = {name: s for name, s in summary["arms"].items()
            if s.get("val_within_paper_epochs") and None not in s["val_within_paper_epochs"]}
    if corpus not in PAPER_EPOCHS or not arms:
        return []
    limit, source = PAPER_EPOCHS[corpus]
    lines = ["", f"### At the paper's epoch limit ({source}): best validation perplexity, mean "
                 "+- sd over seeds (not a verdict: validation, no interval)", "",
             f"| arm | seeds | converged (chosen configuration) | within {limit} epochs, the "
             f"same configuration | within {limit} epochs, the grid's best within them "
             "(seed 0) |",
             "|---|---|---|---|---|"]
    best = {}
    for name, s in arms.items():
        grid_runs = {c: v for c, v in s["grid_val_within_paper_epochs"].items() if v is not None}
        best[name] = min(grid_runs.items(), key=lambda item: item[1])
        lines.append(f"| {name} | {s['seeds']}/{len(SEEDS)} | "
                     f"{spread(seed_summary(s['best_val_ppl']), s['seeds'])} "
                     f"(best epochs {', '.join(str(e) for e in s['best_epoch'])}) | "
                     f"{spread(seed_summary(s['val_within_paper_epochs']), s['seeds'])} | "
                     f"{best[name][1]:.2f} ({best[name][0]}) |")
    for row in summary["claims"]:
        a, b = row["better"], row["other"]
        if a in arms and b in arms:
            ratio = [float(np.mean(arms[a][key]) / np.mean(arms[b][key]))
                     for key in ("best_val_ppl", "val_within_paper_epochs")]
            lines.append(f"| {a} / {b} | | {ratio[0]:.3f} | {ratio[1]:.3f} | "
                         f"{best[a][1] / best[b][1]:.3f} |")
    return lines


def markdown(summary):
    lines = [f"### {summary['corpus']}: test perplexity (leak-free), mean +- sd over seeds",
             "", "The same models on the same targets under two other topic contexts: the "
                 "papers' protocol (every other sentence of the document, so later text leaks "
                 "in, as TDLM, TCNLM and rGBN-RNN scored) and none (every context empty: "
                 "how far this lies above the test perplexity is what the topics are worth to the "
                 "model). "
                 "Models without a topic context score the same under every protocol.",
             "", "Parameters: millions trained by gradient (+ sampled: LDA+LSTM's LDA topics, "
                 "GBN-RNN / rGBN-RNN's Phi and Pi).",
             "", "| arm | parameters (M) | chosen (lr, dropout) | seeds | test PPL | papers' "
                 "protocol | no topic context | best epoch | stopped by | tuning done | "
                 "CPU hours |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, s in summary["arms"].items():
        papers = empty = "--"
        if s["seeds"]:
            # One seed has no spread: its value, not "+- 0.00".
            test = spread(s["test"], s["seeds"])
            if s["model"] not in TOPIC_MODELS:
                papers = empty = "same"
            if "papers_protocol" in s:
                papers = spread(s["papers_protocol"], s["seeds"])
            if "no_context" in s:
                empty = spread(s["no_context"], s["seeds"])
            epochs = ", ".join(str(e) for e in s["best_epoch"])
            stopped = ", ".join(sorted(set(s["stopped_by"])))
            chosen = f"{s['settings']['learning_rate']}, {s['settings']['dropout']}"
            hours = s["hours"]
        else:
            test = epochs = stopped = chosen = hours = "--"
        tuning = (f"variant of {s['variant_of']}" if "variant_of" in s
                  else f"{s['tuning_done']}/{len(s['tuned_on'])}")
        lines.append(f"| {name} | {parameters_cell(s.get('parameters'))} | {chosen} | "
                     f"{s['seeds']}/{len(SEEDS)} | {test} | {papers} | {empty} | {epochs} | "
                     f"{stopped} | {tuning} | {hours} |")
    lines += paper_epochs_table(summary)
    budget = {name: s["sensitivity"] for name, s in summary["arms"].items()
              if "sensitivity" in s}
    if budget:
        corpus = summary["corpus"]
        common = tuple(grid(corpus))
        own = {arm: tuple(grid(corpus, arm)) for arm in arms_of(corpus)}
        tuned = f"{len(common)} configurations, {', '.join(common)}" + "".join(
            f"; {', '.join(arm for arm in own if own[arm] == other)}: {', '.join(other)}"
            for other in sorted(set(own.values()) - {common}))
        lines += ["", "### Budget sensitivity: the baselines on the whole learning rate x dropout"
                      f" grid (seed 0; the table above tunes every arm on {tuned})",
                  "", "| arm | configuration | best val PPL | test PPL | epochs | stopped by |",
                  "|---|---|---|---|---|---|"]
        for name, b in budget.items():
            for config, run in b["runs"].items():
                mark = " (chosen)" if config == b.get("chosen") else ""
                mark += " (best of grid)" if config == b.get("best_of_grid") else ""
                test = "--" if run["test_ppl"] is None else f"{run['test_ppl']:.2f}"
                val = "--" if run["best_val_ppl"] is None else f"{run['best_val_ppl']:.2f}"
                lines.append(f"| {name} | {config}{mark} | {val} | {test} | {run['epochs']} | "
                             f"{run['stopped_by']} |")
            if "test_gain" in b:
                lines.append(f"| {name} | whole grid vs tuned choice: test PPL lower by "
                             f"{b['test_gain']:.2f} | | | | |")
    lines += ["", "### Verdicts: ratio = PPL(claimed better) / PPL(other), 95 % paired "
                  "document bootstrap interval", "",
              "| claim | paper's figure | parameters (M) | ours: ratio [95 % CI] | verdict | "
              "under the papers' protocol |",
              "|---|---|---|---|---|---|"]
    for row in summary["claims"]:
        verdict = row["verdict"]
        if verdict == "pending":
            verdict = "pending: " + "; ".join(row["missing"])
        counts = " vs ".join(parameters_cell(c) for c in row["parameters"])
        lines.append(f"| {row['claim']} ({row['better']} vs {row['other']}) | "
                     f"{row['paper_figure']} | {counts} | {_ci(row)} | {verdict} | "
                     f"{_papers_ci(row)} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", default="apnews", choices=sorted(STUDIES))
    return report(parser.parse_args(argv).corpus)


if __name__ == "__main__":
    sys.exit(main())
