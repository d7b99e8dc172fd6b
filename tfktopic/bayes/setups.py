"""The experimental setups of Gan et al. (2017): data, model and optimizer builders.

One place for what the scripts (``studies/papers/sgmcmc_*.py``) and the benchmarks
(``benchmarks/sgmcmc*.py``) share (reference sgmcmc_and_topicrnn.md §A3). The
sizes and step sizes are presets (`tfktopic.bayes.sgmcmc_presets`, reached by
``tfktopic.presets.preset("sgmcmc_ptb", "small")`` etc.):

* PTB word-level LM, 2-layer LSTM small / medium / large (200 / 650 / 1500),
  20 unrolled steps, "random" minibatches (independent windows from a zero
  state, the Theano code) or "successive" ones (the state carried from batch
  to batch through the stream, Zaremba et al. and the Lua code: a stateful
  `LSTMLanguageModel` with the `ResetStates` callback).
* War and Peace character-level LM, 2-layer 128-unit LSTM / GRU / RNN,
  100 x 100 character batches.
* Sentence classification by a bidirectional LSTM (200 per direction, 400
  concatenated), dropout 0.5, here on IMDB sentiment.

Every builder returns plain Keras objects, so users can swap optimizers:
`optimizer(name, ...)` gives SGD / RMSprop / SGLD / pSGLD with the right
`num_examples` (the paper's step size of each is a preset's
``training["learning_rates"][name]``).
"""

import keras
import numpy as np

from tfktopic.bayes.sgmcmc import PSGLD, SGLD
from tfktopic.bayes.sgmcmc_presets import ABLATION_PRESETS
from tfktopic.data.contexts import stream_arrays
from tfktopic.data.corpora import Corpus
from tfktopic.data.pipeline import prefetched

__all__ = ["OPTIMIZERS", "ablation_optimizer", "optimizer", "window_dataset", "ptb_data",
           "char_data", "bilstm_classifier"]

OPTIMIZERS = ("sgd", "rmsprop", "sgld", "psgld")


def ablation_optimizer(setting, learning_rate, num_examples, temperature=None, seed=0):
    """The pSGLD (or, at ``temperature=0``, RMSprop) of an ablation setting.

    Args:
        setting: a preset name of ``sgmcmc_ablation``
            (`tfktopic.bayes.sgmcmc_presets.ABLATION_PRESETS`).
        learning_rate: η.
        num_examples: N (training tokens).
        temperature: override the setting's temperature (0 = its RMSprop,
            which also drops the prior; a float for the cold-posterior sweep).
        seed: noise seed.

    Returns:
        A `PSGLD`.
    """
    if setting not in ABLATION_PRESETS:
        raise ValueError(f"setting must be one of {sorted(ABLATION_PRESETS)}, got {setting!r}")
    preset = dict(ABLATION_PRESETS[setting]["training"])
    if temperature is None:
        temperature = preset["temperature"]
    if temperature == "2/N":
        temperature = 2.0 / num_examples
    prior = preset["prior_precision"] if temperature > 0 else 0.0
    return PSGLD(learning_rate, num_examples=num_examples, temperature=float(temperature),
                 prior_precision=prior, rho=preset["rho"], epsilon=preset["epsilon"],
                 epsilon_placement=preset["epsilon_placement"], clipnorm=preset["clipnorm"],
                 normalize_gradients_to=preset["normalize_gradients_to"], seed=seed)


def optimizer(name, learning_rate, num_examples=None, clipnorm=None, seed=None, **kwargs):
    """An optimizer of the paper's comparisons.

    Args:
        name: "sgd", "rmsprop", "sgld" or "psgld".
        learning_rate: step size on SGD's / RMSprop's scale (see `SGLD`).
        num_examples: N, training units the loss is averaged over (tokens for
            LMs, sentences for classifiers); required by SGLD / pSGLD.
        clipnorm: gradient norm clipping (per variable, as Keras).
        seed: noise seed of SGLD / pSGLD.
        **kwargs: passed to the optimizer.

    Returns:
        A `keras.optimizers.Optimizer`.
    """
    if name not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {name!r}")
    if name == "sgd":
        return keras.optimizers.SGD(learning_rate, clipnorm=clipnorm, **kwargs)
    if name == "rmsprop":
        # pSGLD's preconditioner without noise: rho 0.99, epsilon outside.
        return PSGLD(learning_rate, num_examples=num_examples or 1, temperature=0.0,
                     prior_precision=0.0, clipnorm=clipnorm, **kwargs)
    if num_examples is None:
        raise ValueError(f"optimizer {name!r} needs num_examples (N)")
    cls = SGLD if name == "sgld" else PSGLD
    return cls(learning_rate, num_examples=num_examples, clipnorm=clipnorm, seed=seed, **kwargs)


def window_dataset(inputs, targets, batch_size, shuffle=True, seed=0, drop_remainder=True):
    """Independent LM windows ("random minibatches"), zero initial state each.

    Args:
        inputs, targets: int32 [num_batches, B, T] from `stream_arrays` (the
            windows are regrouped, so B there need not equal `batch_size`).
        batch_size: windows per batch.
        shuffle: shuffle windows every epoch (seeded).
        seed: shuffle seed.
        drop_remainder: static batch size.

    Returns:
        A tf.data.Dataset of dicts ``tokens``, ``targets``, ``mask``.
    """
    import tensorflow as tf
    steps = inputs.shape[-1]
    x = np.asarray(inputs, np.int32).reshape(-1, steps)
    y = np.asarray(targets, np.int32).reshape(-1, steps)
    dataset = tf.data.Dataset.from_tensor_slices(
        {"tokens": x, "targets": y, "mask": np.ones_like(x, np.float32)})
    if shuffle:
        dataset = dataset.shuffle(len(x), seed=seed, reshuffle_each_iteration=True)
    return prefetched(dataset.batch(batch_size, drop_remainder=drop_remainder))


def ptb_data(ptb_dir, vocab, num_steps=20, batch_size=20, limit_tokens=None,
             minibatches="random"):
    """PTB train / valid / test windows of `num_steps` tokens.

    Args:
        ptb_dir: folder with ``ptb.{train,valid,test}.txt``.
        vocab: a `Vocabulary` built on the training part.
        num_steps: unrolled steps T.
        batch_size: windows per batch.
        limit_tokens: keep only about this many tokens of every part (quick runs).
        minibatches: "random" (shuffled independent windows, zero state) or
            "successive" (the streams in order, for a stateful model with
            the `ResetStates` callback).

    Returns:
        dict with ``train`` (shuffled), ``valid``, ``test`` (in order) datasets
        and ``num_train_tokens`` (N for SG-MCMC).
    """
    from tfktopic.data.corpora import read_ptb
    import pathlib

    parts = {}
    for name in ("train", "valid", "test"):
        corpus = read_ptb(pathlib.Path(ptb_dir) / f"ptb.{name}.txt")
        if limit_tokens:
            corpus = _limit(corpus, limit_tokens if name == "train" else limit_tokens // 8)
        parts[name] = stream_arrays(corpus, vocab, batch_size, num_steps)
    if minibatches not in ("random", "successive"):
        raise ValueError(f"minibatches must be 'random' or 'successive', got {minibatches!r}")
    if minibatches == "successive":
        from tfktopic.data.pipeline import stream_dataset
        data = {name: stream_dataset(*arrays) for name, arrays in parts.items()}
    else:
        data = {name: window_dataset(*arrays, batch_size, shuffle=name == "train")
                for name, arrays in parts.items()}
    data["num_train_tokens"] = int(parts["train"][0].size)
    return data


def _limit(corpus, num_tokens):
    kept, total = [], 0
    for document in corpus.documents:
        kept.append(document)
        total += sum(len(s) + 1 for s in document)
        if total >= num_tokens:
            break
    return Corpus(kept, source=corpus.source)


def char_data(path, num_steps=100, batch_size=100, fractions=(0.8, 0.1, 0.1), limit_chars=None):
    """Character-level train / valid / test windows of a text file (War and Peace).

    The text is split contiguously by `fractions` (Karpathy et al.: 260 / 32 /
    33 batches of 100 x 100); every character, newline included, is a token.

    Returns:
        dict with ``train``, ``valid``, ``test`` datasets, ``vocab`` (a
        `Vocabulary` of characters) and ``num_train_tokens``.
    """
    from tfktopic.data.corpora import decoded_lines
    from tfktopic.data.vocab import Vocabulary

    text = "".join(line + "\n" for _, line in decoded_lines(path))
    if limit_chars:
        text = text[:limit_chars]
    bounds = np.cumsum([0] + [int(f * len(text)) for f in fractions])
    pieces = [list(text[bounds[i]:bounds[i + 1]]) for i in range(3)]
    vocab = Vocabulary.build([[pieces[0]]], min_count=1)
    out = {"vocab": vocab}
    for name, piece in zip(("train", "valid", "test"), pieces):
        arrays = stream_arrays(Corpus([[piece]]), vocab, batch_size, num_steps)
        out[name] = window_dataset(*arrays, batch_size, shuffle=name == "train")
        if name == "train":
            out["num_train_tokens"] = int(arrays[0].size)
    return out


def bilstm_classifier(vocab_size, units=200, embedding_dim=300, dropout=0.5, embeddings=None,
                      num_classes=2):
    """Gan et al.'s sentence classifier: a bidirectional LSTM over word vectors.

    The final states of both directions are concatenated (2 x `units`), with
    dropout on the embeddings and on the concatenated state.

    Args:
        vocab_size: vocabulary size (id 0 is padding, masked).
        units: LSTM units per direction (the code's n_h = 200).
        embedding_dim: word vector size (300 for word2vec).
        dropout: dropout rate (0.5).
        embeddings: optional [vocab_size, embedding_dim] initial matrix.
        num_classes: 2 gives one sigmoid unit, more a softmax.

    Returns:
        An uncompiled `keras.Sequential`.
    """
    layers = [
        keras.layers.Embedding(vocab_size, embedding_dim, mask_zero=True,
                               weights=None if embeddings is None else [embeddings]),
        keras.layers.Dropout(dropout),
        keras.layers.Bidirectional(keras.layers.LSTM(units)),
        keras.layers.Dropout(dropout),
        keras.layers.Dense(1 if num_classes == 2 else num_classes,
                           activation="sigmoid" if num_classes == 2 else "softmax"),
    ]
    return keras.Sequential(layers, name="bilstm_classifier")
