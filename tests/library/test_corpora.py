"""Corpus readers on the real corpora, and bad input with clear messages."""

import gzip
import json

import pytest

from tfktopic.data import corpora, load_corpus, read_imdb, read_ptb, read_tdlm, read_text
from tfktopic.data.text import sentences_from_text, split_sentences, tokenize
from tfktopic.errors import CorpusFormatError


def test_apnews_counts_match_the_file(apnews_path):
    corpus = read_tdlm(apnews_path)
    # Independent count straight from the raw lines.
    docs = sents = toks = 0
    with open(apnews_path, encoding="utf-8") as handle:
        for line in handle:
            fields = [f.split() for f in line.rstrip("\n").split("\t")]
            fields = [f for f in fields if f]
            docs += 1
            sents += len(fields)
            toks += sum(len(f) for f in fields)
    stats = corpus.stats()
    assert (stats["num_documents"], stats["num_sentences"], stats["num_tokens"]) == (docs, sents, toks)
    # The numbers of ../shared/data/README.md: 2,000 documents, 606,755 tokens.
    assert stats["num_documents"] == 2000
    assert stats["num_tokens"] == 606_755
    assert stats["num_sentences"] == 27_422


def test_ptb_documents_are_blocks_of_ten_sentences(ptb_dir):
    corpus = read_ptb(ptb_dir / "ptb.train.txt")
    stats = corpus.stats()
    assert stats["num_sentences"] == 42_068
    assert stats["num_tokens"] == 887_521
    assert len(corpus) == 4207  # ceil(42068 / 10)
    assert all(len(d) == 10 for d in corpus.documents[:-1]) and len(corpus.documents[-1]) == 8
    assert corpus[0][1][:3] == ["pierre", "<unk>", "N"]
    five = read_ptb(ptb_dir / "ptb.valid.txt", sentences_per_document=5)
    assert len(five) == (3370 + 4) // 5


def test_lee_corpus_loads_from_the_gensim_installation():
    import gensim.test.utils

    corpus = load_corpus("lee")
    path = gensim.test.utils.datapath("lee_background.cor")
    assert corpus.source == str(path)
    with open(path, encoding="utf-8") as handle:
        lines = [l for l in handle if l.strip()]
    assert len(corpus) == len(lines) == 300
    assert corpus[0][0][:6] == ["hundreds", "of", "people", "have", "been", "forced"]
    assert corpus.stats()["num_sentences"] > 2 * len(corpus)
    assert all(t == t.lower() for s in corpus.sentences() for t in s)


def test_imdb_jsonl_with_labels_and_clean_text(imdb_path):
    corpus = read_imdb(imdb_path, split="test", labels=("neg",), limit=30)
    assert len(corpus) == 30 and set(corpus.labels) == {"neg"}
    assert all(i.startswith("test/neg/") for i in corpus.ids)
    tokens = [t for s in corpus.sentences() for t in s]
    assert "br" not in tokens and "<" not in tokens
    assert corpus.stats()["mean_sentences_per_document"] > 3


def test_imdb_directory_layout_matches_jsonl(tmp_path, imdb_path):
    wanted = {"pos": 3, "neg": 3}
    records = []
    with gzip.open(imdb_path, "rt", encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            if record["split"] == "train" and wanted.get(record["label"], 0) > 0:
                wanted[record["label"]] -= 1
                records.append(record)
            if not any(wanted.values()):
                break
    for record in records:
        folder = tmp_path / "train" / record["label"]
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{record['id']}_{record['rating']}.txt").write_text(record["text"], encoding="utf-8")
    corpus = read_imdb(tmp_path, split="train")
    assert len(corpus) == 6 and sorted(corpus.labels) == ["neg"] * 3 + ["pos"] * 3
    by_id = dict(zip(corpus.ids, corpus.documents))
    for record in records:
        key = f"train/{record['label']}/{record['id']}_{record['rating']}"
        assert by_id[key] == sentences_from_text(record["text"], strip_html=True)


def test_text_reader_paragraphs_and_lines(tmp_path):
    path = tmp_path / "story.txt"
    path.write_text("The cat sat. Then it left!\n\nDr. Who arrived.\nHe stayed.\n", encoding="utf-8")
    corpus = read_text(path)
    assert corpus.documents == [[["the", "cat", "sat", "."], ["then", "it", "left", "!"]],
                                [["dr.", "who", "arrived", "."], ["he", "stayed", "."]]]
    assert len(read_text(path, documents="line")) == 3
    assert len(read_text(path, documents="file")) == 1


def test_tokenizer_and_sentence_splitter():
    assert tokenize("I can't believe it's $5.50!") == ["i", "ca", "n't", "believe", "it", "'s", "$", "5.50", "!"]
    assert split_sentences("Mr. Smith left at 4 p.m. Tuesday. It rained.") == [
        "Mr. Smith left at 4 p.m. Tuesday.", "It rained."]
    assert sentences_from_text("  ") == []
    assert tokenize("Dr. Who met Mr. Smith in Jan. and etc.") == [
        "dr.", "who", "met", "mr.", "smith", "in", "jan.", "and", "etc."]
    assert tokenize("Drive co-op") == ["drive", "co-op"]


def test_split_is_seeded_and_partitions_documents(apnews_toy_path):
    corpus = read_tdlm(apnews_toy_path)
    train, valid, test = corpus.split((0.8, 0.1, 0.1), seed=3)
    assert (len(train), len(valid), len(test)) == (80, 10, 10)
    again = corpus.split((0.8, 0.1, 0.1), seed=3)
    assert again[1].documents == valid.documents
    ids = lambda part: {id(d) for d in part.documents}
    assert not (ids(train) & ids(valid)) and not (ids(valid) & ids(test))
    assert corpus.split((0.8, 0.1, 0.1), seed=4)[1].documents != valid.documents
    with pytest.raises(ValueError, match="sum to 1"):
        corpus.split((0.5, 0.2))


# ---- bad input: every error names the file and, where there is one, the line ----

def test_missing_file(tmp_path):
    with pytest.raises(CorpusFormatError, match=r"nope\.txt: no such file"):
        read_tdlm(tmp_path / "nope.txt")
    with pytest.raises(CorpusFormatError, match="no such file"):
        load_corpus(tmp_path / "nope.txt", format="ptb")


def test_empty_file(tmp_path):
    path = tmp_path / "empty.txt"
    path.write_bytes(b"")
    for reader in (read_tdlm, read_ptb, read_text):
        with pytest.raises(CorpusFormatError, match=r"empty\.txt: file is empty"):
            reader(path)


def test_empty_document_names_the_line(tmp_path):
    path = tmp_path / "docs.txt"
    path.write_text("a b\tc d\n\nе f\n", encoding="utf-8")
    with pytest.raises(CorpusFormatError, match=r"docs\.txt:2: document has no tokens") as info:
        read_tdlm(path)
    assert info.value.line == 2 and info.value.path.endswith("docs.txt")
    assert len(read_tdlm(path, skip_empty=True)) == 2


def test_line_with_no_tokens(tmp_path):
    path = tmp_path / "tabs.txt"
    path.write_text("a b\n \t  \t\n", encoding="utf-8")
    with pytest.raises(CorpusFormatError, match=r"tabs\.txt:2: document has no tokens"):
        read_tdlm(path)
    ptb = tmp_path / "ptb.txt"
    ptb.write_text("a b\n   \nc\n", encoding="utf-8")
    with pytest.raises(CorpusFormatError, match=r"ptb\.txt:2: sentence has no tokens"):
        read_ptb(ptb)


def test_non_utf8_bytes_name_line_and_byte(tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes("fine line\n".encode() + "caf\u00e9 au lait\n".encode("latin-1"))
    with pytest.raises(CorpusFormatError, match=r"latin1\.txt:2: not valid UTF-8: byte 0xe9 at column 4"):
        read_tdlm(path)


def test_whole_file_with_nothing_but_blank_text(tmp_path):
    path = tmp_path / "blank.txt"
    path.write_text("\n\n   \n", encoding="utf-8")
    with pytest.raises(CorpusFormatError, match=r"blank\.txt: contains no document"):
        read_text(path)


def test_bad_imdb_record_names_the_line(tmp_path):
    path = tmp_path / "reviews.jsonl"
    path.write_text('{"split": "train", "label": "pos", "text": "Good."}\n{"oops": 1}\n')
    with pytest.raises(CorpusFormatError, match=r"reviews\.jsonl:2: not a review record"):
        read_imdb(path)


def test_unknown_format_and_uninferable_format(tmp_path):
    path = tmp_path / "x.txt"
    path.write_text("a\n")
    with pytest.raises(ValueError, match="unknown corpus format 'csv'"):
        load_corpus(path, format="csv")
    with pytest.raises(ValueError, match="pass format="):
        load_corpus(path)
    assert corpora.FORMATS == ("tdlm", "ptb", "imdb", "text", "lee")


# ---------------------------------------------------------------- bad input, said in one line
def test_truncated_gzip_is_one_line_naming_the_file(tmp_path):
    import gzip as gzip_lib

    from tfktopic.data.corpora import count_documents, decoded_lines
    from tfktopic.errors import CorpusFormatError

    path = tmp_path / "docs.txt.gz"
    data = gzip_lib.compress(("a b c\tdef g\n" * 2000).encode())
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CorpusFormatError) as info:
        list(decoded_lines(path))
    message = str(info.value)
    assert "\n" not in message and str(path) in message and "truncated" in message
    with pytest.raises(CorpusFormatError, match="truncated"):
        count_documents(path, "tdlm")


def test_gzip_file_named_txt_is_reported_as_gzip(tmp_path):
    import gzip as gzip_lib

    from tfktopic.data.corpora import read_tdlm
    from tfktopic.errors import CorpusFormatError

    path = tmp_path / "docs.txt"
    path.write_bytes(gzip_lib.compress(b"a b\tc d\n"))
    with pytest.raises(CorpusFormatError, match=r"docs\.txt: is gzip-compressed .* 1f 8b"):
        read_tdlm(path)


def test_one_document_corpus_is_refused_before_parsing(tmp_path, monkeypatch):
    from tfktopic.data import corpora
    from tfktopic.errors import TfktopicError
    from tfktopic.runs.data import read_corpus

    path = tmp_path / "one.txt"
    path.write_text(" ".join(["word"] * 200000) + "\n")
    monkeypatch.setattr(corpora, "read_tdlm", lambda *a, **k: pytest.fail("parsed the file"))
    with pytest.raises(TfktopicError, match="1 documents leave the valid/test split empty"):
        read_corpus(str(path), "tdlm", {}, will_split=True)
    (tmp_path / "nine.txt").write_text("a b\tc\n" * 4)
    with pytest.raises(TfktopicError, match="4 documents leave the test split empty"):
        read_corpus(str(tmp_path / "nine.txt"), "tdlm", {}, will_split=True)


def test_count_documents_matches_the_readers(tmp_path):
    from tfktopic.data.corpora import count_documents, read_ptb, read_tdlm

    tdlm = tmp_path / "d.txt"
    tdlm.write_text("a b\tc\nd e\n\nf\n", encoding="utf-8")
    assert count_documents(tdlm, "tdlm") == len(read_tdlm(tdlm, skip_empty=True)) == 3
    ptb = tmp_path / "p.txt"
    ptb.write_text("".join(f"w{i} x\n" for i in range(23)) + "last")
    assert count_documents(ptb, "ptb", 10) == len(read_ptb(ptb, 10)) == 3


def test_prepare_data_refuses_a_one_document_file_before_parsing(tmp_path, monkeypatch):
    from tfktopic.data import corpora as corpora_module
    from tfktopic.errors import TfktopicError
    from tfktopic.runs import DATA_DEFAULTS
    from tfktopic.runs.data import prepare_data

    path = tmp_path / "one.txt"
    path.write_text(" ".join(["word"] * 1000) + "\n")
    monkeypatch.setattr(corpora_module, "read_tdlm", lambda *a, **k: pytest.fail("parsed"))
    with pytest.raises(TfktopicError, match="1 documents leave the valid/test split empty"):
        prepare_data({"name": "lstm", "data": dict(DATA_DEFAULTS)}, str(path), format="tdlm")
