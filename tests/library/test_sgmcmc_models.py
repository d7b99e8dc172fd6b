"""SGLD / pSGLD train every model family of the package (issue 15).

TopicRNN, TCNLM, LDA+LSTM and rGBN-RNN have their own `train_step` (rGBN-RNN
also builds its optimizer in `compile`); the Langevin optimizers only see
(gradient, variable) pairs, so they must work unchanged. Tiny runs on the
first Lee documents through `train_run` (the `tfktopic train MODEL
--optimizer psgld` path): the training loss is finite and falls.
"""

import json
import math

import pytest

from tfktopic.runs import train_run

TINY_MODELS = {
    "topicrnn": {"hidden_dim": 32, "embedding_dim": 16},
    "tcnlm": {"hidden_dim": 32, "factor_dim": 32, "embedding_dim": 16},
    "lda_lstm": {"hidden_dim": 32, "embedding_dim": 16},
    "rgbn_rnn": {"hidden_sizes": [16, 8], "topic_sizes": [8, 4], "embedding_dim": 16},
}


#: Every model shares `TopicLanguageModel.train_step` now; the default run keeps the
#: Gaussian topic model (``tests/test_cli.py`` trains an LSTM with pSGLD under a mirrored
#: strategy), ``-m slow`` the others, rGBN-RNN's MCMC step included.
QUICK = ("topicrnn",)


@pytest.mark.parametrize("model_name", [
    name if name in QUICK else pytest.param(name, marks=pytest.mark.slow)
    for name in sorted(TINY_MODELS)])
def test_psgld_trains_every_model_family(model_name, tmp_path):
    out = tmp_path / model_name
    train_run(model_name, out, corpus="lee", max_documents=40, epochs=3,
              batch_size=64 if model_name == "rgbn_rnn" else 128, optimizer="psgld",
              learning_rate=1e-2, overrides=TINY_MODELS[model_name], verbose=0,
              log=lambda *a: None)
    run = json.loads((out / "run.json").read_text())
    assert run["training"]["optimizer"] == "psgld"
    losses = [h["loss"] for h in run["progress"]["history"]]
    assert len(losses) == 3 and all(math.isfinite(x) for x in losses)
    assert losses[-1] < losses[0], losses
