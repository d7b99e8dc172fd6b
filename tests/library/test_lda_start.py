"""``decoder_init="lda"`` through the run glue (`tfktopic.runs.build_model`): every model that
takes it starts its topic-word weights from an LDA of the run's training split."""

import numpy as np
import pytest

from tfktopic import runs
from tfktopic.models.lstm.lda_lstm import fit_lda


def _softmax_rows(logits):
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


#: model -> (tiny --set overrides, its topic-word distributions [K, V_c], a topic to rank)
CASES = {
    "tcnlm": ({"hidden_dim": 8, "embedding_dim": 8, "ntm_units": [8]},
              lambda model: model.beta(), 0),
    # (lda_scale 1: B's softmax is then the LDA's topics themselves; `small` scales by 0.1)
    "topicrnn": ({"hidden_dim": 8, "embedding_dim": 8, "encoder_units": [8], "lda_scale": 1.0},
                 lambda model: _softmax_rows(np.asarray(model.gate.topic_word, np.float64)), 3),
    "doc_topicrnn": ({"hidden_dim": 8, "embedding_dim": 8, "encoder_units": [8],
                      "lda_scale": 1.0},
                     lambda model: _softmax_rows(np.asarray(model.gate.topic_word, np.float64)),
                     3),
    "gbn_rnn": ({"num_layers": 1, "hidden_sizes": [8], "embedding_dim": 8},
                lambda model: model.topic_word_matrix(0), 0),
}


@pytest.mark.parametrize("name", CASES)
def test_lda_start_through_the_run_glue_uses_the_training_split_lda(name):
    overrides, topic_word, topic = CASES[name]
    settings = runs.preset_settings(name, "small")
    runs.apply_overrides(settings, {"decoder_init": "lda", **overrides})
    data = runs.prepare_data(settings, "lee", seed=0)
    model = runs.build_model(settings, data, seed=0, compile=False)
    lda = fit_lda(data.parts["train"], data.topic_vocab, num_topics=10, passes=10, seed=0)
    expected = lda.get_topics() / lda.get_topics().sum(axis=1, keepdims=True)
    np.testing.assert_allclose(topic_word(model), expected, atol=1e-5)
    assert model.topics(5, data.topic_vocab)[topic] == data.topic_vocab.decode(
        [i for i, _ in lda.get_topic_terms(topic, topn=5)])
