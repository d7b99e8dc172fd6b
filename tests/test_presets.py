"""The one preset schema: `Preset`, the data rules, shared sizes, legacy layouts, pretrained names."""

import dataclasses
import inspect

import pytest

from tfktopic import presets
from tfktopic.models import TCNLM, LSTMLanguageModel, registry, tcnlm, topicrnn
from tfktopic.models.lstm import lda_lstm
from tfktopic.runs import settings

LM_FAMILIES = ("lstm", "doc_lstm", "doc_lstm_chunked", "lda_lstm", "topicrnn", "doc_topicrnn",
               "tcnlm")


def test_every_model_has_presets_in_the_schema():
    for name in registry.names():
        assert {"small", "paper"} <= set(presets.names(name)), name
        for preset_name in presets.names(name):
            preset = presets.preset(name, preset_name)
            assert preset.name == preset_name
            cls = registry.get(name).model_class
            # Every model setting is a constructor argument of the model class.
            accepted = set(inspect.signature(cls.__init__).parameters)
            if cls.__name__ == "LDALSTMLanguageModel":
                accepted |= set(inspect.signature(LSTMLanguageModel.__init__).parameters)
            assert set(preset.model) <= accepted, (name, preset_name, set(preset.model) - accepted)


@pytest.mark.parametrize("size", ["small", "medium"])
def test_a_preset_name_is_the_same_lm_size_in_every_family(size):
    sizes = {name: (presets.preset(name, size).model["embedding_dim"],
                    presets.preset(name, size).model["hidden_dim"],
                    presets.preset(name, size).model.get("num_layers", 1))
             for name in LM_FAMILIES}
    assert len(set(sizes.values())) == 1, sizes
    topics = {name: presets.preset(name, size).model["num_topics"]
              for name in ("lda_lstm", "topicrnn", "tcnlm")}
    assert len(set(topics.values())) == 1, topics


@pytest.mark.parametrize("size", ["small", "medium"])
def test_rgbn_presets_share_the_lm_size_in_their_first_layer(size):
    lm = presets.preset("lstm", size).model
    for name in ("rgbn_rnn", "gbn_rnn"):
        model = presets.preset(name, size).model
        assert (model["embedding_dim"], model["hidden_sizes"][0]) == (lm["embedding_dim"],
                                                                      lm["hidden_dim"]), name
        assert model["recurrent"] == (name == "rgbn_rnn")
    # small: the shared 10 topics; medium keeps the paper's 100-80-50 (a running study uses it).
    topics = presets.preset("tcnlm", "small").model["num_topics"]
    if size == "small":
        assert presets.preset("rgbn_rnn", size).model["topic_sizes"][0] == topics


def test_sgmcmc_setups_are_presets_of_the_schema():
    from tfktopic.bayes import setups

    ptb = presets.preset("sgmcmc_ptb", "small")
    assert (ptb.model["hidden_dim"], ptb.model["num_layers"], ptb.data["num_steps"],
            ptb.training["batch_size"]) == (200, 2, 20, 20)
    # One step size per optimizer: SGD's scale (SGD, SGLD) and RMSprop's (RMSprop, pSGLD).
    assert set(ptb.training["learning_rates"]) == set(setups.OPTIMIZERS)
    assert ptb.training["learning_rates"]["sgld"] == 1.0
    assert ptb.training["learning_rates"]["psgld"] == 1e-3
    assert presets.preset("sgmcmc_ptb", "large").model["dropout"] == 0.65
    for family, name in (("sgmcmc_char", "paper"), ("sgmcmc_classifier", "paper")):
        rates = presets.preset(family, name).training["learning_rates"]
        assert set(rates) == {"rmsprop", "psgld"} and len(set(rates.values())) == 1
    # LSTMLanguageModel / bilstm_classifier arguments.
    for name in presets.names("sgmcmc_ptb"):
        assert set(presets.preset("sgmcmc_ptb", name).model) <= set(
            inspect.signature(LSTMLanguageModel.__init__).parameters)
    assert set(presets.preset("sgmcmc_classifier", "paper").model) <= set(
        inspect.signature(setups.bilstm_classifier).parameters)
    # The ablation settings build their sampler.
    for name in presets.names("sgmcmc_ablation"):
        sampler = setups.ablation_optimizer(name, 1e-3, num_examples=100)
        assert sampler.rho == presets.preset("sgmcmc_ablation", name).training["rho"]


def test_preset_is_frozen_and_hands_out_copies():
    preset = presets.preset("tcnlm", "paper")
    with pytest.raises(dataclasses.FrozenInstanceError):
        preset.name = "other"
    with pytest.raises(TypeError):
        preset.model["hidden_dim"] = 1
    settings_copy = preset.settings()
    settings_copy["model"]["hidden_dim"] = 1
    assert presets.preset("tcnlm", "paper").model["hidden_dim"] == 600
    with pytest.raises(ValueError, match="unknown keys"):
        presets.Preset.from_entry("bad", {"model": {}, "hidden_dim": 3})


def test_data_rule_is_resolved_relative_to_the_reference_corpus():
    paper = presets.preset("tcnlm", "paper")
    assert paper.reference_documents == 50000 and paper.data["min_doc_freq"] == 100
    assert paper.resolve_data(50000)["min_doc_freq"] == 100
    assert paper.resolve_data(80000)["min_doc_freq"] == 100      # never scaled up
    assert paper.resolve_data(1600)["min_doc_freq"] == round(100 * 1600 / 50000)
    assert paper.resolve_data(10)["min_doc_freq"] == 1            # never below 1
    assert paper.resolve_data(1600)["min_count"] == paper.data["min_count"]
    small = presets.preset("tcnlm", "small")                      # absolute rule
    assert small.reference_documents is None
    assert small.resolve_data(10)["min_doc_freq"] == small.data["min_doc_freq"]
    with pytest.raises(ValueError, match="num_documents"):
        paper.resolve_data(0)


def test_preset_and_run_path_share_one_data_rule():
    from tfktopic import runs

    paper = presets.preset("tcnlm", "paper")
    assert paper.run_data() == {**paper.data, presets.REFERENCE_DATA_KEY: 50000}
    assert presets.REFERENCE_DATA_KEY not in presets.preset("tcnlm", "small").run_data()
    data = runs.preset_settings("tcnlm", "paper")["data"]
    for n in (10, 240, 1600, 49999, 50000, 80000):
        resolved, _ = runs.resolve_data_rules(data, n)
        assert paper.resolve_data(n) == {**paper.data, "min_doc_freq": resolved["min_doc_freq"]}


def test_legacy_layouts_hold_the_same_settings():
    for name in presets.names("tcnlm"):
        new, old = presets.preset("tcnlm", name), presets.get("tcnlm", name)
        assert old["model"] == dict(new.model) and old["training"] == dict(new.training)
        assert {k: v for k, v in old["data"].items() if k != "min_doc_freq_reference_docs"} \
            == dict(new.data)
        assert old["data"].get("min_doc_freq_reference_docs") == new.reference_documents
    for family, module in (("topicrnn", topicrnn), ("lda_lstm", lda_lstm)):
        for name in presets.names(family):
            new = presets.preset(family, name)
            assert module.PRESETS[name] == {**new.model, **new.data, **new.training}
            assert presets.get(family, name) == module.PRESETS[name]
    assert tcnlm.PRESETS["paper"]["data"]["min_doc_freq_reference_docs"] == 50000
    # The run code still reads them: its split gives the preset's model settings.
    for name in ("lstm", "lda_lstm", "topicrnn", "tcnlm"):
        family = "topicrnn" if name == "lstm" else name
        run = settings.preset_settings(name, "small")
        assert run["model"]["hidden_dim"] == presets.preset(family, "small").model["hidden_dim"]
    with pytest.raises(ValueError, match="unknown preset 'nope' for tcnlm"):
        presets.preset("tcnlm", "nope")
    with pytest.raises(ValueError, match="unknown model 'nope'"):
        presets.names("nope")


def test_from_preset_accepts_pretrained_model_names():
    model = TCNLM.from_preset("pretrained:tcnlm-apnews")
    assert isinstance(model, TCNLM) and model.num_topics == 50
    same = TCNLM.from_preset("tcnlm-apnews")
    assert same.get_config()["hidden_dim"] == model.get_config()["hidden_dim"]
    with pytest.raises(ValueError, match="is a TCNLM, not a LSTMLanguageModel"):
        LSTMLanguageModel.from_preset("pretrained:tcnlm-apnews")
    with pytest.raises(ValueError, match="takes no constructor arguments"):
        TCNLM.from_preset("tcnlm-apnews", 10, 5)
    with pytest.raises(ValueError, match="or a pretrained model name"):
        TCNLM.from_preset("pretrained:nope")
    preset = presets.preset("tcnlm", "medium")
    built = TCNLM.from_preset(preset, 30, 12, hidden_dim=8, factor_dim=8)
    assert built.num_topics == preset.model["num_topics"] and built.hidden_dim == 8
