"""TCNLM on APNEWS in the TDLM format (Wang et al., AISTATS 2018, Tables 2, 4, 5, 6).

    python scripts/tcnlm_apnews.py                       # preset "paper" (small model, 50 topics)
    python scripts/tcnlm_apnews.py --preset paper_large --num-topics 100
    python scripts/tcnlm_apnews.py --mixture moe --preset paper_table6_moe
    python scripts/tcnlm_apnews.py --quick               # 300 documents, small model, < 3 minutes
    python scripts/tcnlm_apnews.py --data lee --preset small --lstm-baseline   # the README demo

Data: a TDLM-format file (a document per line, TAB between sentences; default
``../shared/data/apnews/apnews.txt``, the 2,000-document official APNEWS
validation split -- the paper trained on 50K documents) or ``lee`` (gensim's
300 news documents, no download). The documents are split 80/10/10 with a
fixed seed; the vocabularies are built on the training part (preset ``data``:
LM min count, Mallet stop list when present, top 0.1 % frequent types, minimum
document frequency -- the paper's threshold, given for 50K documents, is scaled
to the training split by `tfktopic.runs.resolve_data_rules`). The data, the
model, the training and the scoring are `tfktopic.runs`' (`prepare_data`,
`build_model`, `fit_model`, `score_perplexity`), the code of ``tfktopic train``;
this script adds the extra reports.

Training contexts are the other sentences of the document ("all_other", as in
the paper). The test perplexity is reported under the leak-free **preceding**
protocol (the context of sentence j is sentences < j; t is the posterior mean)
and, labelled, under the papers' "all_other" protocol, which lets the rest of
the document -- future sentences included -- into the context. Each sentence
window starts from a zero LSTM state (sentence-level, DESIGN.md §5).

Also printed: the unigram baseline (training counts, add-0.5), optionally a
plain LSTM LM of the same size (``--lstm-baseline``), the topics (top-10 words
of beta), their NPMI coherence (Lau et al.'s semantics, top 5/10/15/20, window
20) against the **training split** as reference corpus (`tfktopic.runs.npmi_reference`,
the package's one rule; the paper used Wikipedia, so the values are not comparable
with its Table 4), and generated
sentences per topic (greedy and top-k samples, t = one-hot).
"""

import argparse
import json
import pathlib
import sys
import time

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
DEFAULT_DATA = REPO_ROOT.parent / "shared" / "data"
if str(REPO_ROOT) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(REPO_ROOT))

QUICK = {"max_docs": 300, "preset": "small", "epochs": 5, "stopwords": "mallet_en.txt"}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA / "apnews" / "apnews.txt"),
                        help="TDLM-format file, or 'lee' (default: %(default)s)")
    parser.add_argument("--preset", default=None,
                        help="a key of tfktopic.models.tcnlm.PRESETS (default: paper; small "
                             "with --quick)")
    parser.add_argument("--mixture", choices=("factorized", "moe"), default=None)
    parser.add_argument("--num-topics", type=int, default=None)
    parser.add_argument("--hidden-dim", type=int, default=None)
    parser.add_argument("--dropout", type=float, default=None)
    parser.add_argument("--epochs", type=int, default=None)
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--learning-rate", type=float, default=None)
    parser.add_argument("--max-docs", type=int, default=None,
                        help="use only the first N documents of the file")
    parser.add_argument("--stopwords", default=None,
                        help="stop list of the topic vocabulary (default: the preset's; Mallet's "
                             "list from ../shared/data/stopwords when the preset names it)")
    parser.add_argument("--show-topics", type=int, default=10,
                        help="topics to print sentences for (default: %(default)s)")
    parser.add_argument("--lstm-baseline", action="store_true",
                        help="also train a plain LSTM LM of the same size and report it")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true",
                        help=f"{QUICK['max_docs']} documents, preset small, {QUICK['epochs']} "
                             "epochs, Mallet stop list (< 3 minutes on 2 cores)")
    parser.add_argument("--save", default=None, help="save the trained model (.keras) here")
    parser.add_argument("--out", default=None, help="write the results as JSON to this file")
    return parser.parse_args(argv)


def resolve_stopwords(name):
    if name in ("gensim", "none") or name is None:
        return name or "gensim", name or "gensim"
    path = pathlib.Path(name)
    if not path.exists():
        path = DEFAULT_DATA / "stopwords" / name
    if path.exists():
        return str(path), path.name
    print(f"note: stop list {name!r} not found; using gensim's English list instead")
    return "gensim", "gensim (fallback)"


def main(argv=None):
    args = parse_args(argv)
    if args.quick:
        args.max_docs = args.max_docs or QUICK["max_docs"]
        args.preset = args.preset or QUICK["preset"]
        args.epochs = args.epochs or QUICK["epochs"]
        if args.data != "lee":
            args.stopwords = args.stopwords or QUICK["stopwords"]
    args.preset = args.preset or "paper"

    import keras
    import numpy as np

    from tfktopic import runs
    from tfktopic.evaluation import unigram_perplexity
    try:
        settings = runs.preset_settings("tcnlm", args.preset)
    except ValueError as error:
        sys.exit(f"error: {error}")
    train_cfg = settings["training"]
    for key, value in (("epochs", args.epochs), ("batch_size", args.batch_size),
                       ("learning_rate", args.learning_rate)):
        if value is not None:
            train_cfg[key] = value
    overrides = {k: v for k, v in (("mixture", args.mixture), ("num_topics", args.num_topics),
                                   ("hidden_dim", args.hidden_dim), ("dropout", args.dropout))
                 if v is not None}
    if args.hidden_dim is not None and "factor_dim" in settings["model"]:
        overrides["factor_dim"] = args.hidden_dim
    settings["model"].update(overrides, seed=args.seed)
    stopwords, stop_name = resolve_stopwords(args.stopwords or settings["data"]["stopwords"])
    settings["data"]["stopwords"] = stopwords

    start = time.perf_counter()
    if args.data != "lee" and not pathlib.Path(args.data).exists():
        sys.exit(f"error: TDLM file not found at {args.data}; pass --data PATH (a document per "
                 f"line, TAB between sentences) or --data lee")
    data = runs.prepare_data(settings, args.data, format=None if args.data == "lee" else "tdlm",
                             max_documents=args.max_docs, seed=args.seed)
    for note in data.notes:
        print(f"note: {note}")
    lm_vocab, topic_vocab, parts = data.lm_vocab, data.topic_vocab, data.parts
    print(f"corpus {data.corpus.source}: {len(parts['train'])}/{len(parts['valid'])}/"
          f"{len(parts['test'])} documents (train/valid/test, seed {args.seed}); LM vocabulary "
          f"{len(lm_vocab)}, topic vocabulary {len(topic_vocab)} (stop list {stop_name}); "
          f"windows {'/'.join(str(len(data.examples[k])) for k in ('train', 'valid', 'test'))}")

    def fit(model_settings, name):
        model = runs.build_model(model_settings, data.for_model(model_settings["name"]),
                                 seed=args.seed)
        stop = keras.callbacks.EarlyStopping(monitor="val_ppl", mode="min", patience=2,
                                             restore_best_weights=True)
        tic = time.perf_counter()
        history = runs.fit_model(model, data.for_model(model_settings["name"]), model_settings,
                                 callbacks=[stop], verbose=2, seed=args.seed)
        seconds = time.perf_counter() - tic
        print(f"{name}: trained {len(history.history['loss'])} epochs in {seconds:.0f} s")
        return model, history.history, seconds

    def test_ppl(name, model, protocol):
        return runs.score_perplexity(name, model, parts["test"], lm_vocab, topic_vocab,
                                     data.data, protocol, 2 * train_cfg["batch_size"])[0]

    model, history, train_seconds = fit(settings, "TCNLM")
    print(f"TCNLM ({model.mixture}, {model.num_layers} x {model.hidden_dim}, {model.num_topics} "
          f"topics): {model.count_params():,} parameters")

    results = {"preset": args.preset, "data": data.corpus.source, "seed": args.seed,
               "config": model.get_config(), "training": train_cfg, "data_settings": data.data,
               "train_seconds": train_seconds, "history": history,
               "vocab": {"lm": len(lm_vocab), "topic": len(topic_vocab), "stopwords": stop_name}}
    preceding = test_ppl("tcnlm", model, "preceding")
    all_other = test_ppl("tcnlm", model, "all_other")
    unigram = unigram_perplexity(lm_vocab, data.examples["test"])
    results["test"] = {"tcnlm_preceding": preceding.as_dict(),
                       "tcnlm_all_other": all_other.as_dict(), "unigram": unigram}
    print(f"test perplexity (sentence-level, {preceding.num_tokens} tokens):")
    print(f"  TCNLM, preceding-sentence context (leak-free) : {preceding.perplexity:8.2f}")
    print(f"  TCNLM, all-other-sentence context (papers'; lets future text in): "
          f"{all_other.perplexity:8.2f}")
    print(f"  unigram (training counts)                     : {unigram:8.2f}")
    if args.lstm_baseline:
        lstm_settings = {"name": "lstm", "data": data.data, "training": train_cfg,
                         "model": {"embedding_dim": model.embedding_dim,
                                   "hidden_dim": model.hidden_dim,
                                   "num_layers": model.num_layers, "dropout": model.dropout}}
        lstm, _, lstm_seconds = fit(lstm_settings, "LSTM")
        lstm_ppl = test_ppl("lstm", lstm, "preceding")
        results["test"]["lstm"] = lstm_ppl.as_dict()
        results["lstm_train_seconds"] = lstm_seconds
        print(f"  plain LSTM LM of the same size (no context)   : {lstm_ppl.perplexity:8.2f}")

    from tfktopic.evaluation import npmi_coherence

    top = min(20, len(topic_vocab))
    topics = model.topics(top, topic_vocab)
    cardinalities = tuple(c for c in (5, 10, 15, 20) if c <= top)
    counts = data.npmi_reference([w for topic in topics for w in topic])
    coherence = npmi_coherence(topics, counts=counts, cardinalities=cardinalities)
    results["topics"] = topics
    results["coherence"] = {**coherence.to_dict(), "reference": runs.NPMI_REFERENCE}
    print(f"topics (top 10 of beta) and NPMI (top {'/'.join(map(str, cardinalities))}, window 20, "
          f"reference: the training split, not Wikipedia): mean {coherence.mean:.3f}")
    for k, words in enumerate(topics):
        print(f"  {k:3d} [{coherence.per_topic[k]:+.3f}] {' '.join(words[:10])}")

    text = data.tokenizer.decode

    print("generated sentences (t = one-hot topic; greedy, then two top-k=10 samples; <unk> "
          "never generated):")
    samples = {}
    for k in range(min(args.show_topics, model.num_topics)):
        greedy = model.generate(1, topic=k, allow_unk=False)[0]
        sampled = model.generate(2, topic=k, method="top_k", top_k=10, seed=args.seed + k,
                                 allow_unk=False)
        samples[k] = [text(greedy)] + [text(row) for row in sampled]
        print(f"  topic {k} ({' '.join(topics[k][:4])}):")
        for sentence in samples[k]:
            print(f"      {sentence}")
    mix = np.zeros(model.num_topics, np.float32)
    mix[:2] = 0.5
    mixed = text(model.generate(1, topic=mix, method="top_k", seed=args.seed, allow_unk=False)[0])
    samples["0+1"] = [mixed]
    print(f"  topics 0+1 (0.5/0.5): {mixed}")
    results["generated"] = {str(k): v for k, v in samples.items()}
    results["total_seconds"] = time.perf_counter() - start
    print(f"total time {results['total_seconds']:.0f} s")
    if args.save:
        model.save(args.save)
        print(f"model saved to {args.save}")
    if args.out:
        pathlib.Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        pathlib.Path(args.out).write_text(json.dumps(results, indent=1, default=float) + "\n")
    return results


if __name__ == "__main__":
    main()
