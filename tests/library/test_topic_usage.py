"""Topic usage (`tfktopic.runs.usage`): how much of the training documents each topic explains,
stored by `tfktopic train`, shown by `tfktopic topics`, and a note from `generate --topic K`
when K is unused."""

import numpy as np
import pytest

from conftest import shared_file
from tfktopic import cli
from tfktopic.runs import load_run
from tfktopic.runs.reports import run_splits
from tfktopic.runs.usage import UNUSED_SHARE, collapse_note, stored_usage, topic_usage, unused


@pytest.fixture(scope="module")
def tcnlm():
    return load_run("pretrained:tcnlm-apnews")


def _documents(run, seed=0, n=12):
    """Documents of topic words drawn at random (one sentence each), some longer than the
    run's context_len."""
    rng = np.random.default_rng(seed)
    words = [run.topic_vocab.decode([i])[0] for i in range(len(run.topic_vocab))]
    lengths = rng.integers(5, 2 * run.config["data"]["context_len"], n)
    return [[list(rng.choice(words, size=int(length)))] for length in lengths]


def test_usage_is_the_mean_of_the_models_topic_proportions_of_each_documents_context(tcnlm):
    documents = _documents(tcnlm)
    limit = tcnlm.config["data"]["context_len"]
    # The training pipeline's way to a context: LM ids, then their topic ids
    # (`TopicVocabulary.topic_ids`), the first context_len of them counted.
    lm, topic = tcnlm.lm_vocab, tcnlm.topic_vocab
    bows = np.stack([np.bincount(topic.topic_ids([lm.token_to_id(w) for w in d[0]])[:limit],
                                 minlength=len(topic)) for d in documents]).astype(np.float32)
    reference = np.asarray(tcnlm.model.topic_proportions(bows)).mean(0)
    usage = topic_usage(tcnlm, documents, batch_size=5)      # batches of 5, 5 and 2
    assert len(usage) == tcnlm.model.num_topics and sum(usage) == pytest.approx(1.0, abs=1e-5)
    np.testing.assert_allclose(usage, reference, rtol=1e-5, atol=1e-7)
    # Only the first context_len topic words of a document count: what follows them
    # (another document's words) changes nothing.
    first, other = _documents(tcnlm, seed=1, n=2)
    first = (first[0] * limit)[:limit]
    np.testing.assert_allclose(topic_usage(tcnlm, [[first, other[0]]]),
                               topic_usage(tcnlm, [[first]]), rtol=1e-6)
    assert not np.allclose(topic_usage(tcnlm, [[other[0]]]), topic_usage(tcnlm, [[first]]),
                           rtol=1e-3)


def test_usage_refuses_topic_vectors_off_the_simplex_and_empty_documents(tcnlm):
    topicrnn = load_run("pretrained:doc-topicrnn-apnews")
    with pytest.raises(ValueError, match="topic proportions on the simplex.*doc_topicrnn"):
        topic_usage(topicrnn, _documents(topicrnn))
    with pytest.raises(ValueError, match="no document has a word of the topic vocabulary"):
        topic_usage(tcnlm, [[["zzzz-not-a-word"]]])


def test_unused_is_below_a_share_of_the_uniform_usage():
    assert unused([0.5, 0.3, 0.2]) == []
    k = 4
    assert unused([0.7, UNUSED_SHARE / k * 0.99, UNUSED_SHARE / k, 0.3 - UNUSED_SHARE / k]) == [1]


def test_the_shipped_tcnlm_stores_the_usage_of_its_training_split(tcnlm):
    apnews = shared_file("apnews/apnews.txt")
    config = dict(tcnlm.config, corpus=str(apnews))
    train = run_splits(config)["train"]
    np.testing.assert_allclose(stored_usage(tcnlm), topic_usage(tcnlm, train), rtol=1e-5)


def test_generate_notes_an_unused_topic_and_not_a_used_one(tcnlm, capsys):
    usage = stored_usage(tcnlm)
    idle, busiest = unused(usage)[0], int(np.argmax(usage))
    assert cli.main(["generate", "pretrained:tcnlm-apnews", "--topic", str(idle), "--num", "1",
                     "--max-len", "5"]) == 0
    captured = capsys.readouterr()
    notes = [line for line in captured.err.splitlines() if line.startswith("note:")]
    assert len(notes) == 1 and f"topic {idle} is unused" in notes[0]
    assert f"most used topics: {busiest}," in notes[0] and captured.out.strip()
    assert cli.main(["generate", "pretrained:tcnlm-apnews", "--topic", str(busiest), "--num",
                     "1", "--max-len", "5"]) == 0
    assert "note:" not in capsys.readouterr().err


def test_topics_shows_each_topics_usage_and_marks_the_unused(tcnlm, capsys):
    usage = stored_usage(tcnlm)
    assert cli.main(["topics", "pretrained:tcnlm-apnews", "--top-n", "3"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if "topic " in line]
    assert len(lines) == len(usage)
    for k, line in enumerate(lines):
        assert line.lstrip().startswith(f"topic {k:>2} [{usage[k]:.3f}"), line
        assert ("unused]" in line) == (k in unused(usage)), line
    # A model without usage (TopicRNN's theta is not on the simplex) prints no brackets.
    assert cli.main(["topics", "pretrained:doc-topicrnn-apnews", "--top-n", "3"]) == 0
    assert "[" not in capsys.readouterr().out


def test_training_notes_a_collapse_of_most_topics_and_suggests_the_lda_start(tcnlm):
    usage = stored_usage(tcnlm)            # 40 of 50 unused, a random topic start
    note = collapse_note(usage, tcnlm.model.decoder_init)
    assert note.startswith(f"note: {len(unused(usage))} of 50 topics are unused")
    assert "--set decoder_init=lda" in note
    assert "decoder_init=lda" not in collapse_note(usage, "lda")
    assert collapse_note([0.2] * 5) is None
    half = [0.5 / 3] * 3 + [0.0] * 3       # exactly half unused: no note
    assert collapse_note(half) is None and collapse_note(half[1:], "random") is not None
