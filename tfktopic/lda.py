"""gensim LDA on a corpus's topic vocabulary: the LDA+LSTM's topics, the LDA start of the
topic decoders (``decoder_init="lda"``) and the baseline every model's NPMI is compared with.

Its own module (not `tfktopic.models`) so that the model base class can fit the LDA start
of `from_preset` without importing a model family.

Example:
>>> from tfktopic.data import TopicVocabulary, Vocabulary, load_corpus
>>> docs = load_corpus("lee")[:40]
>>> topic_vocab = TopicVocabulary.build(docs, Vocabulary.build(docs, min_count=2))
>>> fit_lda(docs, topic_vocab, num_topics=3, passes=1).get_topics().shape[0]
3
"""

import collections

import numpy as np

__all__ = ["LDA_PASSES", "lda_bow_corpus", "fit_lda"]

#: The one default of ``lda_passes`` (gensim passes of every LDA fit: LDA+LSTM's and
#: ``decoder_init="lda"``'s) when a preset does not state it; the measured
#: ``decoder_init="lda"`` runs (the topic-cause study) fitted with 10, and every
#: LDA+LSTM preset states its own.
LDA_PASSES = 10


def lda_bow_corpus(documents, topic_vocab):
    """Topic-vocabulary bags of words of whole documents, in gensim's format.

    Args:
        documents: iterable of documents (lists of sentences of tokens), e.g. a
            `Corpus`.
        topic_vocab: the `TopicVocabulary`; its topic ids are the gensim term ids.

    Returns:
        A list with one ``[(topic_id, count), ...]`` per document (ids ascending;
        a document without topic words gives an empty list).
    """
    corpus = []
    for document in documents:
        ids = (topic_vocab.word_to_id(w) for sentence in document for w in sentence)
        counts = collections.Counter(i for i in ids if i >= 0)    # -1: not a topic word
        corpus.append(sorted(counts.items()))
    return corpus


def fit_lda(corpus, topic_vocab, num_topics=50, passes=LDA_PASSES, seed=0,
            alpha="symmetric", iterations=50, chunksize=2000, **kwargs):
    """Fit gensim's `LdaModel` on the topic-vocabulary BoW of training documents.

    Args:
        corpus: the training documents (a `Corpus` or list of documents), or a
            streamed corpus with ``topic_bows()`` (a re-iterable of gensim bags of
            words over `topic_vocab`'s ids).
        topic_vocab: the `TopicVocabulary` (its ids are the LDA's term ids, so the
            LDA's columns line up with the pipeline's ``context_bow``).
        num_topics: K.
        passes: passes over the corpus (online VB epochs).
        seed: gensim's ``random_state``.
        alpha: gensim's document-topic prior ("symmetric" = 1/K, "asymmetric",
            "auto" to learn it, or an array).
        iterations: maximum E-step iterations per document during training.
        chunksize: documents per online update.
        **kwargs: further `gensim.models.LdaModel` arguments (e.g. ``eta``).

    Returns:
        A fitted `gensim.models.LdaModel` (float32) over ``len(topic_vocab)`` terms.

    Raises:
        ValueError: for num_topics or passes < 1, or a corpus without topic words.
    """
    from gensim.models import LdaModel

    if int(num_topics) < 1:
        raise ValueError(f"num_topics must be >= 1, got {num_topics}")
    if int(passes) < 1:
        raise ValueError(f"passes must be >= 1, got {passes}")
    # A streamed corpus (`tfktopic.runs.prepared.ShardDocuments`) gives its bags of words
    # as a re-iterable, read again on every pass: no list of documents in memory.
    bows = (corpus.topic_bows() if hasattr(corpus, "topic_bows")
            else lda_bow_corpus(corpus, topic_vocab))
    if not any(bows):
        raise ValueError("fit_lda: the corpus has no topic-vocabulary words; check topic_vocab")
    id2word = dict(enumerate(topic_vocab.words))
    return LdaModel(bows, num_topics=int(num_topics), id2word=id2word, passes=int(passes),
                    random_state=seed, alpha=alpha, iterations=int(iterations),
                    chunksize=int(chunksize), eval_every=None, dtype=np.float32, **kwargs)
