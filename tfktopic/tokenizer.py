"""`Tokenizer`: a run's two vocabularies as one text <-> ids preprocessor.

The LM `Vocabulary` (ids of the language model) and the `TopicVocabulary`
(columns of the topic models' bag of words) together: raw text -> LM ids,
LM ids -> text, raw text -> topic bag of words. Saved and loaded as the run
directory's ``lm_vocab.json`` / ``topic_vocab.json``, so a `Tokenizer` of a
run (or of a pretrained model) is ``Tokenizer.load(run_dir)``.

Example:
>>> from tfktopic.data import TopicVocabulary, Vocabulary
>>> docs = [[["the", "storm", "hit", "the", "coast"], ["rain", "fell"]]]
>>> lm = Vocabulary.build(docs, min_count=1)
>>> tokenizer = Tokenizer(lm, TopicVocabulary.build(docs, lm, stopwords="none",
...                                                 max_freq_fraction=0.0))
>>> [tokenizer.decode(ids) for ids in tokenizer.sentences("The storm hit. Rain fell!")]
['the storm hit <unk>', 'rain fell <unk>']
>>> tokenizer.decode([1] + tokenizer.encode("Storm. Rain"))   # no <bos>; stops at <eos>
'storm <unk>'
>>> int(tokenizer.bow("storm storm rain").sum())
3
"""

import pathlib

import re

import numpy as np

from tfktopic.data.text import sentences_from_text
from tfktopic.data.vocab import TopicVocabulary, Vocabulary
from tfktopic.errors import VocabularyError

__all__ = ["Tokenizer", "LM_VOCAB_FILE", "TOPIC_VOCAB_FILE", "detokenize"]

LM_VOCAB_FILE = "lm_vocab.json"
TOPIC_VOCAB_FILE = "topic_vocab.json"


class Tokenizer:
    """Text <-> LM ids, and text -> topic bag of words.

    Args:
        lm_vocab: the LM `Vocabulary`.
        topic_vocab: the `TopicVocabulary` of `lm_vocab`, or `None` (models
            without topics; `bow` is then unavailable).
        lowercase: lower-case the text before tokenising (as the corpora were).
    """

    def __init__(self, lm_vocab, topic_vocab=None, lowercase=True):
        if not isinstance(lm_vocab, Vocabulary):
            raise VocabularyError(f"lm_vocab must be a Vocabulary, got "
                                  f"{type(lm_vocab).__name__}")
        if topic_vocab is not None and not isinstance(topic_vocab, TopicVocabulary):
            raise VocabularyError(f"topic_vocab must be a TopicVocabulary or None, got "
                                  f"{type(topic_vocab).__name__}")
        if topic_vocab is not None and len(topic_vocab.lm_to_topic) != len(lm_vocab):
            raise VocabularyError(f"topic_vocab maps {len(topic_vocab.lm_to_topic)} LM ids but "
                                  f"lm_vocab has {len(lm_vocab)}: build it from this lm_vocab")
        self.lm_vocab = lm_vocab
        self.topic_vocab = topic_vocab
        self.lowercase = bool(lowercase)

    # ---------------------------------------------------------------- files
    @classmethod
    def load(cls, directory, lowercase=True):
        """The tokenizer of a run directory (its ``lm_vocab.json`` and, if present,
        ``topic_vocab.json``).

        Raises:
            VocabularyError: a missing or malformed vocabulary file (named).
        """
        directory = pathlib.Path(directory)
        lm_vocab = Vocabulary.load(directory / LM_VOCAB_FILE)
        topic_path = directory / TOPIC_VOCAB_FILE
        topic_vocab = TopicVocabulary.load(topic_path, lm_vocab) if topic_path.exists() else None
        return cls(lm_vocab, topic_vocab, lowercase=lowercase)

    def save(self, directory):
        """Write ``lm_vocab.json`` (and ``topic_vocab.json``) into `directory`."""
        directory = pathlib.Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.lm_vocab.save(directory / LM_VOCAB_FILE)
        if self.topic_vocab is not None:
            self.topic_vocab.save(directory / TOPIC_VOCAB_FILE)

    # ----------------------------------------------------------- text <-> ids
    @property
    def vocab_size(self):
        """Size of the LM vocabulary."""
        return len(self.lm_vocab)

    @property
    def topic_vocab_size(self):
        """V_c, the width of the topic bag of words (0 without a topic vocabulary)."""
        return 0 if self.topic_vocab is None else len(self.topic_vocab)

    def sentences(self, text):
        """Raw text -> LM ids of each sentence, each ending with ``<eos>``."""
        eos = self.lm_vocab.eos_id
        return [self.lm_vocab.encode(tokens) + [eos]
                for tokens in sentences_from_text(str(text), lowercase=self.lowercase)]

    def encode(self, text):
        """Raw text -> one list of LM ids (every sentence followed by ``<eos>``)."""
        return [i for sentence in self.sentences(text) for i in sentence]

    def decode(self, ids):
        """LM ids -> text: ``<pad>`` / ``<bos>`` dropped, stops at the first ``<eos>``."""
        return " ".join(self.lm_vocab.decode(ids, strip_special=True))

    def decode_batch(self, ids):
        """int ``[N, T]`` LM ids (e.g. `generate`'s output) -> N strings."""
        return [self.decode(row) for row in np.atleast_2d(np.asarray(ids))]

    def bow(self, text, max_words=None):
        """Raw text -> its topic bag of words, float32 ``[V_c]`` counts.

        Args:
            text: raw text.
            max_words: count only the first `max_words` topic words (a model's
                ``context_len``); `None` counts them all.

        Raises:
            VocabularyError: the tokenizer has no topic vocabulary.
        """
        if self.topic_vocab is None:
            raise VocabularyError("this tokenizer has no topic vocabulary (bow needs one)")
        ids = self.topic_vocab.topic_ids(self.encode(text))
        if max_words is not None:
            ids = ids[:int(max_words)]
        return np.bincount(ids, minlength=len(self.topic_vocab)).astype(np.float32)

    def __repr__(self):
        return (f"Tokenizer(vocab_size={self.vocab_size}, "
                f"topic_vocab_size={self.topic_vocab_size})")


# Tokens glued to the word before them: punctuation and the clitics the tokenizer splits off.
_NO_SPACE_BEFORE = re.compile(r" (?=[,.!?;:%)\]}]|'(?:s|m|d|ll|re|ve)\b|n't\b|\.\.\.)",
                              re.IGNORECASE)
_NO_SPACE_AFTER = re.compile(r"(?<=[(\[{$]) ")


def detokenize(text):
    """Whitespace-tokenised text -> readable text (`Tokenizer.decode`'s output).

    Punctuation and clitics join the word before them (``i 'm`` -> ``i'm``,
    ``do n't`` -> ``don't``, ``it 's`` -> ``it's``, no space before
    ``, . ! ? ; : ) %``); no space after ``( [ $``; double quotes pair up
    (the opening one joins the next word, the closing one the previous).

    Args:
        text: a string of space-separated tokens.

    Returns:
        The string with those spaces removed.

    Example:
    >>> detokenize("i 'm sure they do n't know , he said ( again ) .")
    "i'm sure they don't know, he said (again)."
    >>> detokenize('he said " no way " and left')
    'he said "no way" and left'
    """
    out, opening = [], True
    for piece in str(text).split():
        if piece == '"':
            if opening or not out:
                out.append('"')                               # joins the next word
            else:
                out[-1] += '"'                                # joins the previous word
            opening = not opening
        elif out and out[-1] == '"' and not opening:
            out[-1] += piece
        else:
            out.append(piece)
    return _NO_SPACE_AFTER.sub("", _NO_SPACE_BEFORE.sub("", " ".join(out)))
