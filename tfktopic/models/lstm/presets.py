"""Presets of the LSTM baselines (``lstm``, ``doc_lstm``): pure data, `tfktopic.presets` schema.

Every entry has ``model`` (constructor arguments of `LSTMLanguageModel`),
``data`` (vocabulary and window settings), ``training`` (optimizer settings),
``description`` and ``reference_documents`` (the corpus size the data rules
were given for; `None`: no rule to scale). ``small`` and ``medium`` are the
LM sizes every family shares (the benchmarks' modes ``quick`` and ``medium``), so
``--preset small`` trains the same LSTM in every family; ``paper`` is the
1-layer LSTM of 600 units that TCNLM (Table 2) and LDA+LSTM compare with. ``small`` trains
to convergence (`tfktopic.models.budget.CONVERGE`; docs/results/defaults.md).
"""

from tfktopic.models.budget import CONVERGE

PRESETS = {
    "small": {
        "description": "the shared small LM (the benchmarks' quick size): 32-d embeddings, "
                       "1 x 64 LSTM, trained until validation stops improving (a few minutes "
                       "on 2 CPU cores for a corpus of Lee's size)",
        "model": {"embedding_dim": 32, "hidden_dim": 64, "num_layers": 1, "dropout": 0.0},
        "data": {"min_count": 3, "stopwords": "gensim", "max_freq_fraction": 0.001,
                 "max_len": 30, "context_len": 300},
        "training": {"optimizer": "adam", "learning_rate": 3e-3, "batch_size": 64, **CONVERGE},
    },
    "medium": {
        "description": "the shared medium LM (the benchmarks' medium size): 128-d embeddings, "
                       "1 x 256 LSTM, dropout 0.3",
        "model": {"embedding_dim": 128, "hidden_dim": 256, "num_layers": 1, "dropout": 0.3},
        "data": {"min_count": 10, "stopwords": "gensim", "max_freq_fraction": 0.001,
                 "max_len": 30, "context_len": 300},
        "training": {"optimizer": "adam", "learning_rate": 2e-3, "batch_size": 64, "epochs": 6,
                     "clipnorm": 5.0},
    },
    "paper": {
        "description": "the basic LSTM of TCNLM Table 2 / TDLM: 300-d embeddings, 1 x 600, "
                       "dropout 0.4",
        "model": {"embedding_dim": 300, "hidden_dim": 600, "num_layers": 1, "dropout": 0.4},
        "data": {"min_count": 10, "stopwords": "mallet_en.txt", "max_freq_fraction": 0.001,
                 "max_len": 30, "context_len": 300},
        "training": {"optimizer": "adam", "learning_rate": 1e-3, "batch_size": 64, "epochs": 10,
                     "clipnorm": 5.0},
    },
}
