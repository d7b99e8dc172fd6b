"""Weight initialisation schemes of the language models: Keras' defaults or PyTorch's.

``"keras"`` (the default) is what the Keras layers do on their own: embeddings
U(-0.05, 0.05); LSTM kernels Glorot-uniform, recurrent kernels orthogonal, biases
zero with the forget gate's at 1 (``unit_forget_bias``); the softmax kernel
Glorot-uniform with a zero bias.

``"torch"`` is Zheng, Vafa & Blei's LSTM-LM (``carolinazheng/revisiting-tglms``,
``models/lstm_lm.py``, from PyTorch's ``word_language_model`` example, Zaremba
et al. 2014): embedding and softmax weights U(-0.1, 0.1) (``init_weights``);
everything else at PyTorch's defaults, i.e. every LSTM weight and bias
U(-1/sqrt(H), 1/sqrt(H)) with no forget-gate offset, and the softmax bias
U(-1/sqrt(H), 1/sqrt(H)) (``nn.Linear``, fan-in H). One difference remains:
PyTorch's LSTM has two biases (``b_ih + b_hh``, their sum triangular on
±2/sqrt(H)), Keras' one (uniform on ±1/sqrt(H)).

A dict picks the scheme per part, e.g. ``{"lstm": "torch"}`` (the parts
``"embedding"``, ``"lstm"`` and ``"softmax"``; a part not named keeps "keras"),
to measure which part of a scheme matters.

Example:
>>> lstm = keras.layers.LSTM(256, **lstm_initializers("torch", 256))  # doctest: +SKIP
>>> lstm_initializers({"embedding": "torch"}, 256)
{}
"""

import math

import keras

__all__ = ["INITIALIZATIONS", "KERAS_RNN_WEIGHTS", "PARTS", "cell_initializers",
           "check_initialization", "embedding_initializer", "lstm_initializers",
           "recurrent_initializer", "softmax_initializers"]

INITIALIZATIONS = ("keras", "torch")
#: The parts a dict `initialization` may name.
PARTS = ("embedding", "lstm", "softmax")
#: ``init_weights``' range of the embedding and softmax weights (Zheng et al.).
TORCH_EMBEDDING_RANGE = 0.1


def check_initialization(initialization):
    """`initialization` (a scheme of `INITIALIZATIONS` or a dict part -> scheme) if valid,
    else a ValueError naming it."""
    if isinstance(initialization, dict):
        unknown = sorted(set(initialization) - set(PARTS))
        if unknown:
            raise ValueError(f"initialization: unknown part {unknown[0]!r}; the parts are "
                             f"{', '.join(PARTS)}")
        for scheme in initialization.values():
            check_initialization(scheme)
        return dict(initialization)
    if initialization not in INITIALIZATIONS:
        raise ValueError(f"initialization must be one of {', '.join(INITIALIZATIONS)}, "
                         f"got {initialization!r}")
    return initialization


def _scheme(initialization, part):
    """The scheme `initialization` gives `part`."""
    initialization = check_initialization(initialization)
    if isinstance(initialization, dict):
        return initialization.get(part, "keras")
    return initialization


def _uniform(limit):
    return keras.initializers.RandomUniform(-limit, limit)


def embedding_initializer(initialization):
    """The ``embeddings_initializer`` of a `keras.layers.Embedding`."""
    if _scheme(initialization, "embedding") == "keras":
        return "uniform"                                   # Keras' default: U(-0.05, 0.05)
    return _uniform(TORCH_EMBEDDING_RANGE)


def recurrent_initializer(initialization, units):
    """PyTorch's initializer of every weight and bias of a recurrent cell of `units` units.

    U(-1/sqrt(H), 1/sqrt(H)), what ``nn.LSTM`` / ``nn.GRU`` / ``nn.RNN``'s
    ``reset_parameters`` draws for each of their parameters; the package's own cells
    (TCNLM's factorised and expert LSTMs, rGBN-RNN's LSTMs) take it for each of theirs.

    Args:
        initialization: a scheme or a dict (its ``"lstm"`` part applies).
        units: the cell's units H.

    Returns:
        A new Keras initializer (an instance draws the same values at every call: take
        one per weight), or None for "keras" (the cell keeps its own).
    """
    if _scheme(initialization, "lstm") == "keras":
        return None
    return _uniform(1.0 / math.sqrt(units))


#: The initializer arguments of `keras.layers.LSTM` / `GRU` / `SimpleRNN`.
KERAS_RNN_WEIGHTS = ("kernel_initializer", "recurrent_initializer", "bias_initializer")


def cell_initializers(initialization, units, names=KERAS_RNN_WEIGHTS, forget_gate=True):
    """Keyword arguments of a recurrent layer of `units` units (empty for "keras").

    Args:
        initialization: a scheme or a dict (its ``"lstm"`` part applies).
        units: the layer's units H (`recurrent_initializer`).
        names: the layer's initializer arguments; each gets its own draw.
        forget_gate: the layer has ``unit_forget_bias`` (set to False: PyTorch has
            no forget-gate offset).

    Returns:
        dict: the initializer keyword arguments of the layer.
    """
    if recurrent_initializer(initialization, units) is None:
        return {}
    kwargs = {name: recurrent_initializer(initialization, units) for name in names}
    if forget_gate:
        kwargs["unit_forget_bias"] = False
    return kwargs


def lstm_initializers(initialization, units, cell="lstm"):
    """Keyword arguments of a `keras.layers.LSTM` of `units` units (empty for "keras").

    Args:
        initialization: a scheme or a dict (its ``"lstm"`` part applies).
        units: the layer's units H.
        cell: "lstm", or "gru" / "rnn" for a `keras.layers.GRU` / `SimpleRNN`, which
            PyTorch initialises alike and which have no forget gate.

    Returns:
        dict: the initializer keyword arguments of the layer.
    """
    return cell_initializers(initialization, units, forget_gate=cell == "lstm")


def softmax_initializers(initialization, fan_in):
    """Keyword arguments of the softmax `keras.layers.Dense` on `fan_in` features."""
    if _scheme(initialization, "softmax") == "keras":
        return {}
    return {"kernel_initializer": _uniform(TORCH_EMBEDDING_RANGE),
            "bias_initializer": _uniform(1.0 / math.sqrt(fan_in))}  # nn.Linear's bias
