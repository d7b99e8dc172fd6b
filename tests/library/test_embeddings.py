"""word2vec through gensim on a real GoogleNews-format file gensim ships."""

import numpy as np
import pytest
from gensim.test.utils import datapath

from tfktopic.data import Vocabulary, load_corpus
from tfktopic.data.embeddings import convert_word2vec, embedding_matrix, load_keyed_vectors, load_word2vec
from tfktopic.errors import CorpusFormatError

BINARY = datapath("euclidean_vectors.bin")  # GoogleNews binary format, 2,747 x 10


@pytest.fixture(scope="module")
def vectors():
    return load_word2vec(BINARY)


@pytest.fixture(scope="module")
def lee_vocab():
    return Vocabulary.build(load_corpus("lee"), min_count=3)


def test_binary_text_and_limit(vectors, tmp_path):
    assert len(vectors) == 2747 and vectors.vector_size == 10
    limited = load_word2vec(BINARY, limit=100)
    assert limited.index_to_key == vectors.index_to_key[:100]
    text_path = tmp_path / "vectors.txt"
    vectors.save_word2vec_format(str(text_path), binary=False)
    as_text = load_word2vec(text_path)
    assert as_text.index_to_key == vectors.index_to_key
    np.testing.assert_allclose(as_text.vectors, vectors.vectors, atol=1e-5)


def test_mmap_route(vectors, tmp_path):
    converted = convert_word2vec(BINARY, tmp_path / "w2v.kv", limit=500)
    mapped = load_keyed_vectors(converted)
    assert isinstance(mapped.vectors, np.memmap)
    np.testing.assert_array_equal(np.asarray(mapped.vectors), vectors.vectors[:500])


def test_embedding_matrix_rows_and_coverage(vectors, lee_vocab):
    matrix, coverage = embedding_matrix(lee_vocab, vectors, seed=1)
    assert matrix.shape == (len(lee_vocab), 10) and matrix.dtype == np.float32
    assert not matrix[0].any()  # <pad>
    found = [i for i, t in enumerate(lee_vocab.tokens[4:], start=4) if t in vectors.key_to_index]
    for i in found[:200]:
        np.testing.assert_array_equal(matrix[i], vectors[lee_vocab.tokens[i]])
    assert coverage.num_found == len(found) and coverage.num_types == len(lee_vocab) - 4
    assert 0.5 < coverage.type_coverage < 1.0
    counts = lee_vocab.counts
    total = sum(c for t, c in counts.items() if t not in lee_vocab.tokens[:4])
    expected = sum(counts[lee_vocab.tokens[i]] for i in found) / total
    assert coverage.token_coverage == pytest.approx(expected)
    assert "word2vec covers" in str(coverage) and coverage.missing[0] not in vectors.key_to_index
    # OOV rows: random, deterministic under the seed, with the pretrained scale
    oov = [i for i in range(1, len(lee_vocab)) if i not in set(found)]
    again, _ = embedding_matrix(lee_vocab, vectors, seed=1)
    np.testing.assert_array_equal(matrix, again)
    assert abs(matrix[oov].std() / matrix[found].std() - 1.0) < 0.2
    zeros, _ = embedding_matrix(lee_vocab, vectors, oov="zeros")
    assert not zeros[oov].any()


def test_embedding_matrix_feeds_a_keras_embedding(vectors, lee_vocab):
    import keras

    matrix, _ = embedding_matrix(lee_vocab, vectors)
    layer = keras.layers.Embedding(len(lee_vocab), 10, weights=[matrix])
    out = layer(np.array([[lee_vocab.token_to_id("fire")]]))
    np.testing.assert_allclose(np.asarray(out)[0, 0], vectors["fire"], rtol=1e-6)


def test_bad_word2vec_files(tmp_path):
    with pytest.raises(CorpusFormatError, match=r"missing\.bin: no such word2vec file"):
        load_word2vec(tmp_path / "missing.bin")
    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(b"not a header\n\x00\x01")
    with pytest.raises(CorpusFormatError, match=r"garbage\.bin: not a binary word2vec file"):
        load_word2vec(garbage)
    with pytest.raises(ValueError, match="oov must be"):
        embedding_matrix(Vocabulary.build([[["a"]]], min_count=1), load_word2vec(BINARY, limit=5), oov="mean")
