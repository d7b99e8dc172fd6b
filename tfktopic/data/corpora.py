"""Corpus readers: every reader returns a `Corpus` of documents.

A document is a list of sentences and a sentence a list of token strings, so
``corpus.documents[d][s][i]`` is the i-th token of sentence s of document d.

Formats (`load_corpus(..., format=...)`):

* ``tdlm`` -- Lau et al.'s TDLM format (APNEWS, IMDB, BNC): one document per
  line, sentences separated by TAB, tokens by spaces, already lower-cased.
* ``ptb`` -- one sentence per line (Mikolov's PTB); documents are blocks of
  `sentences_per_document` consecutive sentences (10, as in TopicRNN).
* ``imdb`` -- the Large Movie Review Dataset, either the ``jsonl.gz`` of all
  reviews (fields split/label/id/rating/text) or the original ``aclImdb``
  directory (``train/pos/*.txt`` ...); the raw reviews are cleaned of HTML,
  sentence-split, tokenised and lower-cased; labels are kept.
* ``text`` -- plain text: paragraphs separated by blank lines (or one document
  per line) are sentence-split, tokenised and lower-cased.
* ``lee`` -- the embedded default corpus: 300 ABC news documents that gensim
  ships in its package (``gensim/test/test_data/lee_background.cor``), so it
  works offline wherever tfktopic is installed.
"""

import dataclasses
import gzip
import json
import os
import pathlib
import random
import zlib

from tfktopic.data import text as text_lib
from tfktopic.errors import CorpusFormatError

__all__ = [
    "Corpus",
    "FORMATS",
    "load_corpus",
    "infer_format",
    "read_tdlm",
    "read_ptb",
    "read_imdb",
    "read_text",
    "iter_imdb",
    "iter_text",
    "read_lee",
    "lee_corpus_path",
    "decoded_lines",
    "count_documents",
]

FORMATS = ("tdlm", "ptb", "imdb", "text", "lee")


@dataclasses.dataclass
class Corpus:
    """Documents as lists of sentences of tokens, with optional labels.

    Args:
        documents: list of documents; a document is a list of sentences, a
            sentence a non-empty list of token strings.
        labels: optional list with one label per document (e.g. "pos"/"neg").
        ids: optional list of document identifiers.
        source: where the corpus came from (a path or a name), for messages.

    Example:
    >>> corpus = Corpus([[["a", "cat"], ["it", "sat"]]], source="toy")
    >>> corpus.stats()["num_tokens"]
    4
    """

    documents: list
    labels: list = None
    ids: list = None
    source: str = ""

    def __post_init__(self):
        for name in ("labels", "ids"):
            values = getattr(self, name)
            if values is not None and len(values) != len(self.documents):
                raise ValueError(
                    f"Corpus {self.source!r}: {len(values)} {name} for "
                    f"{len(self.documents)} documents"
                )

    def __len__(self):
        return len(self.documents)

    def __iter__(self):
        return iter(self.documents)

    def __getitem__(self, index):
        return self.documents[index]

    def sentences(self):
        """Yield every sentence of every document, in order."""
        for document in self.documents:
            yield from document

    def subset(self, indices):
        """Return a new `Corpus` with the documents at `indices`, in that order."""
        indices = list(indices)
        pick = lambda values: None if values is None else [values[i] for i in indices]
        return Corpus(
            [self.documents[i] for i in indices], pick(self.labels), pick(self.ids), self.source
        )

    def split(self, fractions=(0.8, 0.1, 0.1), seed=0):
        """Split by document into consecutive parts of a seeded random order.

        Args:
            fractions: the parts' shares of the documents; they must sum to 1.
            seed: seed of the permutation (the split is stable across runs).

        Returns:
            A tuple of `Corpus`, one per fraction.
        """
        if any(f < 0 for f in fractions) or abs(sum(fractions) - 1.0) > 1e-6:
            raise ValueError(f"split fractions must be >= 0 and sum to 1, got {fractions}")
        order = list(range(len(self.documents)))
        random.Random(seed).shuffle(order)
        bounds, total = [0], 0.0
        for fraction in fractions:
            total += fraction
            bounds.append(round(total * len(order)))
        return tuple(self.subset(order[a:b]) for a, b in zip(bounds[:-1], bounds[1:]))

    def stats(self):
        """Counts of the corpus.

        Returns:
            A dict with num_documents, num_sentences, num_tokens, num_types,
            mean/max sentence length and mean sentences per document.
        """
        num_sentences = num_tokens = max_len = 0
        types = set()
        for sentence in self.sentences():
            num_sentences += 1
            num_tokens += len(sentence)
            max_len = max(max_len, len(sentence))
            types.update(sentence)
        num_docs = len(self.documents)
        return {
            "num_documents": num_docs,
            "num_sentences": num_sentences,
            "num_tokens": num_tokens,
            "num_types": len(types),
            "mean_sentence_length": num_tokens / max(num_sentences, 1),
            "max_sentence_length": max_len,
            "mean_sentences_per_document": num_sentences / max(num_docs, 1),
        }


def _check_file(path):
    path = pathlib.Path(path)
    if not path.exists():
        raise CorpusFormatError(path, "no such file")
    if path.is_dir():
        raise CorpusFormatError(path, "is a directory, expected a file")
    return path


_GZIP_MAGIC = b"\x1f\x8b"


def _open_binary(path):
    return gzip.open(path, "rb") if str(path).endswith(".gz") else open(path, "rb")


def decoded_lines(path):
    """The lines of a UTF-8 text file (``.gz`` read compressed), with clear errors.

    Args:
        path: the file.

    Yields:
        (line_number, text): 1-based numbers, the text without its line ending.

    Raises:
        CorpusFormatError: a missing file, a directory, an empty file or bytes
            that are not UTF-8 (naming the file, line and column).
    """
    path = _check_file(path)
    compressed = str(path).endswith(".gz")
    if not compressed:
        with open(path, "rb") as handle:
            if handle.read(2) == _GZIP_MAGIC:
                raise CorpusFormatError(path, "is gzip-compressed (starts with the gzip magic "
                                              "bytes 1f 8b) but its name does not end in .gz; "
                                              "rename it to .gz or decompress it")
    empty, number = True, 0
    with _open_binary(path) as handle:
        lines = enumerate(handle, start=1)
        while True:
            try:
                number, raw = next(lines)
            except StopIteration:
                break
            except (EOFError, gzip.BadGzipFile, OSError, zlib.error) as error:
                raise CorpusFormatError(path, f"compressed data is damaged or truncated after "
                                              f"line {number} ({error})") from None
            empty = False
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise CorpusFormatError(
                    path,
                    f"not valid UTF-8: byte 0x{raw[error.start]:02x} at column "
                    f"{error.start + 1}",
                    line=number,
                ) from None
            yield number, line.rstrip("\r\n")
    if empty:
        raise CorpusFormatError(path, "file is empty")


def count_documents(path, format, sentences_per_document=10):
    """Cheap first pass: the number of documents of a TDLM or PTB file, without parsing.

    Counts the lines holding a non-blank byte (a TDLM document, a PTB sentence)
    in 1 MiB blocks, so a 200 MB file of one line is counted in about a second
    instead of being tokenised for minutes.

    Args:
        path: the file (``.gz`` read compressed).
        format: "tdlm" or "ptb".
        sentences_per_document: PTB sentences per document.

    Returns:
        The number of documents `read_tdlm` / `read_ptb` would return (without
        `skip_empty`, an empty line is an error there anyway).

    Raises:
        CorpusFormatError: a damaged compressed file, or a file evidently in
            the other line format (as `read_tdlm` / `read_ptb` refuse it).
    """
    if format not in ("tdlm", "ptb"):
        raise ValueError(f"count_documents reads tdlm or ptb files, got {format!r}")
    path = _check_file(path)
    lines, blank, tabs, tail = 0, 0, 0, b""
    with _open_binary(path) as handle:
        try:
            for block in iter(lambda: handle.read(1 << 20), b""):
                pieces = (tail + block).split(b"\n")
                tail = pieces.pop()
                lines += len(pieces)
                blank += sum(1 for p in pieces if not p.strip())
                tabs += sum(1 for p in pieces if b"\t" in p.strip())
        except (EOFError, gzip.BadGzipFile, OSError, zlib.error) as error:
            raise CorpusFormatError(path, f"compressed data is damaged or truncated ({error})"
                                    ) from None
    if tail.strip():
        lines, tabs = lines + 1, tabs + (b"\t" in tail.strip())
    elif tail:
        lines, blank = lines + 1, blank + 1
    _sniff(path, format, lines, tabs)
    documents = lines - blank
    if format == "ptb":
        documents = -(-documents // int(sentences_per_document))
    return documents


def _finish(documents, path, **kwargs):
    if not documents:
        raise CorpusFormatError(path, "contains no document with tokens")
    return Corpus(documents, source=str(path), **kwargs)


# A file read as TDLM with no TAB in any of at least this many lines is one sentence per line.
_SNIFF_MIN_LINES = 20


def _sniff(path, format, num_lines, tab_lines):
    """Refuse a file that is evidently in the other line format (TDLM vs PTB).

    A TDLM document line holds its sentences separated by TABs; a PTB line is
    one sentence and has none. So a "PTB" file whose lines mostly hold TABs is
    TDLM, and a "TDLM" file of many lines none of which holds a TAB is one
    sentence per line.

    Raises:
        CorpusFormatError: naming the file and the likely format.
    """
    if format == "ptb" and tab_lines and tab_lines * 2 >= num_lines:
        raise CorpusFormatError(path, f"looks like TDLM format ({tab_lines} of {num_lines} lines "
                                      "hold TAB-separated sentences), not one sentence per "
                                      "line; pass --format tdlm")
    if format == "tdlm" and not tab_lines and num_lines >= _SNIFF_MIN_LINES:
        raise CorpusFormatError(path, f"looks like one sentence per line (PTB format): none of "
                                      f"its {num_lines} lines has a TAB between sentences, as "
                                      "a TDLM document line has; pass --format ptb (or text)")


def read_tdlm(path, skip_empty=False):
    """Read a TDLM-format file: a document per line, TAB between sentences.

    Args:
        path: the file (``.gz`` is decompressed).
        skip_empty: skip lines with no tokens instead of raising.

    Returns:
        A `Corpus`. Empty sentences inside a document are dropped.

    Raises:
        CorpusFormatError: missing/empty file, non-UTF-8 bytes, (unless
            `skip_empty`) a line with no tokens -- naming the file and line --
            or a file of 20+ lines without any TAB (one sentence per line:
            PTB format).

    Example:
    >>> corpus = read_tdlm("../shared/data/apnews/apnews.txt")  # doctest: +SKIP
    """
    documents, tab_lines, number = [], 0, 0
    for number, line in decoded_lines(path):
        tab_lines += "\t" in line.strip()
        document = [s.split() for s in line.split("\t")]
        document = [s for s in document if s]
        if not document:
            if skip_empty:
                continue
            raise CorpusFormatError(path, "document has no tokens (empty line)", line=number)
        documents.append(document)
    _sniff(path, "tdlm", number, tab_lines)
    return _finish(documents, path)


def read_ptb(path, sentences_per_document=10, skip_empty=False):
    """Read a one-sentence-per-line file such as Mikolov's PTB split.

    Args:
        path: the file, e.g. ``ptb.train.txt``.
        sentences_per_document: documents are blocks of this many consecutive
            sentences (10 in TopicRNN, after Mikolov & Zweig); the last block
            may be shorter.
        skip_empty: skip lines with no tokens instead of raising.

    Returns:
        A `Corpus`.

    Raises:
        CorpusFormatError: as `read_tdlm`, or a file most of whose lines hold
            TAB-separated sentences (TDLM format).
    """
    if int(sentences_per_document) < 1:
        raise ValueError(f"sentences_per_document must be >= 1, got {sentences_per_document}")
    sentences, tab_lines, number = [], 0, 0
    for number, line in decoded_lines(path):
        tab_lines += "\t" in line.strip()
        tokens = line.split()
        if not tokens:
            if skip_empty:
                continue
            raise CorpusFormatError(path, "sentence has no tokens (empty line)", line=number)
        sentences.append(tokens)
    _sniff(path, "ptb", number, tab_lines)
    n = int(sentences_per_document)
    return _finish([sentences[i:i + n] for i in range(0, len(sentences), n)], path)


def _imdb_jsonl_records(path, split, labels):
    """Yield (id, label, raw text) of the selected reviews of a jsonl(.gz) file."""
    for number, line in decoded_lines(path):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            record_split, label, text = record["split"], record["label"], record["text"]
        except (ValueError, KeyError, TypeError) as error:
            raise CorpusFormatError(
                path, f"not a review record with split/label/text ({error})", line=number
            ) from None
        if (split is None or record_split == split) and (not labels or label in labels):
            yield f"{record_split}/{label}/{record.get('id', number)}", label, text


def _imdb_directory_records(root, split, labels):
    """Yield (id, label, raw text) of the reviews of an aclImdb directory."""
    for split_name in [split] if split is not None else ["train", "test"]:
        split_dir = root / split_name
        if not split_dir.is_dir():
            raise CorpusFormatError(root, f"aclImdb directory has no {split_name}/ folder")
        for label in labels or ("neg", "pos", "unsup"):
            label_dir = split_dir / label
            if not label_dir.is_dir():
                continue
            for file in sorted(label_dir.glob("*.txt"), key=lambda p: (len(p.name), p.name)):
                text = "\n".join(line for _, line in decoded_lines(file))
                yield f"{split_name}/{label}/{file.stem}", label, text


def iter_imdb(path, split=None, labels=None, limit=None):
    """Stream the reviews of the Large Movie Review Dataset one at a time (none kept).

    Args:
        path, split, labels, limit: as `read_imdb`.

    Yields:
        (document, label, id) of each review with tokens, in file order:
        ``document`` a list of sentences of tokens (HTML stripped, lower-cased).
    """
    path = pathlib.Path(path)
    if split not in (None, "train", "test"):
        raise ValueError(f"split must be 'train', 'test' or None, got {split!r}")
    labels = tuple(labels) if labels else None
    records = (_imdb_directory_records if path.is_dir() else _imdb_jsonl_records)(
        path, split, labels)
    count = 0
    for review_id, label, text in records:
        if limit is not None and count >= limit:
            return
        document = text_lib.sentences_from_text(text, strip_html=True)
        if document:
            count += 1
            yield document, label, review_id


def read_imdb(path, split=None, labels=None, limit=None):
    """Read the Large Movie Review Dataset (Maas et al. 2011) with labels.

    Args:
        path: ``aclImdb_reviews.jsonl.gz`` (one JSON review per line) or the
            original ``aclImdb`` directory (``train/pos/*.txt`` ...).
        split: "train", "test" or `None` for both.
        labels: labels to keep, e.g. ``("pos", "neg")``; `None` keeps all
            (including "unsup", the unlabelled reviews).
        limit: stop after this many reviews (reading all 100k takes minutes).

    Returns:
        A `Corpus` whose `labels` are "pos" / "neg" / "unsup" and `ids`
        "split/label/id".
    """
    documents, doc_labels, ids = [], [], []
    for document, label, review_id in iter_imdb(path, split, labels, limit):
        documents.append(document)
        doc_labels.append(label)
        ids.append(review_id)
    return _finish(documents, pathlib.Path(path), labels=doc_labels, ids=ids)


def iter_text(path, documents="paragraph", lowercase=True):
    """Stream the documents of a raw text file one at a time (none kept).

    Args:
        path, documents, lowercase: as `read_text`.

    Yields:
        Each document with tokens: a list of sentences of tokens.
    """
    if documents not in ("paragraph", "line", "file"):
        raise ValueError(f"documents must be 'paragraph', 'line' or 'file', got {documents!r}")

    def parsed(lines):
        return text_lib.sentences_from_text(" ".join(lines), lowercase=lowercase)

    current = []
    for _, line in decoded_lines(path):
        if documents == "line" or (documents == "paragraph" and not line.strip()):
            if documents == "line":
                current.append(line)
            document = parsed(current) if current else None
            if document:
                yield document
            current = []
        else:
            current.append(line)
    if current and (document := parsed(current)):
        yield document


def read_text(path, documents="paragraph", lowercase=True):
    """Read raw text: sentence-split, tokenise and lower-case.

    Args:
        path: a UTF-8 text file.
        documents: "paragraph" (documents separated by blank lines), "line"
            (one document per line) or "file" (the whole file is one document).
        lowercase: lower-case the tokens.

    Returns:
        A `Corpus`.
    """
    return _finish(list(iter_text(path, documents, lowercase)), path)


def lee_corpus_path():
    """Path of gensim's Lee background corpus (300 ABC news documents)."""
    import gensim.test.utils

    return pathlib.Path(gensim.test.utils.datapath("lee_background.cor"))


def read_lee():
    """The embedded default corpus: gensim's Lee background news corpus.

    Returns:
        A `Corpus` of 300 documents read from gensim's installed test data,
        so it needs no download.
    """
    path = lee_corpus_path()
    if not path.exists():
        raise CorpusFormatError(
            path, "gensim's Lee corpus is missing from the gensim installation"
        )
    return read_text(path, documents="line")


def infer_format(path):
    """The format of a corpus path: "imdb" (a directory or ``*.jsonl[.gz]``) or "ptb"
    (``ptb.*``); ValueError naming ``format=`` otherwise."""
    path = pathlib.Path(path)
    name = path.name.lower()
    if path.is_dir() or name.endswith(".jsonl.gz") or name.endswith(".jsonl"):
        return "imdb"
    if name.startswith("ptb.") or ".ptb" in name:
        return "ptb"
    raise ValueError(
        f"cannot tell the format of {str(path)!r}: pass format= one of {FORMATS}"
    )


def load_corpus(name_or_path, format=None, **kwargs):
    """Load a corpus by name ("lee") or path, in one of `FORMATS`.

    Args:
        name_or_path: "lee" for the embedded corpus, or a file/directory path.
        format: one of "tdlm", "ptb", "imdb", "text", "lee"; inferred for
            "lee", ``*.jsonl.gz`` / aclImdb directories and ``ptb.*`` files.
        **kwargs: passed to the reader (e.g. `sentences_per_document`, `limit`).

    Returns:
        A `Corpus`.

    Example:
    >>> corpus = load_corpus("lee")
    >>> len(corpus)
    300
    """
    if format is None and str(name_or_path) == "lee":
        format = "lee"
    path = pathlib.Path(os.fspath(name_or_path))
    if format is None:
        format = infer_format(path)
    readers = {"tdlm": read_tdlm, "ptb": read_ptb, "imdb": read_imdb, "text": read_text}
    if format == "lee":
        return read_lee(**kwargs)
    if format not in readers:
        raise ValueError(f"unknown corpus format {format!r}: expected one of {FORMATS}")
    if not path.exists():
        raise CorpusFormatError(path, "no such file" + (" or directory" if format == "imdb" else ""))
    return readers[format](path, **kwargs)
