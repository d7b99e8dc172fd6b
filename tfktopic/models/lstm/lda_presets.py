"""Presets of the LDA+LSTM baseline (Lau, Baldwin & Cohn, ACL 2017; TCNLM Table 2).

Pure data in the `tfktopic.presets` schema (``model`` = `LDALSTMLanguageModel`
constructor arguments, ``data``, ``training`` -- ``lda_passes`` is the gensim
LDA fit's budget --, ``description``, ``reference_documents``). ``small`` and
``medium`` are the LM sizes shared by every family (the benchmarks' quick /
medium).
"""

from tfktopic.models.budget import CONVERGE

_DATA = {"max_len": 30, "context_len": 300}

PRESETS = {
    "paper": {
        "description": "the small models of Lau et al. 2017 / TCNLM Table 2: 1 x 600, "
                       "embeddings 300, LDA with 50 topics (Table 2: 50 / 100 / 150)",
        "model": {"num_topics": 50, "embedding_dim": 300, "hidden_dim": 600, "num_layers": 1,
                  "dropout": 0.4,            # TDLM lm_keep_prob 0.6
                  "lda_iterations": 50},     # gensim's default E-step budget
        "data": dict(_DATA),
        "training": {"learning_rate": 1e-3, "clipnorm": 5.0, "batch_size": 64, "epochs": 10,
                     "lda_passes": 20},      # passes: not stated in the papers
    },
    "large": {
        "description": "TCNLM Table 2 large: 2 x 900",
        "model": {"num_topics": 50, "embedding_dim": 300, "hidden_dim": 900, "num_layers": 2,
                  "dropout": 0.4, "lda_iterations": 50},
        "data": dict(_DATA),
        "training": {"learning_rate": 1e-3, "clipnorm": 5.0, "batch_size": 64, "epochs": 10,
                     "lda_passes": 20},
    },
    "small": {
        "description": "the shared small LM (32-d embeddings, 1 x 64) with a 10-topic LDA "
                       "(tests, quick benchmarks)",
        "model": {"num_topics": 10, "embedding_dim": 32, "hidden_dim": 64, "num_layers": 1,
                  "dropout": 0.0, "lda_iterations": 50},
        "data": dict(_DATA),
        "training": {"learning_rate": 3e-3, "clipnorm": 5.0, "batch_size": 64, **CONVERGE,
                     "lda_passes": 5},
    },
    "medium": {
        "description": "the shared medium LM (128-d embeddings, 1 x 256, dropout 0.3) with a "
                       "50-topic LDA",
        "model": {"num_topics": 50, "embedding_dim": 128, "hidden_dim": 256, "num_layers": 1,
                  "dropout": 0.3, "lda_iterations": 50},
        "data": {**_DATA, "min_count": 10},
        "training": {"learning_rate": 2e-3, "clipnorm": 5.0, "batch_size": 64, "epochs": 6,
                     "lda_passes": 10},
    },
}
