"""Presets of rGBN-RNN and GBN-RNN (Guo et al., ICML 2020; reference rgbn_rnn.md §7).

Pure data in the `tfktopic.presets` schema (``model`` = `RGBNRNN` constructor
arguments, ``data``, ``training``, ``description``). Entries of `PER_LAYER_KEYS`
are per-layer tuples; `cut_layers` (called by `RGBNRNN.from_preset`, the one
place that does it) cuts them to the requested number of layers, so ``--set
num_layers=1`` of the 3-layer presets gives their first layer. ``small`` and
``medium`` have the first layer of the LM sizes shared by every family
(the benchmarks' quick / medium: 32-d embeddings and 64 units; 128-d and 256) with
deeper layers of half the width. The Adam optimizer of a preset's ``training``
(learning-rate decay, clipping) is `tfktopic.runs.training.adam_optimizer`.

**The ``coherent`` preset** (issue 14) = ``medium`` + `COHERENT_CHANGES` (Phi^1 starts
at a training-split LDA, TLASGR steps eps_0 = 0.02 instead of the paper's 1); the
defaults and ``medium`` stay the paper's. Measured reason for the deviation: with the
paper's steps from a random start, 1-layer topics stay below LDA's NPMI, and the LDA start
with small steps reaches it at no perplexity cost (numbers and sources:
docs/results/study.md, "rGBN-RNN topic quality").

Example:
>>> PRESETS["paper"]["model"]["hidden_sizes"]
(600, 512, 256)
>>> cut_layers(PRESETS["paper"]["model"], 1)["topic_sizes"]
(100,)
"""

from tfktopic.models.budget import CONVERGE

__all__ = ["PRESETS", "GBN_PRESETS", "PAPER_HIDDEN_SIZES", "PAPER_TOPIC_SIZES", "SMALL_STEP_SIZE",
           "PER_LAYER_KEYS", "COHERENT_CHANGES", "cut_layers"]


# The paper's LSTM and topic sizes for 1, 2 and 3 layers (reference rgbn_rnn.md §7).
PAPER_HIDDEN_SIZES = {1: (600,), 2: (600, 512), 3: (600, 512, 256)}
PAPER_TOPIC_SIZES = {1: (100,), 2: (100, 80), 3: (100, 80, 50)}

#: Model settings given per layer (bottom first), cut by `cut_layers`.
PER_LAYER_KEYS = ("hidden_sizes", "topic_sizes", "encoder_units", "kl_weights")

# Documents are chunks of J = 8 sentences of T = 30 tokens, each with the
# (up to) 300 context words of its document (B = J = 8, T = 30 in the paper).
_DATA = {"sentences_per_chunk": 8, "max_len": 30, "context_len": 300}
# Adam without a learning-rate decay; 0.75 is the sampling temperature of the
# released code's generation.
_ADAM = {"decay_steps": None, "decay_rate": None, "clipvalue": None, "batch_size": 8,
         "temperature": 0.75}

#: TLASGR eps_0 of ``small`` (the defaults): TLASGR's own K = 10 topics are less coherent than
#: the LDA start, so its steps wear it, the more the more updates an epoch takes (IMDB 10k
#: seed 1, rGBN-RNN: 0.001 -> 0.64 x LDA's NPMI, 2e-4 -> 0.95 x at the same perplexity;
#: docs/results/defaults.md).
SMALL_STEP_SIZE = 0.0002

PRESETS = {
    "paper": {
        "description": "Guo et al. 2020 as written: eq. 7 with unit weights, the recurrent "
                       "encoder of eq. 9, a vector Weibull shape, the gates of eq. 4, LSTM "
                       "600-512-256, topics 100-80-50, dropout 0.4, Adam 1e-3 clipped at 5, "
                       "5 epochs",
        "model": {"num_layers": 3, "hidden_sizes": (600, 512, 256), "topic_sizes": (100, 80, 50),
                  "embedding_dim": 300, "dropout": 0.4, "encoder_recurrent": True,
                  "scalar_k": False, "gate_orientation": "paper", "tm_weight": 1.0,
                  "kl_weights": (1.0, 1.0, 1.0), "tau0": 1.0, "recurrent": True},
        "data": {**_DATA, "min_count": 10},
        "training": {**_ADAM, "learning_rate": 1e-3, "clipnorm": 5.0, "epochs": 5},
    },
    # LSTM sizes 600-512-256 as config_test.py (config.py's 600-600-600 only type-checks
    # the flipped variant); reference rgbn_rnn.md §1.3, §2.2, §3.3, §5.1, §7.
    "reference_code": {
        "description": "the released joint code (BoChenGroup model_layer3 + train.py): loss "
                       "0.001 * tm_loss + lm_loss, KL weights 0.1/0.01/0.001, non-recurrent "
                       "encoder, scalar k, the code's gate orientation, element-wise "
                       "clipping at 1, Adam 1e-3 * 0.98^(t/5000), 30 epochs",
        "model": {"num_layers": 3, "hidden_sizes": (600, 512, 256), "topic_sizes": (100, 80, 50),
                  "embedding_dim": 300, "dropout": 0.4, "encoder_recurrent": False,
                  "scalar_k": True, "gate_orientation": "code", "tm_weight": 0.001,
                  "kl_weights": (0.1, 0.01, 0.001), "tau0": 1.0, "recurrent": True},
        "data": {**_DATA, "min_count": 10},
        "training": {**_ADAM, "learning_rate": 1e-3, "decay_steps": 5000, "decay_rate": 0.98,
                     "clipnorm": None, "clipvalue": 1.0, "epochs": 30},
    },
    "medium": {
        "description": "the shared medium LM (128-d embeddings, 256 units in the first layer, "
                       "dropout 0.3, Adam 2e-3 clipped at 5) with the paper's topic sizes: "
                       "LSTM 256-128-64, topics 100-80-50 (--set num_layers=1: 256 units, "
                       "100 topics)",
        "model": {"num_layers": 3, "hidden_sizes": (256, 128, 64), "topic_sizes": (100, 80, 50),
                  "embedding_dim": 128, "dropout": 0.3, "encoder_recurrent": True,
                  "scalar_k": False, "gate_orientation": "paper", "tm_weight": 1.0,
                  "kl_weights": (1.0, 1.0, 1.0), "tau0": 1.0, "recurrent": True},
        "data": {**_DATA, "min_count": 10},
        "training": {**_ADAM, "learning_rate": 2e-3, "clipnorm": 5.0, "epochs": 6},
    },
    "small": {
        "description": "the shared small LM (32-d embeddings, 64 units in the first layer) "
                       "with 10 topics: LSTM 64-32, topics 10-5; Phi^1 from a training-split "
                       "LDA with TLASGR steps eps_0 = 2e-4, trained until validation stops "
                       "improving (docs/results/defaults.md)",
        "model": {"num_layers": 2, "hidden_sizes": (64, 32), "topic_sizes": (10, 5),
                  "embedding_dim": 32, "dropout": 0.0, "encoder_recurrent": True,
                  "scalar_k": False, "gate_orientation": "paper", "tm_weight": 1.0,
                  "kl_weights": (1.0, 1.0), "tau0": 1.0, "recurrent": True,
                  "decoder_init": "lda", "tlasgr": {"step_size": SMALL_STEP_SIZE}},
        "data": {**_DATA, "min_count": 3},
        "training": {**_ADAM, "learning_rate": 1e-2, "clipnorm": 5.0, **CONVERGE},
    },
}
#: ``medium`` with the fixes of issue 14 (docs/results/study.md, "rGBN-RNN topic quality"):
#: Phi^1 starts at the training split's LDA and TLASGR takes 50 times smaller steps
#: (eps_0 = 0.02), so it refines the LDA's topics instead of replacing them by one
#: mini-batch's estimate at its first step.
COHERENT_CHANGES = {"decoder_init": "lda", "tlasgr": {"step_size": 0.02}}
PRESETS["coherent"] = {
    **PRESETS["medium"],
    "description": "medium with coherent topics: Phi^1 starts at an LDA of the training "
                   "split (decoder_init='lda') and TLASGR-MCMC steps eps_0 = 0.02 "
                   "(tlasgr step_size) instead of 1",
    "model": {**PRESETS["medium"]["model"], **COHERENT_CHANGES},
}

#: GBN-RNN: the same presets without the topic transitions Pi (``recurrent=False``).
GBN_PRESETS = {name: {**entry, "model": {**entry["model"], "recurrent": False}}
               for name, entry in PRESETS.items()}


def cut_layers(settings, num_layers):
    """Model settings with their per-layer entries for `num_layers` layers.

    With fewer layers than a preset's lists, their first L entries (the paper's
    600 / 600-512 and 100 / 100-80 for ``paper``); with more, a list of equal
    values (e.g. unit KL weights) is extended, any other must be given.

    Args:
        settings: model settings (constructor arguments; not changed).
        num_layers: L >= 1.

    Returns:
        a new dict with ``num_layers`` = L and the `PER_LAYER_KEYS` cut.

    Raises:
        ValueError: a per-layer list shorter than L that is not uniform (named).
    """
    settings = dict(settings)
    num_layers = int(num_layers)
    for key in PER_LAYER_KEYS:
        if settings.get(key) is None:
            continue
        values = tuple(settings[key])
        if len(values) < num_layers and len(set(values)) == 1:
            values = values * num_layers
        elif len(values) < num_layers:
            raise ValueError(f"num_layers={num_layers} exceeds the {len(values)} layers of "
                             f"the preset's {key}: pass {key}")
        settings[key] = values[:num_layers]
    settings["num_layers"] = num_layers
    return settings
