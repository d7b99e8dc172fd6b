"""Exceptions raised by tfktopic for bad user input.

Every error about a file names the file and, where there is one, the line, so
that a user can open the offending spot directly::

    CorpusFormatError: data/train.txt:17: document has no tokens
"""


class TfktopicError(Exception):
    """Base class of every error tfktopic raises on bad input."""


class CorpusFormatError(TfktopicError, ValueError):
    """A corpus file is missing, empty, undecodable or malformed.

    Args:
        path: the file (or directory) that is wrong.
        message: what is wrong with it.
        line: 1-based line number, or `None` when the problem is the whole file.
    """

    def __init__(self, path, message, line=None):
        self.path = str(path)
        self.line = line
        self.reason = message
        where = self.path if line is None else f"{self.path}:{line}"
        super().__init__(f"{where}: {message}")


class VocabularyError(TfktopicError, ValueError):
    """A vocabulary file is unreadable, of the wrong version, or does not match."""
