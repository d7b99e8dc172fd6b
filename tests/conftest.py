"""Shared pytest fixtures: paths to the real corpora in ../shared/data.

Tests that need a corpus skip with a message naming the missing file when the
shared data folder is absent (users of the package do not have it).
"""

import pathlib

import pytest


REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"


def shared_file(relative):
    """Return the path of a file under ../shared/data or skip the test."""
    path = SHARED_DATA / relative
    if not path.exists():
        pytest.skip(
            f"real corpus {relative!r} not found at {path}: the shared data "
            "folder (../shared/data next to the repository) is absent"
        )
    return path


@pytest.fixture(scope="session")
def ptb_dir():
    return shared_file("ptb/ptb.train.txt").parent


@pytest.fixture(scope="session")
def apnews_path():
    return shared_file("apnews/apnews.txt")


@pytest.fixture(scope="session")
def apnews_toy_path():
    return shared_file("apnews/toy-train.txt")


@pytest.fixture(scope="session")
def imdb_path():
    return shared_file("imdb/aclImdb_reviews.jsonl.gz")


@pytest.fixture(scope="session")
def mallet_stopwords_path():
    return shared_file("stopwords/mallet_en.txt")
