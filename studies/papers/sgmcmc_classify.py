"""Gan et al. (2017) §5.3: sentence classification by a BiLSTM, RMSprop vs pSGLD.

    python studies/papers/sgmcmc_classify.py --optimizer psgld --out runs/imdb_psgld
    python studies/papers/sgmcmc_classify.py --quick

A bidirectional LSTM (200 per direction), dropout 0.5, on IMDB sentiment
(the paper's MR/CR/SUBJ/MPQA/TREC are not available offline; IMDB is the
labelled corpus at hand). pSGLD collects a sample every epoch after epoch 1
and averages the class probabilities (eq. 5); the per-review standard
deviation of the positive-class probability is the uncertainty of Fig. 6.
"""

import argparse
import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--imdb", default=str(pathlib.Path(__file__).resolve().parents[3] / "shared"
                                              / "data" / "imdb" / "aclImdb_reviews.jsonl.gz"))
    parser.add_argument("--optimizer", choices=["rmsprop", "psgld"], default="psgld")
    parser.add_argument("--reviews", type=int, default=5000,
                        help="training reviews per class (12,500 = all)")
    parser.add_argument("--embeddings", default=None, help="word2vec .bin to initialise")
    parser.add_argument("--epochs", type=int, default=None)
    parser.add_argument("--quick", action="store_true", help="300 reviews per class, 2 epochs")
    parser.add_argument("--out", default="runs/sgmcmc_classify")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    import keras
    import numpy as np
    import tensorflow as tf

    from tfktopic.bayes import SampleCollector
    from tfktopic import presets
    from tfktopic.bayes.setups import bilstm_classifier, optimizer
    from tfktopic.data import Vocabulary, read_imdb

    if not pathlib.Path(args.imdb).exists():
        parser.error(f"--imdb: {args.imdb} not found")
    preset = presets.preset("sgmcmc_classifier", "paper").settings()
    sizes, training = preset["model"], preset["training"]
    per_class = 300 if args.quick else args.reviews
    if args.quick:
        sizes.update(units=32, embedding_dim=32)
        preset["data"].update(max_len=120)
        training.update(epochs=2)
    epochs = args.epochs or training["epochs"]

    def load(split, count):
        parts = [read_imdb(args.imdb, split=split, labels=(label,), limit=count)
                 for label in ("pos", "neg")]
        docs = [[w for s in d for w in s] for p in parts for d in p.documents]
        labels = np.array([label == "pos" for p in parts for label in p.labels], np.float32)
        order = np.random.default_rng(args.seed).permutation(len(docs))
        return [docs[i] for i in order], labels[order]

    train_docs, train_y = load("train", per_class)
    test_docs, test_y = load("test", max(per_class // 5, 50))
    vocab = Vocabulary.build([[d] for d in train_docs], min_count=3)

    def encode(docs):
        return keras.utils.pad_sequences([vocab.encode(d) for d in docs],
                                         maxlen=preset["data"]["max_len"], truncating="post")

    x_train, x_test = encode(train_docs), encode(test_docs)
    embeddings = None
    if args.embeddings:
        from tfktopic.data.embeddings import embedding_matrix, load_word2vec
        embeddings, coverage = embedding_matrix(vocab, load_word2vec(args.embeddings))
        sizes["embedding_dim"] = embeddings.shape[1]
        print(f"word2vec coverage: {coverage}")
    keras.utils.set_random_seed(args.seed)
    model = bilstm_classifier(len(vocab), sizes["units"], sizes["embedding_dim"],
                              sizes["dropout"], embeddings)
    model.compile(optimizer=optimizer(args.optimizer, training["learning_rates"][args.optimizer],
                                      num_examples=len(x_train), seed=args.seed),
                  loss="binary_crossentropy", metrics=["accuracy"])
    test_ds = tf.data.Dataset.from_tensor_slices((x_test, test_y)).batch(100)
    callbacks, collector = [], None
    if args.optimizer == "psgld":
        collector = SampleCollector(test_ds, kind="classification",
                                    burn_in_epochs=training["burn_in_epochs"] if epochs > 1 else 0,
                                    thin="epoch", verbose=1)
        callbacks.append(collector)
    model.fit(x_train, train_y, batch_size=training["batch_size"], epochs=epochs, verbose=2,
              callbacks=callbacks)
    _, accuracy = model.evaluate(test_ds, verbose=0)
    result = {"optimizer": args.optimizer, "train_reviews": len(x_train),
              "test_reviews": len(x_test), "test_error_final_model": 1.0 - accuracy}
    if collector is not None and collector.num_samples:
        samples = collector.samples()
        mean, std = samples.average_probabilities()
        result.update(test_error_averaged=1.0 - samples.accuracy(),
                      num_samples=len(samples),
                      mean_uncertainty_std=float(std[:, 1].mean()))
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "result.json").write_text(json.dumps(result, indent=1))
    print(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
