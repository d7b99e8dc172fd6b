"""How much of a corpus each topic explains: the mean topic proportions of its documents.

A topic model can leave topics unused: the pretrained ``tcnlm-apnews`` (a randomly
initialised topic decoder, TCNLM's `decoder_init="random"`) gives 40 of its 50 topics a
mean proportion below 0.005 over its training documents, and conditioning generation on
one of them (``tfktopic generate --topic 5``) gives word salad, since its expert was never
trained; its eight most used topics give fluent, topical text. `tfktopic train` stores
the usage of every model whose topic proportions are mixing weights
(``registry.get(name).simplex_topics``: LDA+LSTM, TCNLM, rGBN-RNN, GBN-RNN; TopicRNN's theta is an
unconstrained vector) in ``results.json`` (over its training documents), `tfktopic topics`
prints it, and `tfktopic generate --topic K` says when K is unused.

    >>> from tfktopic.runs import load_run
    >>> from tfktopic.runs.usage import stored_usage
    >>> usage = stored_usage(load_run("pretrained:tcnlm-apnews"))   # doctest: +SKIP
    >>> max(range(len(usage)), key=usage.__getitem__)              # doctest: +SKIP
    42
"""

import json

import numpy as np

from tfktopic.models import registry

#: A topic whose mean proportion over the training documents is below this share of the
#: uniform 1 / K is "unused". Measured on the pretrained TCNLM (K = 50, threshold 0.005):
#: its 40 topics below it are all below 0.0005 and write word salad; of its 10 above it, the
#: 8 above 0.02 write fluent topical text, the two near the threshold (0.0066, 0.0073) are
#: in between. A heuristic: the boundary is not sharp.
UNUSED_SHARE = 0.25


def unused(usage):
    """The topics of `usage` (`topic_usage`'s list) below `UNUSED_SHARE` / K."""
    return [k for k, share in enumerate(usage) if share < UNUSED_SHARE / len(usage)]


def topic_usage(run, documents, batch_size=256):
    """Mean topic proportions of `documents` at the model's posterior mean.

    Each document's bag of words counts its first ``context_len`` topic words (the
    context the model was trained with; all of them when the run has none), and
    ``model.topic_proportions`` maps it to the simplex (rGBN / GBN: the first layer's
    normalised theta).

    Args:
        run: a `Run` of a model with ``simplex_topics``.
        documents: documents (lists of sentences of tokens), e.g. the training split.
        batch_size: documents per call of the model.

    Returns:
        list of K floats summing to 1 (documents without topic words do not count).

    Raises:
        ValueError: the run's topic proportions are not on the simplex, or no document
            has a topic word.
    """
    if not registry.get(run.name).simplex_topics:
        raise ValueError(f"topic usage applies to "
                         f"{', '.join(registry.names('simplex_topics'))} (topic proportions "
                         f"on the simplex); {run.path} holds a {run.name} model")
    vocab, limit = run.topic_vocab, run.config.get("data", {}).get("context_len")
    rows = []
    for document in documents:
        ids = [i for i in (vocab.word_to_id(w) for sentence in document for w in sentence)
               if i >= 0]
        ids = ids[:int(limit)] if limit else ids
        if ids:
            rows.append(np.bincount(ids, minlength=len(vocab)).astype(np.float32))
    if not rows:
        raise ValueError("no document has a word of the topic vocabulary")
    bows = np.stack(rows)
    total = 0.0
    for start in range(0, len(bows), int(batch_size)):
        total = total + np.asarray(run.model.topic_proportions(bows[start:start + batch_size]),
                                   np.float64).sum(0)
    return [float(v) for v in total / len(bows)]


def stored_usage(run):
    """The usage `tfktopic train` stored in the run's ``results.json``, or None."""
    path = run.path / "results.json"
    if not path.exists():
        return None
    return json.loads(path.read_text(encoding="utf-8")).get("topic_usage")


def unused_topic_note(run, topic, layer=None):
    """A one-line note when `topic` is unused by the run's stored usage, else None.

    Only first-layer topics have a stored usage (`layer` None or 1).
    """
    usage = stored_usage(run)
    if usage is None or (layer not in (None, 1) and registry.get(run.name).hierarchical) or \
            int(topic) not in unused(usage):
        return None
    used = sorted(range(len(usage)), key=lambda k: -usage[k])[:5]
    return (f"note: topic {topic} is unused (mean proportion {usage[int(topic)]:.4f} over the "
            f"training documents, below {UNUSED_SHARE} / {len(usage)} topics): the model "
            f"hardly learnt to write it, so expect incoherent text; most used topics: "
            f"{', '.join(map(str, used))}")


def collapse_note(usage, decoder_init=None):
    """A one-line note when more than half of the topics are unused, else None.

    Args:
        usage: `topic_usage`'s list.
        decoder_init: the model's topic start (TCNLM, rGBN / GBN-RNN); "random" gets the
            LDA start suggested.
    """
    idle = unused(usage)
    if 2 * len(idle) <= len(usage):
        return None
    note = (f"note: {len(idle)} of {len(usage)} topics are unused by the training documents "
            f"(mean proportion below {UNUSED_SHARE} / {len(usage)}): text conditioned on one "
            f"of them is incoherent")
    if decoder_init == "random":
        note += ("; an LDA start of the topics (--set decoder_init=lda, the coherent preset) "
                 "keeps them in use (TCNLM on APNEWS: 40 -> 5 of 50 unused)")
    return note
