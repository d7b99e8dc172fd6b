"""Hyperparameter presets of rGBN-RNN / GBN-RNN and the Adam optimizer they train with.

``PRESETS`` are plain dicts holding constructor arguments of `RGBNRNN` and
training settings (`TRAINING_KEYS`) side by side (DESIGN.md §3); entries of
`PER_LAYER_KEYS` are per-layer tuples that `RGBNRNN.from_preset` cuts to the
requested number of layers. Sizes and settings: reference rgbn_rnn.md §7.

Example:
>>> optimizer = make_optimizer(PRESETS["reference_code"])   # Adam 1e-3 * 0.98^(t/5000)
"""

import keras

__all__ = ["PRESETS", "PAPER_HIDDEN_SIZES", "PAPER_TOPIC_SIZES", "TRAINING_KEYS",
           "PER_LAYER_KEYS", "make_optimizer"]

# The paper's LSTM and topic sizes for 1, 2 and 3 layers (reference rgbn_rnn.md §7).
PAPER_HIDDEN_SIZES = {1: (600,), 2: (600, 512), 3: (600, 512, 256)}
PAPER_TOPIC_SIZES = {1: (100,), 2: (100, 80), 3: (100, 80, 50)}


# Constructor arguments vs training settings of a preset (plain dicts, DESIGN.md §3).
TRAINING_KEYS = ("learning_rate", "decay_steps", "decay_rate", "clipnorm", "clipvalue",
                 "batch_size", "sentences_per_chunk", "max_len", "context_len", "epochs",
                 "min_count", "temperature")
PER_LAYER_KEYS = ("hidden_sizes", "topic_sizes", "encoder_units", "kl_weights")

PRESETS = {
    # Guo et al. 2020 as written: eq. 7 with unit weights, the recurrent
    # encoder of eq. 9, a vector Weibull shape, gate orientation of eq. 4,
    # Adam 1e-3 with global-norm clipping 5, dropout 0.4, 5 epochs, B = J = 8,
    # T = 30, 300 context words (reference rgbn_rnn.md §7, "paper" column).
    "paper": {
        "num_layers": 3, "hidden_sizes": (600, 512, 256), "topic_sizes": (100, 80, 50),
        "embedding_dim": 300, "dropout": 0.4, "encoder_recurrent": True, "scalar_k": False,
        "gate_orientation": "paper", "tm_weight": 1.0, "kl_weights": (1.0, 1.0, 1.0),
        "tau0": 1.0,
        "learning_rate": 1e-3, "decay_steps": None, "decay_rate": None, "clipnorm": 5.0,
        "clipvalue": None, "batch_size": 8, "sentences_per_chunk": 8, "max_len": 30,
        "context_len": 300, "epochs": 5, "min_count": 10, "temperature": 0.75,
    },
    # The released joint code (BoChenGroup model_layer3 + train.py; reference
    # rgbn_rnn.md §1.3, §2.2, §3.3, §5.1, §7): loss 0.001 * tm_loss + lm_loss,
    # KL weights 0.1/0.01/0.001, non-recurrent encoder, scalar k, the code's
    # gate orientation with all biases 1, element-wise gradient clipping at 1,
    # Adam 1e-3 * 0.98^(t/5000), 30 epochs (config.py). LSTM sizes 600-512-256
    # as config_test.py (config.py's 600-600-600 only type-checks the flipped
    # variant).
    "reference_code": {
        "num_layers": 3, "hidden_sizes": (600, 512, 256), "topic_sizes": (100, 80, 50),
        "embedding_dim": 300, "dropout": 0.4, "encoder_recurrent": False, "scalar_k": True,
        "gate_orientation": "code", "tm_weight": 0.001, "kl_weights": (0.1, 0.01, 0.001),
        "tau0": 1.0,
        "learning_rate": 1e-3, "decay_steps": 5000, "decay_rate": 0.98, "clipnorm": None,
        "clipvalue": 1.0, "batch_size": 8, "sentences_per_chunk": 8, "max_len": 30,
        "context_len": 300, "epochs": 30, "min_count": 10, "temperature": 0.75,
    },
    # The medium size of BENCHMARKS.md (the shared medium LM: 128-d embeddings,
    # 256 units in the first layer, dropout 0.3, Adam 2e-3 clipped at 5) with the
    # paper's topic sizes; per-layer tuples cut by num_layers ("--set num_layers=1":
    # one 256-unit layer with 100 topics; 3 layers: 256-128-64, 100-80-50).
    "medium": {
        "num_layers": 3, "hidden_sizes": (256, 128, 64), "topic_sizes": (100, 80, 50),
        "embedding_dim": 128, "dropout": 0.3, "encoder_recurrent": True, "scalar_k": False,
        "gate_orientation": "paper", "tm_weight": 1.0, "kl_weights": (1.0, 1.0, 1.0),
        "tau0": 1.0,
        "learning_rate": 2e-3, "decay_steps": None, "decay_rate": None, "clipnorm": 5.0,
        "clipvalue": None, "batch_size": 8, "sentences_per_chunk": 8, "max_len": 30,
        "context_len": 300, "epochs": 6, "min_count": 10, "temperature": 0.75,
    },
    # Small, CPU-friendly sizes for smoke runs and tests (not from the paper).
    "small": {
        "num_layers": 2, "hidden_sizes": (64, 48), "topic_sizes": (20, 10),
        "embedding_dim": 48, "dropout": 0.2, "encoder_recurrent": True, "scalar_k": False,
        "gate_orientation": "paper", "tm_weight": 1.0, "kl_weights": (1.0, 1.0),
        "tau0": 1.0,
        "learning_rate": 3e-3, "decay_steps": None, "decay_rate": None, "clipnorm": 5.0,
        "clipvalue": None, "batch_size": 8, "sentences_per_chunk": 8, "max_len": 30,
        "context_len": 300, "epochs": 3, "min_count": 3, "temperature": 0.75,
    },
}


def make_optimizer(preset):
    """The Adam optimizer of a preset (learning-rate decay and clipping).

    Args:
        preset: a `PRESETS` entry (or any dict with ``learning_rate`` and
            optionally ``decay_steps``/``decay_rate``, ``clipnorm``, ``clipvalue``).

    Returns:
        A `keras.optimizers.Adam`.
    """
    rate = float(preset.get("learning_rate", 1e-3))
    if preset.get("decay_steps"):
        # Continuous (non-staircase) decay, as the released code.
        rate = keras.optimizers.schedules.ExponentialDecay(
            rate, int(preset["decay_steps"]), float(preset["decay_rate"]))
    return keras.optimizers.Adam(rate, clipnorm=preset.get("clipnorm"),
                                 clipvalue=preset.get("clipvalue"))
