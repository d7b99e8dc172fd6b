"""Vocabularies: the language-model vocabulary and the topic-model vocabulary.

`Vocabulary` maps LM tokens to ids: ``<pad>`` = 0, ``<bos>`` = 1, ``<eos>`` = 2,
``<unk>`` = 3, then every training type seen at least `min_count` times, by
descending frequency (ties broken alphabetically, so a vocabulary is identical
across runs). This is TDLM's `gen_vocab` (reference tcnlm_and_evaluation.md
§2.2, rgbn_rnn.md §5.2) with ``<go>`` called ``<bos>``.

`TopicVocabulary` is the LM vocabulary minus an ignore set: stop words
(gensim's English list by default, or a file such as Mallet's ``en.txt``), the
top `max_freq_fraction` most frequent raw types (0.1 %), symbols (types with no
ASCII letter or starting with an apostrophe), ``n't`` and the special tokens,
and optionally words in fewer than `min_doc_freq` documents. Topic ids follow
LM order.

Both save to and load from versioned JSON.
"""

import collections
import hashlib
import json
import pathlib
import re

import numpy as np

from tfktopic.atomic import write_json
from tfktopic.errors import VocabularyError

__all__ = ["Vocabulary", "TopicVocabulary", "count_tokens", "load_stopwords", "topic_words", "PAD", "BOS", "EOS",
           "UNK"]

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
SPECIAL_TOKENS = (PAD, BOS, EOS, UNK)
FORMAT_VERSION = 1
_HAS_ASCII_LETTER = re.compile(r"[A-Za-z]")


def _write_json(path, payload):
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, payload)


def _checksum(words):
    return hashlib.sha256("\n".join(words).encode("utf-8")).hexdigest()


def _read_json(path, kind):
    path = pathlib.Path(path)
    if not path.exists():
        raise VocabularyError(f"{path}: no such vocabulary file")
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as error:
        raise VocabularyError(f"{path}: not a JSON vocabulary file ({error})") from None
    if not isinstance(payload, dict) or payload.get("kind") != kind:
        found = payload.get("kind") if isinstance(payload, dict) else type(payload).__name__
        raise VocabularyError(f"{path}: expected a tfktopic {kind} file, found {found!r}")
    version = payload.get("format_version")
    if version != FORMAT_VERSION:
        raise VocabularyError(
            f"{path}: vocabulary format version {version!r} is not supported "
            f"(this tfktopic reads version {FORMAT_VERSION}); rebuild the vocabulary"
        )
    return payload


def count_tokens(documents):
    """Token counts and document frequencies over documents of sentences, in one pass.

    Args:
        documents: an iterable of documents (lists of token lists), consumed once.

    Returns:
        (counts, doc_freq, num_sentences, num_documents).
    """
    counts, doc_freq = collections.Counter(), collections.Counter()
    num_sentences = num_documents = 0
    for document in documents:
        num_documents += 1
        seen = set()
        for sentence in document:
            counts.update(sentence)
            seen.update(sentence)
            num_sentences += 1
        doc_freq.update(seen)
    return counts, doc_freq, num_sentences, num_documents


class Vocabulary:
    """Language-model vocabulary with ``<pad>``, ``<bos>``, ``<eos>``, ``<unk>``.

    Args:
        tokens: every token in id order; must start with the four special
            tokens.
        counts: optional training counts per token (saved with the vocabulary).

    Example:
    >>> vocab = Vocabulary.build([[["a", "b", "a"]]], min_count=1)
    >>> vocab.encode(["a", "zzz"])
    [4, 3]
    >>> vocab.decode([4, 2])
    ['a', '<eos>']
    """

    def __init__(self, tokens, counts=None):
        tokens = list(tokens)
        if tuple(tokens[:4]) != SPECIAL_TOKENS:
            raise VocabularyError(f"a vocabulary must start with {SPECIAL_TOKENS}, got {tokens[:4]}")
        self._tokens = tokens
        self._index = {token: i for i, token in enumerate(tokens)}
        if len(self._index) != len(tokens):
            duplicated = [t for t, c in collections.Counter(tokens).items() if c > 1][:5]
            raise VocabularyError(f"duplicate tokens in vocabulary: {duplicated}")
        self.counts = dict(counts or {})

    pad_id, bos_id, eos_id, unk_id = 0, 1, 2, 3

    @classmethod
    def build(cls, documents, min_count=10, max_size=None):
        """Build from training documents (lists of sentences of tokens).

        Args:
            documents: an iterable of documents, e.g. a `Corpus`.
            min_count: keep types seen at least this often (10 in the papers;
                1 for PTB, which is already ``<unk>``-ed to 10k types).
            max_size: optional cap on the total size, special tokens included.

        Returns:
            A `Vocabulary`; ``<eos>`` is counted once per sentence.
        """
        if min_count < 1:
            raise ValueError(f"min_count must be >= 1, got {min_count}")
        counts, _, num_sentences, _ = count_tokens(documents)
        return cls.from_counts(counts, num_sentences, min_count, max_size)

    @classmethod
    def from_counts(cls, counts, num_sentences, min_count=10, max_size=None):
        """Build from token counts gathered in one streaming pass (see `build`).

        Args:
            counts: a mapping of token counts (copied, not modified).
            num_sentences: number of sentences counted (the count of ``<eos>``).
            min_count, max_size: as `build`.

        Returns:
            A `Vocabulary`, equal to `build` on the counted documents.
        """
        if min_count < 1:
            raise ValueError(f"min_count must be >= 1, got {min_count}")
        counts = collections.Counter(counts)
        if not counts:
            raise VocabularyError("cannot build a vocabulary from a corpus with no tokens")
        unk_count = counts.pop(UNK, 0)
        for special in (PAD, BOS, EOS):
            counts.pop(special, None)
        kept = sorted((t for t, c in counts.items() if c >= min_count), key=lambda t: (-counts[t], t))
        if max_size is not None:
            if max_size <= len(SPECIAL_TOKENS):
                raise ValueError(f"max_size must exceed {len(SPECIAL_TOKENS)}, got {max_size}")
            kept = kept[: max_size - len(SPECIAL_TOKENS)]
        kept_set = set(kept)
        unk_count += sum(c for t, c in counts.items() if t not in kept_set)
        token_counts = {t: counts[t] for t in kept}
        token_counts.update({EOS: num_sentences, UNK: unk_count, PAD: 0, BOS: 0})
        return cls(list(SPECIAL_TOKENS) + kept, token_counts)

    def __len__(self):
        return len(self._tokens)

    def __contains__(self, token):
        return token in self._index

    def __eq__(self, other):
        return isinstance(other, Vocabulary) and self._tokens == other._tokens

    @property
    def tokens(self):
        """All tokens in id order."""
        return list(self._tokens)

    @property
    def num_predictable(self):
        """Types a language model predicts: all but ``<pad>`` and ``<bos>``."""
        return len(self._tokens) - 2

    def token_to_id(self, token):
        """The id of `token`, or ``<unk>``'s id."""
        return self._index.get(token, self.unk_id)

    def id_to_token(self, index):
        """The token of `index`."""
        return self._tokens[index]

    def encode(self, tokens):
        """List of tokens -> list of ids (unknown tokens -> ``<unk>``)."""
        index, unk = self._index, self.unk_id
        return [index.get(t, unk) for t in tokens]

    def decode(self, ids, strip_special=False):
        """List of ids -> list of tokens.

        Args:
            ids: token ids (a list or array).
            strip_special: drop ``<pad>`` and ``<bos>``, and stop at ``<eos>``.
        """
        tokens = []
        for i in np.asarray(ids).reshape(-1).tolist():
            if strip_special:
                if i == self.eos_id:
                    break
                if i in (self.pad_id, self.bos_id):
                    continue
            tokens.append(self._tokens[i])
        return tokens

    def map_unknown(self, tokens):
        """Tokens as the language model sees them: those not in the vocabulary
        become ``<unk>`` (``decode(encode(tokens))``).

        Args:
            tokens: a list of tokens (a tokenised sentence).

        Returns:
            A list of tokens of the same length.
        """
        return self.decode(self.encode(tokens))

    @property
    def checksum(self):
        """SHA-256 of the tokens in id order: two vocabularies differ iff their checksums do."""
        return _checksum(self._tokens)

    def save(self, path):
        """Write the vocabulary as versioned JSON to `path`."""
        _write_json(path, {"kind": "lm_vocabulary", "format_version": FORMAT_VERSION,
                           "tokens": self._tokens, "counts": self.counts})

    @classmethod
    def load(cls, path):
        """Read a vocabulary written by `save`.

        Raises:
            VocabularyError: missing file, not JSON, other kind or other
                format version -- naming the file.
        """
        payload = _read_json(path, "lm_vocabulary")
        try:
            return cls(payload["tokens"], payload.get("counts"))
        except (KeyError, TypeError) as error:
            raise VocabularyError(f"{path}: malformed vocabulary ({error})") from None

    def __repr__(self):
        return f"Vocabulary(size={len(self)})"


def load_stopwords(source="gensim"):
    """A set of lower-cased stop words.

    Args:
        source: "gensim" (gensim's English list, 337 words), "none", a path
            to a file with one word per line (e.g. Mallet's ``en.txt``), or an
            iterable of words.

    Returns:
        A frozenset of words.
    """
    if source is None or source == "none":
        return frozenset()
    if isinstance(source, str) and source == "gensim":
        from gensim.parsing.preprocessing import STOPWORDS

        return frozenset(STOPWORDS)
    if isinstance(source, (str, pathlib.Path)):
        from tfktopic.data.corpora import decoded_lines

        return frozenset(line.strip().lower() for _, line in decoded_lines(source) if line.strip())
    return frozenset(str(w).lower() for w in source)


class TopicVocabulary:
    """The topic-model vocabulary: a subset of an LM `Vocabulary`.

    Args:
        words: topic words in topic-id order (LM order).
        lm_vocab: the LM `Vocabulary` the words come from.
        ignored: optional dict reason -> number of LM types dropped for it.

    Attributes:
        lm_to_topic: int32 array of length ``len(lm_vocab)`` mapping an LM id
            to its topic id, or -1 for ignored types.

    Example:
    >>> lm = Vocabulary.build([[["the", "cat", "sat"], ["the", "dog"]]], min_count=1)
    >>> topic = TopicVocabulary.build([[["the", "cat", "sat"], ["the", "dog"]]], lm,
    ...                               stopwords=["the"], max_freq_fraction=0.0)
    >>> topic.words
    ['cat', 'dog', 'sat']
    """

    def __init__(self, words, lm_vocab, ignored=None):
        self.words = list(words)
        self.lm_vocab = lm_vocab
        self.ignored = dict(ignored or {})
        missing = [w for w in self.words if w not in lm_vocab]
        if missing:
            raise VocabularyError(f"topic words missing from the LM vocabulary: {missing[:5]}")
        self._index = {w: i for i, w in enumerate(self.words)}
        self.lm_to_topic = np.full(len(lm_vocab), -1, dtype=np.int32)
        for i, word in enumerate(self.words):
            self.lm_to_topic[lm_vocab.token_to_id(word)] = i

    @classmethod
    def build(cls, documents, lm_vocab, stopwords="gensim", max_freq_fraction=0.001,
              min_doc_freq=1, max_size=None):
        """Build from the training documents and their LM vocabulary.

        Args:
            documents: the training documents (lists of sentences of tokens).
            lm_vocab: the `Vocabulary` built on the same documents.
            stopwords: see `load_stopwords` ("gensim", a path such as
                Mallet's ``en.txt``, an iterable, or "none").
            max_freq_fraction: drop the top ``int(#raw types * fraction)`` most
                frequent raw types (0.001 in TDLM / TCNLM / rGBN-RNN).
            min_doc_freq: drop words in fewer documents (TCNLM: 100; the
                released TDLM code: no filter, i.e. 1).
            max_size: keep at most this many words (most frequent first).

        Returns:
            A `TopicVocabulary`.
        """
        if not 0.0 <= max_freq_fraction < 1.0:
            raise ValueError(f"max_freq_fraction must be in [0, 1), got {max_freq_fraction}")
        counts, doc_freq, _, _ = count_tokens(documents)
        return cls.from_counts(counts, doc_freq, lm_vocab, stopwords, max_freq_fraction,
                               min_doc_freq, max_size)

    @classmethod
    def from_counts(cls, counts, doc_freq, lm_vocab, stopwords="gensim", max_freq_fraction=0.001,
                    min_doc_freq=1, max_size=None):
        """Build from token counts and document frequencies of one streaming pass.

        Args:
            counts, doc_freq: `collections.Counter` of token counts and of
                documents holding each token.
            lm_vocab, stopwords, max_freq_fraction, min_doc_freq, max_size: as `build`.

        Returns:
            A `TopicVocabulary`, equal to `build` on the counted documents.
        """
        if not 0.0 <= max_freq_fraction < 1.0:
            raise ValueError(f"max_freq_fraction must be in [0, 1), got {max_freq_fraction}")
        stop = load_stopwords(stopwords)
        num_frequent = int(len(counts) * max_freq_fraction)
        frequent = {t for t, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:num_frequent]}
        ignored = collections.Counter()
        words = []
        for token in lm_vocab.tokens:
            if token in SPECIAL_TOKENS or token == "n't":
                reason = "special"
            elif token.lower() in stop:
                reason = "stopword"
            elif token in frequent:
                reason = "frequent"
            elif not _HAS_ASCII_LETTER.search(token) or token.startswith("'"):
                reason = "symbol"
            elif doc_freq[token] < min_doc_freq:
                reason = "document_frequency"
            else:
                words.append(token)
                continue
            ignored[reason] += 1
        if max_size is not None and len(words) > max_size:
            ignored["max_size"] += len(words) - max_size
            words = words[:max_size]
        if not words:
            raise VocabularyError("the topic vocabulary is empty: every type was filtered out")
        return cls(words, lm_vocab, dict(ignored))

    def __len__(self):
        return len(self.words)

    def __contains__(self, word):
        return word in self._index

    def word_to_id(self, word):
        """Topic id of `word`, or -1 when it is not a topic word."""
        return self._index.get(word, -1)

    def topic_ids(self, lm_ids):
        """LM ids -> topic ids of the topic words among them, in order.

        Args:
            lm_ids: sequence or array of LM ids.

        Returns:
            An int32 numpy array of topic ids (non-topic words dropped).
        """
        mapped = self.lm_to_topic[np.asarray(lm_ids, dtype=np.int64)]
        return mapped[mapped >= 0]

    def decode(self, ids):
        """Topic ids -> topic words (`topic_words` of this vocabulary).

        Args:
            ids: int topic ids, a sequence or array of any shape.

        Returns:
            The words, as (nested) lists shaped like `ids`.
        """
        return topic_words(self, ids)

    @property
    def checksum(self):
        """SHA-256 of the topic words in id order (see `Vocabulary.checksum`)."""
        return _checksum(self.words)

    def save(self, path):
        """Write versioned JSON (topic words and the ignore statistics)."""
        _write_json(path, {"kind": "topic_vocabulary", "format_version": FORMAT_VERSION,
                           "words": self.words, "ignored": self.ignored})

    @classmethod
    def load(cls, path, lm_vocab):
        """Read a topic vocabulary written by `save`, for `lm_vocab`.

        Raises:
            VocabularyError: bad file, version, or words not in `lm_vocab`.
        """
        payload = _read_json(path, "topic_vocabulary")
        try:
            return cls(payload["words"], lm_vocab, payload.get("ignored"))
        except VocabularyError as error:
            raise VocabularyError(f"{path}: does not match the LM vocabulary: {error}") from None
        except (KeyError, TypeError) as error:
            raise VocabularyError(f"{path}: malformed topic vocabulary ({error})") from None

    def __repr__(self):
        return f"TopicVocabulary(size={len(self)}, lm_size={len(self.lm_vocab)})"


def topic_words(vocabulary, ids):
    """Topic ids -> topic words: the one id-to-word lookup of the topic vocabulary.

    Args:
        vocabulary: a `TopicVocabulary` (or any object with its ``words``), or
            the list of the V_c topic words in id order.
        ids: int topic ids, a sequence or array of any shape (e.g. ``[K, top_n]``).

    Returns:
        The words, as (nested) lists shaped like `ids`.

    Example:
    >>> topic_words(["cat", "dog", "sat"], [[2, 0], [1, 1]])
    [['sat', 'cat'], ['dog', 'dog']]
    """
    words = getattr(vocabulary, "words", vocabulary)
    table = np.empty(len(words), dtype=object)
    table[:] = list(words)
    return table[np.asarray(ids, dtype=np.int64)].tolist()
