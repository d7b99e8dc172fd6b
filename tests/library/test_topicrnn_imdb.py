"""TopicRNN document features classify IMDB sentiment well above chance (§4.2; issue 17).

`tests/test_topicrnn.py` checks what the features are (mean of q(theta | review) and the
last RNN state) after one training batch; this slow test trains TopicRNN for real on a
small IMDB slice and checks that the paper's classifier on those features predicts the
sentiment of held-out reviews (the IMDB test split) far above chance.
"""

import keras
import numpy as np
import pytest

from tfktopic.data import TopicVocabulary, Vocabulary, read_imdb
from tfktopic.data.contexts import document_examples
from tfktopic.data.pipeline import sentence_dataset
from tfktopic.models.topicrnn.model import TopicRNN, build_sentiment_classifier

NUM_TOPICS = 50


def _reviews(path, split, per_label):
    """The first `per_label` positive and negative reviews of a split, interleaved."""
    pos = read_imdb(path, split=split, labels=("pos",), limit=per_label)
    neg = read_imdb(path, split=split, labels=("neg",), limit=per_label)
    assert len(pos.documents) == len(neg.documents) == per_label
    documents = [d for pair in zip(pos.documents, neg.documents) for d in pair]
    return documents, np.array([1.0, 0.0] * per_label, np.float32)


@pytest.mark.slow
def test_topicrnn_features_classify_held_out_imdb_reviews_well_above_chance(
        imdb_path, mallet_stopwords_path):
    train, train_labels = _reviews(imdb_path, "train", 1000)
    test, test_labels = _reviews(imdb_path, "test", 250)
    lm = Vocabulary.build(train, min_count=3, max_size=3000)
    topic = TopicVocabulary.build(train, lm, stopwords=str(mallet_stopwords_path))
    # Each review one example: the LM reads its first 50 tokens, q(theta | X_c) the
    # whole review's topic words (`document_examples`, TopicRNN's IMDB setup).
    train_examples = document_examples(train, lm, topic, max_len=50)
    test_examples = document_examples(test, lm, topic, max_len=50)
    keras.utils.set_random_seed(0)
    model = TopicRNN(len(lm), topic.lm_to_topic, num_topics=NUM_TOPICS, hidden_dim=32,
                     encoder_units=(64,), seed=0)
    model.compile(optimizer=keras.optimizers.Adam(3e-3))
    model.fit(sentence_dataset(train_examples, batch_size=32, seed=0, document_targets=True),
              epochs=4, verbose=0)
    train_features = model.encode(sentence_dataset(train_examples, batch_size=200,
                                                   shuffle=False))
    test_features = model.encode(sentence_dataset(test_examples, batch_size=200, shuffle=False))
    assert train_features.shape == (2000, NUM_TOPICS + 32)
    keras.utils.set_random_seed(0)
    classifier = build_sentiment_classifier(train_features.shape[1],
                                            train_features=train_features, learning_rate=3e-3)
    classifier.fit(train_features, train_labels, epochs=40, batch_size=64, verbose=0)
    predicted = classifier.predict(test_features, verbose=0)[:, 0] > 0.5
    accuracy = float((predicted == test_labels).mean())
    # Measured with this setup for seeds 0, 1, 2 (TopicRNN and classifier): 0.664, 0.662,
    # 0.652 on these 500 held-out reviews (balanced; chance 0.5, its standard deviation
    # over 500 reviews 0.022). The bound 0.60 is 4.5 standard deviations above chance and
    # 0.05 below the lowest measured accuracy. (The theta part alone measured 0.65-0.70,
    # the RNN state alone 0.46-0.56: after 4 epochs on 2,000 reviews the sentiment is in
    # the topic proportions.)
    assert accuracy >= 0.60, accuracy
