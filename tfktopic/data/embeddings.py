"""Pretrained word2vec embeddings through gensim.

Loading (reference keras3_tf221_notes.md, "gensim"):

* `load_word2vec` reads the binary (GoogleNews) or text word2vec format with
  gensim's `KeyedVectors.load_word2vec_format`; `limit=` keeps only the most
  frequent words (the GoogleNews file stores them first), e.g. 100k words of
  GoogleNews take ~0.4 s and ~250 MB instead of ~4 GB.
* The memory-mapped route for the full 3.6 GB GoogleNews file: convert it
  once with `convert_word2vec` (one full load, then `KeyedVectors.save`), after
  which `load_keyed_vectors(path)` memory-maps the vectors (``mmap="r"``):
  nothing is read into memory twice and several processes share the pages.

`embedding_matrix` then builds the ``[len(vocab), dim]`` matrix for a
`Vocabulary`: found words take their vector (falling back to the lower-cased
form), ``<pad>`` is zero, every other row (OOV and special tokens) is drawn
at random with the scale of the pretrained vectors. Pass the matrix as
``keras.layers.Embedding(..., weights=[matrix])`` (a ``Constant`` initializer
would copy it into the saved config).
"""

import dataclasses
import pathlib

import numpy as np

from tfktopic.data.vocab import SPECIAL_TOKENS
from tfktopic.errors import CorpusFormatError

NUM_SPECIAL = len(SPECIAL_TOKENS)

__all__ = ["EmbeddingCoverage", "load_word2vec", "convert_word2vec", "load_keyed_vectors",
           "embedding_matrix"]


def _is_binary(path, binary):
    if binary is not None:
        return bool(binary)
    return pathlib.Path(path).suffix.lower() in (".bin", ".gz") and not str(path).endswith(".txt.gz")


def load_word2vec(path, binary=None, limit=None):
    """Load word2vec-format vectors with gensim.

    Args:
        path: a ``.bin`` (binary, e.g. GoogleNews-vectors-negative300.bin) or a
            text word2vec file (``.txt`` / ``.vec``), optionally gzipped.
        binary: force the binary (True) or text (False) format; inferred from
            the suffix when `None` (``.bin`` / ``.bin.gz`` are binary).
        limit: read only the first `limit` vectors.

    Returns:
        A `gensim.models.KeyedVectors`.

    Raises:
        CorpusFormatError: missing or unreadable file, naming it.

    Example:
    >>> vectors = load_word2vec("GoogleNews-vectors-negative300.bin", limit=100_000)  # doctest: +SKIP
    """
    from gensim.models import KeyedVectors

    path = pathlib.Path(path)
    if not path.exists():
        raise CorpusFormatError(path, "no such word2vec file")
    try:
        return KeyedVectors.load_word2vec_format(str(path), binary=_is_binary(path, binary),
                                                 limit=limit)
    except (ValueError, UnicodeDecodeError, EOFError, OSError) as error:
        raise CorpusFormatError(
            path, f"not a {'binary' if _is_binary(path, binary) else 'text'} word2vec file "
                  f"({type(error).__name__}: {error})") from None


def convert_word2vec(source, target, binary=None, limit=None):
    """Convert a word2vec file once into gensim's native format for mmap.

    Args:
        source: the word2vec file.
        target: output path (gensim writes ``target`` and
            ``target.vectors.npy``).
        binary, limit: as in `load_word2vec`.

    Returns:
        The `target` path, to pass to `load_keyed_vectors`.
    """
    vectors = load_word2vec(source, binary=binary, limit=limit)
    target = pathlib.Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    # `separately` forces the array into its own .npy file whatever its size
    # (gensim inlines arrays under 10 MB into the pickle, which cannot be mmapped).
    vectors.save(str(target), separately=["vectors"])
    return target


def load_keyed_vectors(path, mmap="r"):
    """Load vectors saved by `convert_word2vec`, memory-mapped by default.

    Args:
        path: the converted file.
        mmap: "r" to memory-map the vector array read-only, `None` to read it.

    Returns:
        A `gensim.models.KeyedVectors`.
    """
    from gensim.models import KeyedVectors

    path = pathlib.Path(path)
    if not path.exists():
        raise CorpusFormatError(path, "no such converted vectors file")
    return KeyedVectors.load(str(path), mmap=mmap)


@dataclasses.dataclass
class EmbeddingCoverage:
    """How much of a vocabulary the pretrained vectors cover.

    Attributes:
        num_types: vocabulary types considered (all but the special tokens).
        num_found: types with a pretrained vector (exact or lower-cased).
        type_coverage: num_found / num_types.
        token_coverage: share of training tokens covered (from the vocabulary's
            counts), or `None` when the vocabulary has no counts.
        missing: a few missing types, most frequent first.
    """

    num_types: int
    num_found: int
    type_coverage: float
    token_coverage: float
    missing: list

    def __str__(self):
        token = "" if self.token_coverage is None else f", {self.token_coverage:.1%} of tokens"
        return (f"word2vec covers {self.num_found}/{self.num_types} types "
                f"({self.type_coverage:.1%}{token})")


def embedding_matrix(vocab, vectors, oov="random", seed=0, lowercase_fallback=True):
    """Embedding matrix for `vocab` from pretrained `vectors`.

    Args:
        vocab: a `Vocabulary` (or any object with `tokens` and `counts`).
        vectors: gensim `KeyedVectors` (from `load_word2vec` or
            `load_keyed_vectors`).
        oov: "random" -- rows without a vector are drawn uniformly with the
            same standard deviation as the pretrained vectors -- or "zeros".
        seed: seed of the random rows.
        lowercase_fallback: look up ``token.lower()`` when `token` is missing.

    Returns:
        (matrix, coverage): float32 [len(vocab), dim] with a zero ``<pad>`` row
        (id 0), and an `EmbeddingCoverage`.

    Example:
    >>> matrix, coverage = embedding_matrix(vocab, load_word2vec(path))  # doctest: +SKIP
    >>> layer = keras.layers.Embedding(len(vocab), matrix.shape[1], weights=[matrix])  # doctest: +SKIP
    """
    if oov not in ("random", "zeros"):
        raise ValueError(f"oov must be 'random' or 'zeros', got {oov!r}")
    tokens = list(vocab.tokens)
    dim = int(vectors.vector_size)
    rows, found = [], []
    for i, token in enumerate(tokens):
        if i < NUM_SPECIAL:
            continue
        key = token if token in vectors.key_to_index else (
            token.lower() if lowercase_fallback and token.lower() in vectors.key_to_index else None)
        if key is not None:
            rows.append(i)
            found.append(vectors.key_to_index[key])
    matrix = np.zeros((len(tokens), dim), np.float32)
    if found:
        matrix[rows] = np.asarray(vectors.vectors[np.asarray(found)], np.float32)
    if oov == "random":
        scale = float(matrix[rows].std()) if rows else 0.1
        rng = np.random.default_rng(seed)
        missing_rows = np.setdiff1d(np.arange(1, len(tokens)), np.asarray(rows, np.int64))
        half_width = np.sqrt(3.0) * (scale if scale > 0 else 0.1)
        matrix[missing_rows] = rng.uniform(-half_width, half_width, (len(missing_rows), dim))
    num_types = len(tokens) - NUM_SPECIAL
    counts = getattr(vocab, "counts", None) or {}
    found_set = {tokens[i] for i in rows}
    token_coverage = None
    if counts:
        total = sum(c for t, c in counts.items() if t not in SPECIAL_TOKENS)
        token_coverage = sum(counts.get(t, 0) for t in found_set) / total if total else None
    missing = [t for t in tokens[NUM_SPECIAL:] if t not in found_set]
    if counts:
        missing.sort(key=lambda t: -counts.get(t, 0))
    coverage = EmbeddingCoverage(num_types, len(rows), len(rows) / max(num_types, 1),
                                 token_coverage, missing[:20])
    return matrix, coverage
