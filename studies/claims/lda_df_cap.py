"""Would a document-frequency cap on the topic vocabulary make IMDB's LDA informative?

On IMDB at 2,000 reviews a gensim LDA with K = 10 is barely above chance (its topics are
mixtures of the words every review uses: "like", "good", "movies"), so the defaults'
"NPMI >= 0.9 x LDA" criterion asks little there (docs/results/defaults.md). This measures
the obvious remedy before anyone adopts it: the same LDA (the one every defaults run is
compared with: K = 10, the ``small`` preset's topic vocabulary of the run's training split,
`tfktopic.runs.reports.lda_topics`) with the topic words kept only when they occur in at
most a share `CAPS` of the training documents (gensim's ``filter_extremes(no_above=...)``
rule), on each held-out corpus and on Lee, for the defaults' split seeds.

Usage::

    python -m studies.claims.lda_df_cap [--family gbn_rnn]
        # -> studies/results/defaults/lda_df_cap.json (and the table it prints)
    python -m studies.claims.lda_df_cap --corpora imdb --imdb-documents 10000 --caps none
        # is IMDB's LDA informative with more reviews? -> lda_df_cap_imdb10000.json
"""

import argparse
import json
import pathlib
import statistics

REPO = pathlib.Path(__file__).resolve().parents[2]
OUT = REPO / "studies" / "results" / "defaults" / "lda_df_cap.json"
#: Largest share of training documents a topic word may occur in (None: no cap, the defaults).
CAPS = (None, 0.5, 0.25, 0.1)
SEEDS = (0, 1, 2)


def _held_out(name):
    """(source, format, `read_corpus` keyword arguments) of a corpus of
    `studies.claims.defaults.CORPORA`, from its ``tfktopic train`` arguments."""
    from studies.claims.defaults import CORPORA as DEFAULTS

    path, extra = DEFAULTS[name]
    option = lambda flag: extra[extra.index(flag) + 1] if flag in extra else None
    kwargs = {key: int(option(flag)) for key, flag in (("max_documents", "--max-documents"),
                                                       ("subset_seed", "--subset-seed"))
              if option(flag) is not None}
    return REPO.parent / "shared" / "data" / path, option("--format"), kwargs


#: corpus -> (source, format, `read_corpus` keyword arguments): Lee and the defaults' corpora.
CORPORA = {"lee": ("lee", "lee", {}), "war_and_peace": _held_out("war_and_peace"),
           "imdb": _held_out("imdb")}


def capped(topic_vocab, train, cap):
    """`topic_vocab` without the words in more than ``cap`` x len(train) documents."""
    from tfktopic.data import TopicVocabulary
    from tfktopic.data.vocab import count_tokens

    if cap is None:
        return topic_vocab
    _, doc_freq, _, num_documents = count_tokens(train)
    keep = [w for w in topic_vocab.words if doc_freq[w] <= cap * num_documents]
    return TopicVocabulary(keep, topic_vocab.lm_vocab)


def measure(family="gbn_rnn", corpora=CORPORA, seeds=SEEDS, caps=CAPS, log=print):
    """LDA NPMI per corpus, seed and cap.

    Returns:
        list of dicts ``corpus``, ``seed``, ``cap``, ``topic_words``, ``npmi``, ``topic_0``.
    """
    from tfktopic import presets
    from tfktopic.runs import DATA_DEFAULTS
    from tfktopic.runs.data import build_vocabularies, read_corpus, split_corpus
    from tfktopic.runs.reports import lda_topics, topic_quality

    rows = []
    for name, (source, format, kwargs) in corpora.items():
        if name != "lee" and not pathlib.Path(source).exists():
            log(f"{name}: {source} is absent, skipped")
            continue
        corpus = read_corpus(str(source), format, {}, **kwargs)
        for seed in seeds:
            train = split_corpus(corpus, seed)["train"]
            data = {**DATA_DEFAULTS,
                    **presets.preset(family, "small").resolve_data(num_documents=len(train))}
            _, topic_vocab = build_vocabularies(train, data)
            for cap in caps:
                vocab = capped(topic_vocab, train, cap)
                quality = topic_quality(lda_topics(train, vocab, 10, seed), train)
                rows.append({"corpus": name, "seed": seed, "cap": cap,
                             "topic_words": len(vocab), "npmi": quality["npmi"],
                             "topic_0": quality["topics"][0]})
                log(f"{name} s{seed} cap {cap}: {len(vocab)} topic words, LDA NPMI "
                    f"{quality['npmi']:.4f} ({' '.join(quality['topics'][0][:6])})")
    return rows


def table(rows):
    """Markdown: mean LDA NPMI over seeds, one row per cap, one column per corpus."""
    corpora = list(dict.fromkeys(r["corpus"] for r in rows))
    lines = ["| topic words in at most | " + " | ".join(corpora) + " |",
             "|---|" + "---|" * len(corpora)]
    for cap in dict.fromkeys(r["cap"] for r in rows):
        cells = []
        for corpus in corpora:
            values = [r["npmi"] for r in rows if r["corpus"] == corpus and r["cap"] == cap]
            each = " / ".join(f"{v:.4f}" for v in values)
            cells.append(f"{statistics.mean(values):.4f} ({each})")
        label = "every document (the defaults)" if cap is None else f"{cap:.0%} of documents"
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", default="gbn_rnn",
                        help="whose small preset's topic vocabulary (default gbn_rnn)")
    parser.add_argument("--corpora", nargs="+", choices=list(CORPORA), default=list(CORPORA))
    parser.add_argument("--imdb-documents", type=int, default=2000,
                        help="IMDB's seeded subset size (default 2000, the defaults' runs)")
    parser.add_argument("--caps", nargs="+", default=["none", "0.5", "0.25", "0.1"],
                        help="document-frequency caps ('none': no cap)")
    args = parser.parse_args(argv)
    corpora = {name: CORPORA[name] for name in args.corpora}
    if "imdb" in corpora:
        source, format, kwargs = corpora["imdb"]
        corpora["imdb"] = (source, format, {**kwargs, "max_documents": args.imdb_documents})
    caps = tuple(None if cap == "none" else float(cap) for cap in args.caps)
    rows = measure(args.family, corpora, caps=caps)
    out = OUT if args.imdb_documents == 2000 else OUT.with_name(
        f"{OUT.stem}_imdb{args.imdb_documents}.json")
    out.write_text(json.dumps({"family": args.family, "num_topics": 10,
                               "imdb_documents": args.imdb_documents, "rows": rows},
                              indent=1) + "\n")
    print(table(rows))


if __name__ == "__main__":
    main()
