"""Train and evaluate rGBN-RNN / GBN-RNN on APNEWS (Guo et al., ICML 2020, §4).

    python studies/papers/rgbn_apnews.py --layers 3 --preset paper
    python studies/papers/rgbn_apnews.py --layers 1 --no-recurrent --preset reference_code
    python studies/papers/rgbn_apnews.py --quick            # small sizes, < 3 minutes on 2 cores

Steps: read APNEWS (TDLM format), split it 80/10/10 **by document** with a fixed
seed, build the LM vocabulary (min count from the preset) and the topic
vocabulary (Mallet stop list, top 0.1 % types removed) on the training part,
cut documents into chunks of J sentence windows (training contexts: all other
sentences of the document; evaluation contexts: the **preceding** sentences
only, leak-free -- `--eval-protocol all_other` gives the papers' GBN-RNN
protocol, which lets future text in, and every number is labelled with it),
train with the preset's optimizer (TLASGR-MCMC for Phi and Pi runs inside every
training step), keep the weights of the best validation perplexity, and report:

* test (and validation) perplexity with theta at its Weibull mean and with
  p(y) averaged over `--eval-samples` Weibull samples;
* a unigram baseline perplexity on the same tokens;
* the topic hierarchy (JSON, Graphviz DOT, SVG when ``dot`` is installed);
* generated sentences: from noise, from topics of the top layer, a paragraph
  (rGBN-RNN: topics evolving through Pi) and a continuation of a test document.

The data, the model, the training and the perplexity are `tfktopic.runs`'
(`prepare_data`, `build_model`, `fit_model`, `score_perplexity`), the code of
``tfktopic train rgbn_rnn``; this script adds the extra reports.

Everything goes to ``--out`` (default ``results/rgbn_apnews/<model>_<L>l_<preset>``):
``results.json``, ``hierarchy.json``, ``hierarchy.dot`` (+ ``.svg``),
``best.weights.h5``.
"""

import argparse
import json
import pathlib
import sys
import time

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"

# --quick: the preset's switches (weights, encoder, clipping) at small sizes.
QUICK = {"documents": 100, "epochs": 4, "hidden_sizes": (64, 48, 32), "topic_sizes": (20, 12, 8),
         "embedding_dim": 48, "min_count": 3, "eval_samples": 3}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(SHARED_DATA / "apnews" / "apnews.txt"),
                        help="APNEWS in the TDLM format (one document per line)")
    parser.add_argument("--stopwords", default=str(SHARED_DATA / "stopwords" / "mallet_en.txt"),
                        help="stop list of the topic vocabulary ('gensim' for gensim's)")
    parser.add_argument("--layers", type=int, default=3, choices=(1, 2, 3))
    parser.add_argument("--recurrent", action=argparse.BooleanOptionalAction, default=True,
                        help="rGBN-RNN (default) or GBN-RNN (--no-recurrent)")
    parser.add_argument("--preset", default="paper", choices=("paper", "reference_code", "small"))
    parser.add_argument("--quick", action="store_true", help="small sizes, 100 documents, 4 epochs")
    parser.add_argument("--epochs", type=int, default=None, help="override the preset")
    parser.add_argument("--documents", type=int, default=None,
                        help="use only the first N documents")
    parser.add_argument("--embeddings", default=None,
                        help="word2vec file (e.g. GoogleNews-vectors-negative300.bin)")
    parser.add_argument("--embeddings-limit", type=int, default=None,
                        help="read only the first N word2vec vectors")
    parser.add_argument("--eval-protocol", default="preceding", choices=("preceding", "all_other"))
    parser.add_argument("--eval-samples", type=int, default=None,
                        help="Weibull samples of the sampled perplexity (default 20; quick 3)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="output folder")
    return parser.parse_args(argv)


def protocol_label(protocol):
    if protocol == "preceding":
        return "preceding (leak-free: context of sentence j = sentences < j)"
    return ("all_other (the papers' GBN-RNN protocol: context = all other sentences; "
            "lets future text in)")


def document_context(sequences, chunk, topic_vocab_size):
    """[J, V_c] context counts of one chunk (as the pipeline builds them)."""
    import numpy as np

    J = sequences.tokens.shape[1]
    bow = np.zeros((J, topic_vocab_size), np.float32)
    for j in range(J):
        np.add.at(bow[j], sequences.context(chunk, j), 1.0)
    return bow


def main(argv=None):
    args = parse_args(argv)
    data_path = pathlib.Path(args.data)
    if not data_path.exists():
        print(f"error: APNEWS not found at {data_path} (pass --data)", file=sys.stderr)
        return 2

    import keras

    from tfktopic import runs
    from tfktopic.evaluation import unigram_perplexity

    start = time.perf_counter()
    name = "rgbn_rnn" if args.recurrent else "gbn_rnn"
    settings = runs.preset_settings(name, args.preset)
    settings["model"].update(num_layers=args.layers, seed=args.seed)
    documents = args.documents
    eval_samples = args.eval_samples or 20
    if args.quick:
        documents = documents or QUICK["documents"]
        settings["training"]["epochs"] = QUICK["epochs"]
        settings["data"]["min_count"] = QUICK["min_count"]
        eval_samples = args.eval_samples or QUICK["eval_samples"]
        settings["model"].update(hidden_sizes=QUICK["hidden_sizes"][:args.layers],
                                 topic_sizes=QUICK["topic_sizes"][:args.layers],
                                 embedding_dim=QUICK["embedding_dim"])
    if args.epochs is not None:
        settings["training"]["epochs"] = args.epochs
    settings["data"]["stopwords"] = args.stopwords
    epochs = settings["training"]["epochs"]
    out = pathlib.Path(args.out or REPO_ROOT / "results" / "rgbn_apnews"
                       / f"{name}_{args.layers}l_{args.preset}{'_quick' if args.quick else ''}")
    out.mkdir(parents=True, exist_ok=True)

    # ---------------------------------------------------------------- data
    data = runs.prepare_data(settings, str(data_path), format="tdlm", max_documents=documents,
                             seed=args.seed).with_protocol(args.eval_protocol)
    lm_vocab, topic_vocab, sequences = data.lm_vocab, data.topic_vocab, data.examples
    J, T = data.data["sentences_per_chunk"], data.data["max_len"]
    print(f"APNEWS: {len(data.parts['train'])}/{len(data.parts['valid'])}/"
          f"{len(data.parts['test'])} documents, LM vocabulary {len(lm_vocab)}, topic vocabulary "
          f"{len(topic_vocab)}, training chunks {len(sequences['train'])} (J={J}, T={T})")

    embeddings = None
    if args.embeddings:
        from tfktopic.data.embeddings import embedding_matrix, load_word2vec

        embeddings, coverage = embedding_matrix(
            lm_vocab, load_word2vec(args.embeddings, limit=args.embeddings_limit), seed=args.seed)
        settings["model"]["embedding_dim"] = embeddings.shape[1]
        print(f"word2vec: {coverage}")

    # --------------------------------------------------------------- model
    model = runs.build_model(settings, data, seed=args.seed, embeddings=embeddings)
    weights_path = out / "best.weights.h5"
    callbacks = [keras.callbacks.TerminateOnNaN(),
                 keras.callbacks.ModelCheckpoint(str(weights_path), monitor="val_ppl", mode="min",
                                                 save_best_only=True, save_weights_only=True)]
    print(f"training {name}, {args.layers} layer(s), preset {args.preset!r}: LSTM "
          f"{model.hidden_sizes}, topics {model.topic_sizes}, {epochs} epoch(s)")
    train_start = time.perf_counter()
    history = runs.fit_model(model, data, settings, callbacks=callbacks, verbose=2,
                             seed=args.seed)
    train_seconds = time.perf_counter() - train_start
    if weights_path.exists():
        model.load_weights(weights_path)  # model selection on validation (Phi, Pi included)

    # ---------------------------------------------------------- evaluation
    label = protocol_label(args.eval_protocol)
    results = {"model": name, "layers": args.layers, "recurrent": args.recurrent,
               "preset": args.preset, "quick": args.quick, "seed": args.seed,
               "protocol": label, "documents": [len(data.parts[k]) for k in
                                                ("train", "valid", "test")],
               "lm_vocab": len(lm_vocab), "topic_vocab": len(topic_vocab),
               "config": {k: v for k, v in model.get_config().items()
                          if k not in ("name", "trainable", "dtype")},
               "history": {k: [float(v) for v in vs] for k, vs in history.history.items()},
               "train_seconds": train_seconds}
    batch = settings["training"]["batch_size"]
    for part in ("valid", "test"):
        mean, _ = runs.score_perplexity(name, model, data.parts[part], lm_vocab, topic_vocab,
                                        data.data, args.eval_protocol, batch)
        sampled = model.evaluate_sampled_perplexity(data.dataset(part, batch, shuffle=False),
                                                    eval_samples, protocol=args.eval_protocol)
        results[part] = {"perplexity_weibull_mean": mean.perplexity,
                         "perplexity_sampled": sampled.perplexity, "samples": eval_samples,
                         "num_tokens": mean.num_tokens,
                         "unigram_perplexity": unigram_perplexity(lm_vocab, sequences[part])}
        print(f"{part}: perplexity {mean.perplexity:.2f} (Weibull mean), "
              f"{sampled.perplexity:.2f} ({eval_samples} samples), unigram "
              f"{results[part]['unigram_perplexity']:.2f}; {mean.num_tokens} tokens; "
              f"protocol {label}")

    # -------------------------------------------------------------- topics
    from tfktopic.models.rgbn import hierarchy_to_dot, hierarchy_to_svg, topic_hierarchy

    hierarchy = topic_hierarchy(model, topic_vocab, top_n=10)
    (out / "hierarchy.json").write_text(json.dumps(hierarchy, indent=1), encoding="utf-8")
    dot = hierarchy_to_dot(hierarchy)
    (out / "hierarchy.dot").write_text(dot, encoding="utf-8")
    svg = hierarchy_to_svg(dot, out / "hierarchy.svg")
    for layer in hierarchy["layers"]:
        print(f"layer {layer['layer'] + 1} topics (first 3):")
        for topic in layer["topics"][:3]:
            print(f"  {topic['id']:>3}: {' '.join(topic['words'])}")

    # ---------------------------------------------------------- generation
    decode = data.tokenizer.decode_batch
    sampling = {"method": "top_k", "top_k": 20, "temperature": settings["training"]["temperature"]}
    top = model.num_layers - 1
    generated = {
        "from_noise": decode(model.generate(3, seed=args.seed, **sampling)),
        "from_top_topics": {str(k): decode(model.generate(1, topic=k, topic_layer=top,
                                                          seed=args.seed, **sampling))[0]
                            for k in range(min(3, model.topic_sizes[-1]))},
        "paragraph": decode(model.generate_paragraph(4, seed=args.seed, **sampling)),
    }
    context = document_context(sequences["test"], 0, len(topic_vocab))
    generated["conditioned_on_test_document"] = decode(
        model.generate(context_bow=context, seed=args.seed, **sampling))
    if args.recurrent:
        generated["continuing_test_document"] = decode(
            model.generate_paragraph(3, context_bow=context, seed=args.seed, **sampling))
    results["generated"] = generated
    for kind, texts in generated.items():
        print(f"{kind}:")
        for text in (texts.values() if isinstance(texts, dict) else texts):
            print(f"  {text}")

    results["seconds"] = time.perf_counter() - start
    results["files"] = {"hierarchy_json": str(out / "hierarchy.json"),
                        "hierarchy_dot": str(out / "hierarchy.dot"),
                        "hierarchy_svg": None if svg is None else str(svg),
                        "weights": str(weights_path)}
    (out / "results.json").write_text(json.dumps(results, indent=1, default=str),
                                      encoding="utf-8")
    print(f"wrote {out / 'results.json'} ({results['seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
