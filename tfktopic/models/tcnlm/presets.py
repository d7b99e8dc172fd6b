"""Presets of TCNLM (Wang et al., AISTATS 2018; reference tcnlm_and_evaluation.md).

Pure data in the `tfktopic.presets` schema (``model`` = `TCNLM` constructor
arguments, ``data``, ``training``, ``description``, ``reference_documents``).
The paper's topic-vocabulary rule ``min_doc_freq=100`` is given for the 50K
APNEWS training documents (``reference_documents``): `tfktopic.presets.Preset.
resolve_data` scales it down for a smaller corpus. ``small`` and ``medium`` are
the LM sizes shared by every family (the benchmarks' quick / medium); n_f = n_h.
"""

from tfktopic.models.budget import CONVERGE

_PAPER_DATA = {
    # TDLM preprocessing, which TCNLM follows (reference §2.2-2.3, Table 1).
    "min_count": 10,                 # LM vocabulary: types seen >= 10 times
    "stopwords": "mallet_en.txt",    # topic vocabulary: minus Mallet's stop list,
    "max_freq_fraction": 0.001,      # the top 0.1 % most frequent types,
    "min_doc_freq": 100,             # and words in < 100 of the 50K documents (TCNLM §4)
    "max_len": 30,                   # LM sequence length
    "context_len": 300,              # context words per sentence
    "train_protocol": "all_other",   # training context: the rest of the document
}
_PAPER_TRAINING = {
    # "Adam, NTM and NLM trained jointly" (TCNLM §4); the rest is not given by the paper:
    # TDLM's values (reference §1.7, §2.8).
    "optimizer": "adam",
    "learning_rate": 1e-3,
    "batch_size": 64,
    "epochs": 10,                    # with early stopping on the validation perplexity
    "clipnorm": 5.0,
}
_APNEWS_TRAIN_DOCUMENTS = 50000


def _paper(description, **model):
    base = {"num_topics": 50, "embedding_dim": 300, "ntm_units": (256, 256),
            "diversity_weight": 0.1, "mixture": "factorized", "dropout": 0.4}
    return {"description": description, "model": {**base, **model}, "data": dict(_PAPER_DATA),
            "training": dict(_PAPER_TRAINING),
            "reference_documents": _APNEWS_TRAIN_DOCUMENTS}


PRESETS = {
    # n_x = 300 and n_f = n_h are our choices (reference §1.7).
    "paper": _paper("TCNLM small (§4, Table 2): 1 x 600 LSTM, dropout 0.4, lambda 0.1, NTM "
                    "2 x 256; APNEWS 50 topics: 52.75", hidden_dim=600, num_layers=1,
                    factor_dim=600),
    "paper_large": _paper("TCNLM large (Table 2): 2 x 900, both layers topic-compositional; "
                          "APNEWS 50 topics: 48.07", hidden_dim=900, num_layers=2,
                          factor_dim=900),
    "paper_table6": _paper("Table 6: 30 topics, 1 x 100 LSTM (APNEWS: basic LSTM 101.62, naive "
                           "MoE 85.87, TCNLM 82.67)", num_topics=30, hidden_dim=100,
                           num_layers=1, factor_dim=100),
    "paper_table6_moe": _paper("Table 6's naive mixture of 30 LSTM experts (eq. 7)",
                               num_topics=30, hidden_dim=100, num_layers=1, mixture="moe"),
    # Not from the paper: the README's demo on the Lee corpus (gensim's 300 news documents).
    # 0.5 % of Lee's ~7.4K raw types are dropped from the topic vocabulary as too frequent
    # ("said", "says", "mr"; the papers' 0.1 % assumes a 30K+ type corpus).
    # Its topic decoder starts from an LDA of the training split (decoder_init="lda", as the
    # `coherent` preset): on Lee (README main job, 3 seeds) NPMI 0.043 -> 0.148 against 0.145
    # for a 10-topic gensim LDA, test perplexity 94.14 -> 90.35
    # (studies/results/topics/lee_main_job.json).
    "small": {
        "description": "the shared small LM (32-d embeddings, 1 x 64) with 10 topics and an "
                       "LDA-initialised topic decoder, trained until validation stops "
                       "improving (about a minute on 2 CPU cores on the Lee corpus)",
        "model": {"num_topics": 10, "embedding_dim": 32, "hidden_dim": 64, "num_layers": 1,
                  "factor_dim": 64, "ntm_units": (64, 64), "diversity_weight": 0.1,
                  "mixture": "factorized", "dropout": 0.4, "decoder_init": "lda"},
        "data": {"min_count": 3, "stopwords": "gensim", "max_freq_fraction": 0.005,
                 "min_doc_freq": 2, "max_len": 30, "context_len": 300,
                 "train_protocol": "all_other"},
        "training": {"optimizer": "adam", "learning_rate": 1e-2, "batch_size": 64,
                     **CONVERGE, "clipnorm": 5.0},
    },
    "medium": {
        "description": "the shared medium LM (128-d embeddings, 1 x 256, dropout 0.3) with 50 "
                       "topics and the paper's NTM; min_doc_freq 5 for APNEWS' 1,600 training "
                       "documents",
        "model": {"num_topics": 50, "embedding_dim": 128, "hidden_dim": 256, "num_layers": 1,
                  "factor_dim": 256, "ntm_units": (256, 256), "diversity_weight": 0.1,
                  "mixture": "factorized", "dropout": 0.3},
        "data": {"min_count": 10, "stopwords": "mallet_en.txt", "max_freq_fraction": 0.001,
                 "min_doc_freq": 5, "max_len": 30, "context_len": 300,
                 "train_protocol": "all_other"},
        "training": {"optimizer": "adam", "learning_rate": 2e-3, "batch_size": 64,
                     "epochs": 6, "clipnorm": 5.0},
        "reference_documents": 1600,
    },
}
# Not from the paper: the medium model with the fix of issue 14's measurements (TCNLM's
# docstring, "Topic quality"): the NTM's decoder starts from a gensim LDA of the training
# split (`tfktopic.runs.build_model` fits it), which the joint training then refines.
PRESETS["coherent"] = {
    "description": "medium with an LDA-initialised topic decoder (decoder_init='lda'): the "
                   "randomly initialised NTM collapses its topics (issue 14). APNEWS, 3 "
                   "seeds: NPMI 0.087 (1.15-1.24 x LDA; medium 0.025), diversity 0.55, test "
                   "ppl 84.43 (medium 84.62); needs topic_word_init when built outside "
                   "tfktopic.runs",
    "model": {**PRESETS["medium"]["model"], "decoder_init": "lda"},
    "data": dict(PRESETS["medium"]["data"]),
    "training": dict(PRESETS["medium"]["training"]),
    "reference_documents": PRESETS["medium"]["reference_documents"],
}
PRESETS["paper_small"] = PRESETS["paper"]   # alias: the paper's "small" model
PRESETS["demo"] = PRESETS["small"]          # alias: the README demo
