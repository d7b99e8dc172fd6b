"""TopicRNN document features for IMDB sentiment (Dieng et al. 2017, §4.2).

    python scripts/topicrnn_imdb.py              # the paper's setup (days on a CPU)
    python scripts/topicrnn_imdb.py --quick      # a few hundred reviews, about two minutes

1. TopicRNN is trained as a language model on reviews of the training split
   (labelled and unlabelled; the paper uses 65k random reviews with 10k more
   held out for early stopping), vocabulary 5,000, stop words removed from the
   inference network's input (Mallet's list: the paper's 439-word list is not
   published), RNN 2 x 300, inference network 2 x 500, 200 topics, no dropout,
   13 epochs (preset ``imdb``). Each review is one sequence of at most
   ``--max-len`` tokens (400, as Walter1218's port), its context the whole
   review, so the KL is charged exactly once per review.
2. Features of every labelled review: [mean of q(theta | X_c), last state h_T
   of the top RNN layer] (`TopicRNN.encode`).
3. Classifier: one hidden layer of 50 sigmoid units and a sigmoid output
   (`build_sentiment_classifier`), trained on the 25k labelled training
   reviews, evaluated on the 25k test reviews. The paper reports 6.28 % error.
"""

import argparse
import json
import pathlib
import random
import sys
import time

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
DEFAULT_DATA = REPO_ROOT.parent / "shared" / "data"
if str(REPO_ROOT) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(REPO_ROOT))


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default=str(DEFAULT_DATA),
                        help="folder with imdb/aclImdb_reviews.jsonl.gz and stopwords/mallet_en.txt "
                             "(default: %(default)s)")
    parser.add_argument("--stopwords", default=None,
                        help="stop list for X_c (default: Mallet's list in --data-dir)")
    parser.add_argument("--cell", choices=("rnn", "lstm", "gru"), default="rnn",
                        help="the paper uses plain TopicRNN for IMDB")
    parser.add_argument("--lm-reviews", type=int, default=65000,
                        help="training reviews for the language model (paper: 65,000)")
    parser.add_argument("--valid-reviews", type=int, default=10000,
                        help="held-out reviews for early stopping (paper: 10,000)")
    parser.add_argument("--max-len", type=int, default=None, help="tokens per review (400)")
    parser.add_argument("--epochs", type=int, default=None)
    parser.add_argument("--classifier-epochs", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true",
                        help="a few hundred reviews and a small model (about two minutes)")
    parser.add_argument("--out", default=None, help="write the results as JSON to this file")
    return parser.parse_args(argv)


def require(path, what):
    if not path.exists():
        sys.exit(f"error: {what} not found at {path}; pass --data-dir (the shared data folder "
                 f"with imdb/ and stopwords/)")
    return path


def read_reviews(path, quick, seed):
    """(lm_train, lm_valid, labelled train, labelled test) as `Corpus` objects."""
    from tfktopic.data import read_imdb
    from tfktopic.data.corpora import Corpus

    def balanced(split, limit):
        pos = read_imdb(path, split=split, labels=("pos",), limit=limit)
        neg = read_imdb(path, split=split, labels=("neg",), limit=limit)
        return Corpus(pos.documents + neg.documents, pos.labels + neg.labels,
                      pos.ids + neg.ids, str(path))

    if quick:
        train, test = balanced("train", 250), balanced("test", 100)
        unlabelled = read_imdb(path, split="train", labels=("unsup",), limit=300)
        pool = Corpus(train.documents + unlabelled.documents, source=str(path))
    else:
        pool = read_imdb(path, split="train")  # 25k labelled + 50k unlabelled
        keep = [i for i, label in enumerate(pool.labels) if label in ("pos", "neg")]
        train = pool.subset(keep)
        test = read_imdb(path, split="test", labels=("pos", "neg"))
    order = list(range(len(pool)))
    random.Random(seed).shuffle(order)
    return pool, order, train, test


def main(argv=None):
    args = parse_args(argv)
    data_dir = pathlib.Path(args.data_dir)
    imdb = require(data_dir / "imdb" / "aclImdb_reviews.jsonl.gz", "IMDB reviews")
    stopwords = args.stopwords or str(require(data_dir / "stopwords" / "mallet_en.txt",
                                              "Mallet stop list"))

    import keras
    import numpy as np

    from tfktopic.data import TopicVocabulary, Vocabulary
    from tfktopic.data.contexts import document_examples
    from tfktopic.data.pipeline import sentence_dataset
    from tfktopic.models.topicrnn import PRESETS, TopicRNN, build_sentiment_classifier

    preset = dict(PRESETS["imdb"])
    if args.quick:  # a small model that trains in seconds
        preset.update(max_size=2000, hidden_dim=32, num_layers=1, num_topics=16,
                      encoder_units=(64,), learning_rate=3e-3, batch_size=32, max_len=100,
                      epochs=4, classifier_epochs=60)
    max_len = args.max_len or preset["max_len"]
    epochs = args.epochs or preset["epochs"]
    classifier_epochs = args.classifier_epochs or preset["classifier_epochs"]

    start = time.perf_counter()
    pool, order, train, test = read_reviews(imdb, args.quick, args.seed)
    if args.quick:
        lm_index, valid_index = order[:-60], order[-60:]
    else:
        lm_index = order[:args.lm_reviews]
        valid_index = order[args.lm_reviews:args.lm_reviews + args.valid_reviews]
    lm_corpus, valid_corpus = pool.subset(lm_index), pool.subset(valid_index)
    print(f"IMDB ({'quick' if args.quick else 'full'}): LM train {len(lm_corpus)} reviews, "
          f"LM valid {len(valid_corpus)}, labelled train {len(train)}, test {len(test)} "
          f"(read in {time.perf_counter() - start:.0f} s)")
    lm_vocab = Vocabulary.build(lm_corpus, min_count=preset["min_count"],
                                max_size=preset["max_size"])
    topic_vocab = TopicVocabulary.build(lm_corpus, lm_vocab, stopwords=stopwords,
                                        max_freq_fraction=preset["max_freq_fraction"])
    print(f"LM vocabulary {len(lm_vocab)}; topic vocabulary {len(topic_vocab)} "
          f"(removed {topic_vocab.ignored})")

    def examples(corpus):
        return document_examples(corpus, lm_vocab, topic_vocab, max_len=max_len)

    keras.utils.set_random_seed(args.seed)
    overrides = {k: preset[k] for k in ("hidden_dim", "num_layers", "num_topics", "encoder_units")}
    model = TopicRNN.from_preset("imdb", len(lm_vocab), topic_vocab.lm_to_topic, cell=args.cell,
                                 seed=args.seed, **overrides)
    model.compile(optimizer=keras.optimizers.Adam(preset["learning_rate"]))
    print(f"model: Topic{args.cell.upper()} {model.num_layers} x {model.hidden_dim}, "
          f"K={model.num_topics}, encoder {model.encoder_units}, {model.count_params():,} "
          f"parameters; {epochs} epochs, reviews cut at {max_len} tokens")
    batch_size = preset["batch_size"]
    train_ds = sentence_dataset(examples(lm_corpus), batch_size=batch_size, seed=args.seed,
                                document_targets=True)
    valid_ds = sentence_dataset(examples(valid_corpus), batch_size=batch_size, shuffle=False,
                                document_targets=True)
    stopping = keras.callbacks.EarlyStopping(monitor="val_loss", patience=2,
                                             restore_best_weights=True)
    start = time.perf_counter()
    history = model.fit(train_ds, validation_data=valid_ds, epochs=epochs, callbacks=[stopping],
                        verbose=2)
    lm_seconds = time.perf_counter() - start
    print("(val_ppl above uses the whole review as context: a training diagnostic, not a "
          "leak-free perplexity)")

    def features(corpus):
        return model.encode(sentence_dataset(examples(corpus), batch_size=batch_size,
                                             shuffle=False))

    train_x, test_x = features(train), features(test)
    train_y = np.array([label == "pos" for label in train.labels], np.float32)
    test_y = np.array([label == "pos" for label in test.labels], np.float32)
    print(f"features: train {train_x.shape}, test {test_x.shape} "
          f"([mean of q (K={model.num_topics}), h_T (H={model.hidden_dim})])")
    keras.utils.set_random_seed(args.seed)
    classifier = build_sentiment_classifier(train_x.shape[1], hidden_units=preset["classifier_units"],
                                            train_features=train_x, learning_rate=3e-3)
    shuffled = np.random.default_rng(args.seed).permutation(len(train_x))
    classifier.fit(train_x[shuffled], train_y[shuffled], epochs=classifier_epochs, batch_size=32,
                   validation_split=0.1, verbose=0,
                   callbacks=[keras.callbacks.EarlyStopping(monitor="val_loss", patience=10,
                                                            restore_best_weights=True)])
    train_accuracy = classifier.evaluate(train_x, train_y, verbose=0, return_dict=True)["accuracy"]
    test_accuracy = classifier.evaluate(test_x, test_y, verbose=0, return_dict=True)["accuracy"]
    print(f"sentiment accuracy: train {train_accuracy:.3f}, test {test_accuracy:.3f} "
          f"(error {1 - test_accuracy:.2%}; paper 6.28 %; chance 50 %)")
    results = {"quick": args.quick, "cell": args.cell, "lm_reviews": len(lm_corpus),
               "labelled_train": len(train), "test": len(test), "max_len": max_len,
               "lm_seconds": round(lm_seconds, 1),
               "lm_history": {k: [float(x) for x in v] for k, v in history.history.items()},
               "train_accuracy": float(train_accuracy), "test_accuracy": float(test_accuracy),
               "topics": model.topics(top_n=8, vocabulary=topic_vocab)}
    print("topics:")
    for k, words in enumerate(results["topics"][:8]):
        print(f"  {k:>3}: {' '.join(words)}")
    if args.out:
        pathlib.Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        pathlib.Path(args.out).write_text(json.dumps(results, indent=1) + "\n")
    return results


if __name__ == "__main__":
    main()
