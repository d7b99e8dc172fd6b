"""Sentence splitting and tokenisation of raw English text.

The TDLM and PTB corpora arrive already tokenised; raw text (aclImdb reviews,
plain text files, the Lee news corpus shipped with gensim) goes through the
functions here: HTML clean-up, a rule-based sentence splitter and a tokeniser
that follows Penn Treebank conventions closely enough for language modelling
(clitics such as ``n't`` and ``'s`` split off, punctuation as separate tokens,
everything lower-cased). They are deterministic and need no downloaded model.
"""

import html
import re

__all__ = ["clean_html", "split_sentences", "tokenize", "sentences_from_text"]

_BR_RE = re.compile(r"<\s*br\s*/?\s*>", re.IGNORECASE)
_TAG_RE = re.compile(r"<[^<>]{1,200}>")
_SPACE_RE = re.compile(r"\s+")
_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"',
                         "\u2013": "-", "\u2014": "--", "\u00a0": " "})

# A sentence ends at . ! or ? (possibly followed by closing quotes/brackets)
# followed by white space and an upper-case letter, a digit or an opening quote.
_BOUNDARY_RE = re.compile(r"(?<=[.!?])([\"')\]]*)\s+(?=[\"'(\[]?[A-Z0-9])")
_ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof sr jr st vs etc inc ltd co corp gen gov sen rep col lt "
    "sgt capt mt ft jan feb mar apr jun jul aug sep sept oct nov dec "
    "u.s e.g i.e a.m p.m u.k u.n".split()
)

_TOKEN_RE = re.compile(
    r"""
      (?:[^\W\d_]\.){2,}              # abbreviations written with dots: u.s. e.g.
    | (?i:%s)\.(?!\w)                 # titles and months: dr. mr. jan.
    | [^\W_]+(?=n't\b)                # do|n't, is|n't
    | n't\b
    | '(?:s|re|ve|ll|d|m)\b           # clitics: 's 're 've 'll 'd 'm
    | \d+(?:[.,:/]\d+)+               # numbers, times and dates: 3.5 4:00 1,000
    | [^\W_]+(?:-[^\W_]+)*            # words, hyphenated words
    | \.\.\.|--                       # ellipsis, dash
    | \S                              # any other single symbol
    """
    % "|".join(sorted((a for a in _ABBREVIATIONS if "." not in a), key=len, reverse=True)),
    re.VERBOSE,
)


def clean_html(text):
    """Remove the HTML of scraped text (`<br />` line breaks, tags, entities).

    Args:
        text: raw text, e.g. an aclImdb review.

    Returns:
        The text with `<br />` replaced by a space, other tags removed,
        entities unescaped and white space collapsed.
    """
    text = _BR_RE.sub(" ", text)
    text = _TAG_RE.sub(" ", text)
    text = html.unescape(text).translate(_QUOTES)
    return _SPACE_RE.sub(" ", text).strip()


def split_sentences(text):
    """Split a paragraph of raw (not lower-cased) text into sentences.

    A boundary is a `.`, `!` or `?` followed by white space and a capital
    letter, digit or opening quote, unless the word before the period is a
    common abbreviation ("Mr.", "Jan.", "U.S.") or a single initial ("J.").

    Args:
        text: a paragraph of raw text.

    Returns:
        A list of sentence strings (empty for blank text).
    """
    text = text.strip()
    if not text:
        return []
    sentences, start = [], 0
    for match in _BOUNDARY_RE.finditer(text):
        end = match.start() + len(match.group(1))
        last_word = text[start:match.start()].rsplit(None, 1)[-1] if text[start:match.start()].strip() else ""
        stem = last_word.rstrip(".!?").lstrip("\"'([").lower()
        if last_word.endswith(".") and (stem in _ABBREVIATIONS or (len(stem) == 1 and stem.isalpha())):
            continue
        sentences.append(text[start:end].strip())
        start = match.end()
    sentences.append(text[start:].strip())
    return [s for s in sentences if s]


def tokenize(sentence, lowercase=True):
    """Tokenise one sentence (Penn-Treebank-like conventions).

    Args:
        sentence: a sentence of raw text.
        lowercase: lower-case the tokens (the corpora of the papers are).

    Returns:
        A list of token strings.

    Example:
    >>> tokenize("The U.S. didn't say it's 3.5% higher.")
    ['the', 'u.s.', 'did', "n't", 'say', 'it', "'s", '3.5', '%', 'higher', '.']
    """
    sentence = sentence.translate(_QUOTES)
    if lowercase:
        sentence = sentence.lower()
    return _TOKEN_RE.findall(sentence)


def sentences_from_text(text, lowercase=True, strip_html=False):
    """Raw paragraph -> list of tokenised sentences (empty sentences dropped).

    Args:
        text: raw text.
        lowercase: lower-case the tokens.
        strip_html: run `clean_html` first (aclImdb reviews).

    Returns:
        A list of sentences, each a non-empty list of tokens.
    """
    if strip_html:
        text = clean_html(text)
    else:
        text = _SPACE_RE.sub(" ", text.translate(_QUOTES))
    sentences = (tokenize(s, lowercase=lowercase) for s in split_sentences(text))
    return [s for s in sentences if s]
