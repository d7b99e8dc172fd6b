"""Gan et al. (2017) §5.1: PTB word-level LM, 2-layer LSTM, SGD / SGLD / pSGLD.

    python studies/papers/sgmcmc_ptb.py --size small --optimizer psgld --out runs/ptb_psgld
    python studies/papers/sgmcmc_ptb.py --size small --optimizer sgld --dropout 0.5 --quick

Trains with the chosen optimizer on "random" minibatches (independent
20-token windows from a zero state, the authors' Theano setup) or, with
`--minibatches successive`, on the streams in order with the state carried
from batch to batch (Zaremba et al., the Lua code); collects
samples after burn-in for SGLD / pSGLD, and prints the test perplexity of the
final model and of the sample average (thinned, forward and backward curves
are written to OUT/curves.json). Checkpoints every epoch to OUT and resumes
after an interruption (keras BackupAndRestore).
"""

import argparse
import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))


def main(argv=None):
    from tfktopic import presets

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ptb-dir", default=str(pathlib.Path(__file__).resolve().parents[3]
                                                 / "shared" / "data" / "ptb"))
    parser.add_argument("--size", choices=presets.names("sgmcmc_ptb"), default="small")
    parser.add_argument("--optimizer", choices=["sgd", "rmsprop", "sgld", "psgld"],
                        default="psgld")
    parser.add_argument("--minibatches", choices=["random", "successive"], default="random",
                        help="independent windows from a zero state (Theano code) or the "
                             "state carried through the stream (Zaremba / Lua code)")
    parser.add_argument("--dropout", type=float, default=None,
                        help="override the preset's dropout (0 = none)")
    parser.add_argument("--learning-rate", type=float, default=None)
    parser.add_argument("--epochs", type=int, default=None)
    parser.add_argument("--burn-in-epochs", type=int, default=None,
                        help="default: a third of the epochs")
    parser.add_argument("--samples-per-epoch", type=int, default=4)
    parser.add_argument("--quick", action="store_true",
                        help="60k training tokens, hidden 32, 2 epochs (a smoke run)")
    parser.add_argument("--out", default="runs/sgmcmc_ptb")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    import keras

    from tfktopic.bayes import SampleCollector
    from tfktopic.bayes.setups import optimizer, ptb_data
    from tfktopic.data import Vocabulary, read_ptb
    from tfktopic.evaluation import evaluate_perplexity
    from tfktopic.models import LSTMLanguageModel

    ptb_dir = pathlib.Path(args.ptb_dir)
    if not (ptb_dir / "ptb.train.txt").exists():
        parser.error(f"--ptb-dir: {ptb_dir / 'ptb.train.txt'} not found")
    preset = presets.preset("sgmcmc_ptb", args.size).settings()
    sizes, training = preset["model"], preset["training"]
    if args.quick:
        sizes.update(hidden_dim=32, embedding_dim=32)
        training.update(epochs=2)
    epochs = args.epochs or training["epochs"]
    dropout = sizes["dropout"] if args.dropout is None else args.dropout
    bayes = args.optimizer in ("sgld", "psgld")
    lr = args.learning_rate or training["learning_rates"][args.optimizer]
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    vocab = Vocabulary.build(read_ptb(ptb_dir / "ptb.train.txt"), min_count=1)
    data = ptb_data(ptb_dir, vocab, preset["data"]["num_steps"], training["batch_size"],
                    limit_tokens=60_000 if args.quick else None, minibatches=args.minibatches)
    successive = args.minibatches == "successive"
    steps_per_epoch = sum(1 for _ in data["train"])
    keras.utils.set_random_seed(args.seed)
    model = LSTMLanguageModel(len(vocab), sizes["embedding_dim"], sizes["hidden_dim"],
                              num_layers=sizes["num_layers"], dropout=dropout,
                              stateful=successive)
    model.compile(optimizer=optimizer(args.optimizer, lr, num_examples=data["num_train_tokens"],
                                      clipnorm=training["clipnorm"], seed=args.seed))
    model(next(iter(data["train"])))  # build before BackupAndRestore restores weights
    callbacks = [keras.callbacks.BackupAndRestore(str(out / "backup"))]
    if successive:
        from tfktopic.models import ResetStates
        callbacks.append(ResetStates())
    collector = None
    if bayes:
        burn_in = epochs // 3 if args.burn_in_epochs is None else args.burn_in_epochs
        collector = SampleCollector({"test": data["test"]}, burn_in_epochs=burn_in,
                                    thin=max(1, steps_per_epoch // args.samples_per_epoch),
                                    directory=out / "samples", verbose=1)
        callbacks.append(collector)
    print(f"PTB {args.size}: {args.optimizer}, lr {lr}, dropout {dropout}, {epochs} epochs of "
          f"{steps_per_epoch} steps, N = {data['num_train_tokens']} tokens")
    model.fit(data["train"], validation_data=data["valid"], epochs=epochs, callbacks=callbacks,
              verbose=2)
    model.reset_states()
    result = {"optimizer": args.optimizer, "size": args.size, "dropout": dropout,
              "test_ppl_final_model": evaluate_perplexity(model, data["test"]).perplexity}
    if collector is not None and collector.num_samples:
        samples = collector.samples("test")
        result["num_samples"] = len(samples)
        result["test_ppl_averaged"] = samples.perplexity()
        result["curves"] = {s: samples.curve(s) for s in ("thinned", "forward", "backward")}
    (out / "result.json").write_text(json.dumps(result, indent=1))
    print({k: v for k, v in result.items() if k != "curves"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
