"""Presets of Gan et al.'s SG-MCMC setups (ACL 2017; reference sgmcmc_and_topicrnn.md §A3).

Pure data in the `tfktopic.presets` schema (``model``, ``data``, ``training``,
``description``), reached by ``tfktopic.presets.preset(family, name)`` with the
families ``sgmcmc_ptb``, ``sgmcmc_char``, ``sgmcmc_classifier`` and
``sgmcmc_ablation``; `tfktopic.bayes.setups` builds the data, models and
optimizers. ``model`` holds `LSTMLanguageModel` (PTB, characters) or
`tfktopic.bayes.setups.bilstm_classifier` arguments. The paper compares
optimizers on two step-size scales, so ``training["learning_rates"]`` gives the
step size of each optimizer name of `tfktopic.bayes.setups.optimizer` (SGD and
SGLD: "lr" 1 on the mean token loss; RMSprop and pSGLD: 1e-3).

Example:
>>> PTB_PRESETS["small"]["training"]["learning_rates"]["psgld"]
0.001
"""

__all__ = ["PTB_PRESETS", "CHAR_PRESETS", "CLASSIFIER_PRESETS", "ABLATION_PRESETS",
           "ABLATION_SCHEDULE"]

# Step sizes of the authors' code on SGD's and RMSprop's scales.
_PTB_RATES = {"sgd": 1.0, "sgld": 1.0, "rmsprop": 1e-3, "psgld": 1e-3}


def _ptb(size, dropout, clipnorm, epochs, description):
    return {"description": description,
            "model": {"hidden_dim": size, "embedding_dim": size, "num_layers": 2,
                      "dropout": dropout},
            "data": {"num_steps": 20},
            "training": {"batch_size": 20, "clipnorm": clipnorm, "epochs": epochs,
                         "learning_rates": dict(_PTB_RATES)}}


# Table 4 sizes; dropout 0.5 (paper) / 0.65 (code, large).
PTB_PRESETS = {
    "small": _ptb(200, 0.5, 5.0, 13, "PTB word LM, Table 4 small: 2 x 200 LSTM, 20 steps, "
                                     "batches of 20, 13 epochs"),
    "medium": _ptb(650, 0.5, 5.0, 39, "PTB word LM, Table 4 medium: 2 x 650 LSTM, 39 epochs"),
    "large": _ptb(1500, 0.65, 10.0, 55, "PTB word LM, Table 4 large: 2 x 1500 LSTM, dropout "
                                        "0.65, clipping at 10, 55 epochs"),
}

CHAR_PRESETS = {
    "paper": {
        "description": "Karpathy et al.'s character LM used by Gan et al. Table 3: 2 x 128, "
                       "100 x 100 character batches, pSGLD 2e-3, 20 epochs, burn-in 4, a "
                       "sample every half epoch, 32 samples",
        "model": {"hidden_dim": 128, "embedding_dim": 128, "num_layers": 2, "dropout": 0.0},
        "data": {"num_steps": 100},
        "training": {"batch_size": 100, "learning_rates": {"rmsprop": 2e-3, "psgld": 2e-3},
                     "epochs": 20, "burn_in_epochs": 4, "samples_per_epoch": 2,
                     "max_samples": 32},
    },
}

CLASSIFIER_PRESETS = {
    "paper": {
        "description": "§5.3 sentence classification: BiLSTM 200 per direction, dropout 0.5 "
                       "on the embeddings and the concatenated state, pSGLD 1e-3, batch 50, "
                       "20 epochs, averaging after epoch 1",
        "model": {"units": 200, "embedding_dim": 300, "dropout": 0.5},
        "data": {"max_len": 400},
        "training": {"learning_rates": {"rmsprop": 1e-3, "psgld": 1e-3}, "batch_size": 50,
                     "epochs": 20, "burn_in_epochs": 1},
    },
}

# Gan et al. Table 7 (PTB small) ablation: the sampler as the paper writes it
# ("paper": T = 1, Algorithm 1's rho 0.99 and λ outside the root, ordinary
# norm clipping) and as the authors' Theano pSGLD runs it ("authors_code":
# rho 0.9, ε 1e-6 inside the root, the global gradient norm rescaled to 5 at
# every step, and noise of temperature 2/N; reference notes A1.2). The
# RMSprop of a setting is the same optimizer at T = 0 without prior.
# "temperature": "2/N" is resolved by `tfktopic.bayes.setups.ablation_optimizer`.
ABLATION_PRESETS = {
    "paper": {
        "description": "pSGLD as the paper writes it: T = 1, rho 0.99, epsilon 1e-5 outside "
                       "the root, norm clipping at 5",
        "training": {"temperature": 1.0, "rho": 0.99, "epsilon": 1e-5,
                     "epsilon_placement": "outside", "prior_precision": 1.0, "clipnorm": 5.0,
                     "normalize_gradients_to": None},
    },
    "authors_code": {
        "description": "pSGLD as the authors' Theano code runs it: T = 2/N, rho 0.9, epsilon "
                       "1e-6 inside the root, the global gradient norm rescaled to 5",
        "training": {"temperature": "2/N", "rho": 0.9, "epsilon": 1e-6,
                     "epsilon_placement": "inside", "prior_precision": 1.0, "clipnorm": None,
                     "normalize_gradients_to": 5.0},
    },
}

# Table 2's PTB schedule of every ablation run: 40 epochs at most, burn-in 4
# epochs, a sample every half epoch; runs stop early when the validation
# perplexity (RMSprop: of the model; samplers: of the running average) has not
# improved for `patience` epochs. Learning rate 1e-3 (RMSprop-scale), batch 20 x
# 20 steps (the ``sgmcmc_ptb`` ``small`` preset).
ABLATION_SCHEDULE = {"max_epochs": 40, "burn_in_epochs": 4, "samples_per_epoch": 2,
                     "patience": 3, "learning_rate": 1e-3}
