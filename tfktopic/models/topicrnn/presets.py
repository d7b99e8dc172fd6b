"""Presets of TopicRNN (Dieng et al., ICLR 2017; reference sgmcmc_and_topicrnn.md §B7).

Pure data in the `tfktopic.presets` schema (``model`` = `TopicRNN` constructor
arguments, ``data``, ``training``, ``description``, ``reference_documents``).
The paper does not give the batch size, learning rate or BPTT length for PTB:
ours are marked "ours". ``small`` and ``medium`` are the LM sizes shared by
every family (the benchmarks' quick / medium).
"""

from tfktopic.models.budget import CONVERGE

_PTB_DATA = {
    "dataset": "ptb",
    "sentences_per_document": 10,   # §4.1: documents = blocks of 10 sentences (Mikolov & Zweig)
    "min_count": 1,                 # PTB is already <unk>-ed to 10k types
    "stopwords": "mallet",          # the paper's 449-word list is not published (§B7)
    "max_freq_fraction": 0.0,       # §4.1: only stop words are removed from X_c
    "max_len": 30,                  # ours: sentence windows of <= 30 predicted tokens
    "context_len": 300,
}
_PTB_MODEL = {
    "num_layers": 1,                # §4.1: "1 layer for the RNN ... in all word prediction experiments"
    "encoder_units": (200, 200),    # §4.1: inference MLP, 2 hidden layers x 200 ReLU
    "variant": "paper",
    "dropout": 0.0,                 # §4.1: no dropout
    "cell": "rnn",
}
_PTB_TRAINING = {
    "optimizer": "adam",            # §4.1
    "learning_rate": 1e-3,          # ours (not given)
    "batch_size": 64,               # ours (not given)
    "epochs": 15,                   # §4.1: at most 15 epochs, early stopping on validation
    "patience": 2,                  # ours: early stopping on validation perplexity
}


def _ptb(hidden_dim, num_topics, description):
    return {"description": description,
            "model": {**_PTB_MODEL, "hidden_dim": hidden_dim, "num_topics": num_topics},
            "data": dict(_PTB_DATA), "training": dict(_PTB_TRAINING)}


PRESETS = {
    "ptb_10": _ptb(10, 18, "Table 2, 10 neurons: K = 18 topics"),
    "ptb_100": _ptb(100, 50, "Table 2, 100 neurons: K = 50 (also Table 1's topics)"),
    "ptb_300": _ptb(300, 50, "Table 2, 300 neurons: K = 50"),
    "paper": _ptb(100, 50, "the default paper setup: PTB, 100 neurons, 50 topics "
                           "(Tables 1-2)"),
    # §4.2 IMDB sentiment: vocabulary 5,000, stop words removed from X_c, inference net
    # 2 x 500, RNN 2 x 300, 200 topics, no dropout, 13 epochs; features [mu(X_c), h_T] ->
    # 50 sigmoid units -> sigmoid. Reviews are one sequence truncated at 400 tokens
    # (Walter1218's max_seqlen; ours).
    "imdb": {
        "description": "§4.2 IMDB sentiment: RNN 2 x 300, 200 topics, inference net 2 x 500",
        "model": {"hidden_dim": 300, "num_layers": 2, "num_topics": 200,
                  "encoder_units": (500, 500), "cell": "rnn", "variant": "paper",
                  "dropout": 0.0},
        "data": {"dataset": "imdb", "max_size": 5000, "min_count": 1, "stopwords": "mallet",
                 "max_freq_fraction": 0.0, "max_len": 400},
        "training": {"optimizer": "adam", "learning_rate": 3e-4, "batch_size": 32,
                     "epochs": 13, "classifier_units": 50, "classifier_epochs": 100},
    },
    "small": {
        "description": "the shared small LM (32-d embeddings, 1 x 64 LSTM) with 10 topics, B "
                       "started from a training-split LDA scaled by 0.1 (as `coherent`), "
                       "trained until validation stops improving (docs/results/defaults.md)",
        "model": {"embedding_dim": 32, "hidden_dim": 64, "num_layers": 1, "num_topics": 10,
                  "encoder_units": (64,), "cell": "lstm", "variant": "paper", "dropout": 0.0,
                  "decoder_init": "lda", "lda_scale": 0.1},
        "data": {"dataset": "lee", "min_count": 3, "stopwords": "gensim",
                 "max_freq_fraction": 0.001, "max_len": 30, "context_len": 300},
        "training": {"optimizer": "adam", "learning_rate": 3e-3, "batch_size": 64, **CONVERGE},
    },
    "medium": {
        "description": "the shared medium LM (128-d embeddings, 1 x 256 LSTM, dropout 0.3) "
                       "with 50 topics and the paper's 2 x 200 inference net",
        "model": {"embedding_dim": 128, "hidden_dim": 256, "num_layers": 1, "num_topics": 50,
                  "encoder_units": (200, 200), "cell": "lstm", "variant": "paper",
                  "dropout": 0.3},
        "data": {"min_count": 10, "stopwords": "gensim", "max_freq_fraction": 0.001,
                 "max_len": 30, "context_len": 300},
        "training": {"optimizer": "adam", "learning_rate": 2e-3, "batch_size": 64, "epochs": 6,
                     "clipnorm": 5.0},
    },
}

PRESETS["coherent"] = {
    "description": "medium with B started from a training-split LDA scaled by 0.1 "
                   "(decoder_init='lda', lda_scale=0.1; issue 14). APNEWS, 6 epochs, seeds "
                   "0-2: NPMI 0.089 +- 0.008 (1.24 x LDA's 0.072; medium 0.047), diversity "
                   "0.82, test ppl 76.97 +- 0.99 (medium 80.32 +- 1.02, lower in every "
                   "seed); needs topic_word_init when built outside tfktopic.runs",
    "model": {**PRESETS["medium"]["model"], "decoder_init": "lda", "lda_scale": 0.1},
    "data": dict(PRESETS["medium"]["data"]),
    "training": dict(PRESETS["medium"]["training"]),
}

#: The presets of the streamed document-level TopicRNN (`DocumentTopicRNN`, a TopicLSTM):
#: the LSTM presets above without ``cell``, and ``paper``: Zheng, Vafa & Blei's TopicRNN
#: (``carolinazheng/revisiting-tglms`` train.py defaults; reference sgmcmc_and_topicrnn.md).
STREAMED_PRESETS = {
    **{name: {**entry, "model": {k: v for k, v in entry["model"].items() if k != "cell"}}
       for name, entry in PRESETS.items()
       if entry["model"].get("cell") == "lstm"},
    "paper": {
        "description": "Zheng et al.'s TopicRNN: 300-d embeddings, 1 x 600 LSTM, dropout 0.4, "
                       "50 topics, theta encoder 2 x 256, Adam 1e-3, batch 64, BPTT 30",
        "model": {"embedding_dim": 300, "hidden_dim": 600, "num_layers": 1, "num_topics": 50,
                  "encoder_units": (256, 256), "variant": "disjoint", "dropout": 0.4},
        "data": {"min_count": 10, "stopwords": "mallet", "max_freq_fraction": 0.0,
                 "max_len": 30, "context_len": 300, "bptt": 30,
                 "train_context": "whole_document"},
        "training": {"optimizer": "adam", "learning_rate": 1e-3, "batch_size": 64,
                     "epochs": 30},
    },
}
