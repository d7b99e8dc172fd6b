"""Gan et al. (2017) §5.1: character-level LM on War and Peace, RMSprop vs pSGLD.

    python studies/papers/sgmcmc_char.py --cell lstm --optimizer psgld --out runs/wp_psgld
    python studies/papers/sgmcmc_char.py --cell gru --optimizer rmsprop --quick

2-layer, 128-unit LSTM / GRU / RNN on 100 x 100 character batches (Karpathy
et al.'s split, 80/10/10 contiguous). pSGLD: lr 2e-3, 20 epochs, burn-in 4,
a sample every half epoch, at most 32 samples, averaged (Table 3 reports test
cross-entropy in nats per character).
"""

import argparse
import json
import math
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--text", default=str(pathlib.Path(__file__).resolve().parents[3] / "shared"
                                              / "data" / "war_and_peace" / "warpeace_input.txt"))
    parser.add_argument("--cell", choices=["lstm", "gru", "rnn"], default="lstm")
    parser.add_argument("--optimizer", choices=["rmsprop", "psgld"], default="psgld")
    parser.add_argument("--epochs", type=int, default=None)
    parser.add_argument("--quick", action="store_true", help="200k characters, 2 epochs")
    parser.add_argument("--out", default="runs/sgmcmc_char")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    import keras

    from tfktopic.bayes import SampleCollector
    from tfktopic import presets
    from tfktopic.bayes.setups import char_data, optimizer
    from tfktopic.evaluation import evaluate_perplexity
    from tfktopic.models import LSTMLanguageModel

    if not pathlib.Path(args.text).exists():
        parser.error(f"--text: {args.text} not found")
    preset = presets.preset("sgmcmc_char", "paper").settings()
    sizes, training = preset["model"], preset["training"]
    if args.quick:
        training.update(epochs=2, burn_in_epochs=1)
    epochs = args.epochs or training["epochs"]
    data = char_data(args.text, preset["data"]["num_steps"], training["batch_size"],
                     limit_chars=200_000 if args.quick else None)
    steps_per_epoch = sum(1 for _ in data["train"])
    keras.utils.set_random_seed(args.seed)
    model = LSTMLanguageModel(len(data["vocab"]), sizes["embedding_dim"], sizes["hidden_dim"],
                              num_layers=sizes["num_layers"], cell=args.cell)
    model.compile(optimizer=optimizer(args.optimizer, training["learning_rates"][args.optimizer],
                                      num_examples=data["num_train_tokens"], seed=args.seed))
    out = pathlib.Path(args.out)
    callbacks, collector = [], None
    if args.optimizer == "psgld":
        collector = SampleCollector(
            {"test": data["test"]}, burn_in_epochs=training["burn_in_epochs"],
            thin=max(1, steps_per_epoch // training["samples_per_epoch"]),
            max_samples=training["max_samples"], directory=out / "samples", verbose=1)
        callbacks.append(collector)
    print(f"War and Peace, {args.cell}, {args.optimizer}: {len(data['vocab'])} symbols, "
          f"{epochs} epochs of {steps_per_epoch} steps")
    model.fit(data["train"], validation_data=data["valid"], epochs=epochs, verbose=2,
              callbacks=callbacks)
    final = evaluate_perplexity(model, data["test"])
    result = {"cell": args.cell, "optimizer": args.optimizer,
              "test_nats_per_char_final_model": math.log(final.perplexity)}
    if collector is not None and collector.num_samples:
        result["test_nats_per_char_averaged"] = collector.samples("test").nll()
        result["num_samples"] = collector.num_samples
    out.mkdir(parents=True, exist_ok=True)
    (out / "result.json").write_text(json.dumps(result, indent=1))
    print(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
