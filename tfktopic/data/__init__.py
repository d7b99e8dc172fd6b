"""Data: corpus readers, vocabularies, contexts, tf.data pipelines, embeddings."""

from tfktopic.data.contexts import (
    PROTOCOLS,
    DocumentSequences,
    SentenceExamples,
    document_examples,
    document_sequences,
    sentence_examples,
    sentence_windows,
    stream_arrays,
)
from tfktopic.data.corpora import (
    FORMATS,
    Corpus,
    load_corpus,
    read_imdb,
    read_lee,
    read_ptb,
    read_tdlm,
    read_text,
)
from tfktopic.data.streams import (
    DocumentStreams,
    document_stream_dataset,
    document_streams,
    stream_examples,
)
from tfktopic.data.vocab import TopicVocabulary, Vocabulary, load_stopwords, topic_words
