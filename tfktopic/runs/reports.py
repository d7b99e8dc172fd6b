"""Using a run: topics, evaluation, generation and SavedModel export."""

import pathlib

import numpy as np

from tfktopic.data.preprocessors import sentence_windows
from tfktopic.errors import TfktopicError
from tfktopic.evaluation.perplexity import unigram_perplexity
from tfktopic.runs.data import (NPMI_REFERENCE, given_split, normalize_protocol,
                                npmi_reference, subset_documents,
                                perplexity_message, read_corpus, resolve_format,
                                score_perplexity, split_corpus)
from tfktopic.runs.files import jsonable, say, write_json
from tfktopic.runs.checks import OOV_WARNING_RATE, oov_rate
from tfktopic.models import registry
from tfktopic.runs.settings import GENERATION
from tfktopic.runs.usage import stored_usage, unused, unused_topic_note

# ---------------------------------------------------------------------- parameters
def parameter_counts(model):
    """How many numbers a model learned, by how it learned them.

    Args:
        model: a built tfktopic model.

    Returns:
        dict: ``gradient`` (trainable weights), ``sampled`` (parameters fitted another way,
        `TopicLanguageModel.sampled_parameters`: LDA+LSTM's LDA, rGBN-RNN's Phi / Pi), their
        sum ``total``, and ``state`` (the other non-trainable weights: carried LSTM states,
        preconditioners, counters -- not parameters).
    """
    size = lambda variables: sum(int(np.prod(v.shape)) for v in variables)
    sampled = list(getattr(model, "sampled_parameters", lambda: [])())
    sampled_ids = {id(v) for v in sampled}
    counts = {"gradient": size(model.trainable_weights), "sampled": size(sampled)}
    return {**counts, "total": counts["gradient"] + counts["sampled"],
            "state": size([v for v in model.non_trainable_weights if id(v) not in sampled_ids])}


def parameters_message(counts):
    """One line for a log, e.g. ``model: 2,849,351 parameters trained by gradient (+ 383,200
    fitted outside the gradient: topics)``."""
    sampled = f" (+ {counts['sampled']:,} fitted outside the gradient: topics)" \
        if counts["sampled"] else ""
    return f"model: {counts['gradient']:,} parameters trained by gradient{sampled}"


# ---------------------------------------------------------------------- topics / evaluate
def _require(run, trait, what):
    if not getattr(registry.get(run.name), trait):
        raise ValueError(f"{what} applies to {', '.join(registry.names(trait))}; {run.path} "
                         f"holds a {run.name} model")


def _trait(run, trait):
    """Whether the run's model has a `registry.ModelEntry` trait ("has_topics", ...)."""
    return getattr(registry.get(run.name), trait)


def run_topics(run, top_n=10):
    """Top words of a run's topics.

    Returns:
        For hierarchical models (``registry.get(name).hierarchical``) a list
        over layers (bottom first) of lists of
        word lists; else a list of word lists.
    """
    _require(run, "has_topics", "topics")
    top_n = min(int(top_n), len(run.topic_vocab))
    if top_n < 1:
        raise ValueError(f"--top-n must be >= 1, got {top_n}")
    if _trait(run, "hierarchical"):
        return [run.model.topics(top_n, run.topic_vocab, layer=level)
                for level in range(1, run.model.num_layers + 1)]
    return run.model.topics(top_n, run.topic_vocab)


#: Words per topic of the coherence (Lau et al.) and of the diversity (Dieng et al. 2020).
NPMI_TOP_N, DIVERSITY_TOP_N = 10, 25


def topic_quality(topics, train, top_n=NPMI_TOP_N, diversity_top_n=DIVERSITY_TOP_N):
    """NPMI coherence and topic diversity of a list of topics (the package's one rule).

    Args:
        topics: K lists of words ranked by weight, at least `diversity_top_n` long
            (shorter topics: the diversity over their length).
        train: the run's training `Corpus` (the NPMI reference, `npmi_reference`).
        top_n: words per topic of the NPMI (Lau et al.: 10).
        diversity_top_n: words per topic of the diversity (Dieng et al.: 25).

    Returns:
        dict ``npmi`` (mean over topics), ``npmi_per_topic``, ``diversity``,
        ``top_n``, ``diversity_top_n``, ``reference`` and ``topics`` (the `top_n`
        words of each topic that the NPMI scored, so that they can be scored again
        against another reference).
    """
    from tfktopic.evaluation import npmi_coherence
    from tfktopic.evaluation.coherence import topic_diversity

    size = min(int(top_n), min(len(t) for t in topics))
    heads = [list(t)[:size] for t in topics]
    coherence = npmi_coherence(heads, counts=npmi_reference(train, [w for t in heads for w in t]),
                               cardinalities=(size,))
    width = min(int(diversity_top_n), min(len(t) for t in topics))
    return {"npmi": coherence.mean, "npmi_per_topic": coherence.per_topic,
            "diversity": topic_diversity(topics, top_n=width), "top_n": size,
            "diversity_top_n": width, "reference": NPMI_REFERENCE, "topics": heads}


def lda_topics(train, topic_vocab, num_topics, seed=0, passes=None, top_n=DIVERSITY_TOP_N):
    """The top words of a gensim LDA with `num_topics` topics fitted on the training split
    (the baseline every model's topics are compared with; `passes` default
    `tfktopic.models.lstm.lda_lstm.LDA_PASSES`)."""
    from tfktopic.lda import LDA_PASSES, fit_lda

    lda = fit_lda(train, topic_vocab, num_topics=int(num_topics),
                  passes=LDA_PASSES if passes is None else passes, seed=seed)
    return [topic_vocab.decode([i for i, _ in lda.get_topic_terms(k, topn=int(top_n))])
            for k in range(int(num_topics))]


def quality_report(run, train, seed=0, log=print, lda=True):
    """Topic quality of a run beside a same-K gensim LDA on the same training split.

    Returns:
        dict ``model`` (`topic_quality` of the first layer's topics) and, with
        `lda`, ``lda`` (the LDA's), both printed in one line each.
    """
    topics = run_topics(run, DIVERSITY_TOP_N)
    topics = topics[0] if _trait(run, "hierarchical") else topics
    report = {"model": topic_quality(topics, train)}
    say(log, f"topic quality ({len(topics)} topics; NPMI coherence of the top {report['model']['top_n']} "
             f"words against {NPMI_REFERENCE}, diversity of the top "
             f"{report['model']['diversity_top_n']}): NPMI {report['model']['npmi']:.4f}, "
             f"diversity {report['model']['diversity']:.3f}")
    if lda:
        baseline = topic_quality(lda_topics(train, run.topic_vocab, len(topics), seed), train)
        report["lda"] = baseline
        say(log, f"gensim LDA with {len(topics)} topics on the same split: NPMI "
                 f"{baseline['npmi']:.4f}, diversity {baseline['diversity']:.3f}")
    return report


def print_topics(run, top_n, log, usage=None):
    """Print the top words of a run's topics (per layer); returns the first layer's.

    With `usage` (`tfktopic.runs.usage.topic_usage`, the first layer's), each first-layer
    topic shows its mean proportion, and "unused" by `tfktopic.runs.usage.unused`.
    """
    topics = run_topics(run, top_n)
    layers = topics if _trait(run, "hierarchical") else [topics]
    for l, layer in enumerate(layers):
        title = (f"layer {l + 1} topics" if _trait(run, "hierarchical") else "topics")
        shown = usage is not None and l == 0
        idle = set(unused(usage)) if shown else set()
        say(log, f"\n{title} (top {top_n} words"
                 + ("; [mean proportion over the training documents]" if shown else "") + "):")
        for k, words in enumerate(layer):
            share = ""
            if shown:
                share = f" [{usage[k]:.3f}{' unused' if k in idle else ''}]"
            say(log, f"  topic {k:>2}{share}: {' '.join(words)}")
    return layers[0]


def topics_report(run, top_n=10, json_path=None, dot_path=None, svg_path=None,
                  picture_path=None, log=print):
    """Print the topics; write the JSON, the hierarchy's DOT / SVG and a picture.

    Args:
        run: a `Run`.
        top_n: words per topic.
        json_path: write the topics (rGBN / GBN: the `topic_hierarchy` dict).
        dot_path, svg_path: rGBN / GBN: the hierarchy as Graphviz DOT, and as SVG
            (Graphviz's layout when ``dot`` is on PATH, else `tfktopic.pictures`).
        picture_path: any topic model: a ``.svg`` / ``.png`` picture drawn with
            matplotlib (rGBN / GBN: the hierarchy; others: a grid of each
            topic's top words and their weights).

    Returns:
        The JSON-ready dict (for rGBN / GBN the `topic_hierarchy` dict).
    """
    import shutil

    from tfktopic import pictures

    if (dot_path or svg_path) and not _trait(run, "hierarchical"):
        raise ValueError(f"--dot/--svg draw the topic hierarchy of rgbn_rnn or gbn_rnn; "
                         f"{run.path} holds a {run.name} model (--picture draws any model's "
                         "topics)")
    for flag, path, suffixes in (("--svg", svg_path, (".svg",)),
                                 ("--picture", picture_path, pictures.FORMATS)):
        if path and pathlib.Path(path).suffix.lower() not in suffixes:
            raise ValueError(f"{flag} {path}: the file must end in {' or '.join(suffixes)}")
    _require(run, "has_topics", "topics")
    usage = stored_usage(run)
    print_topics(run, top_n, log, usage)
    if _trait(run, "hierarchical"):
        from tfktopic.models.rgbn import hierarchy_to_dot, hierarchy_to_svg, topic_hierarchy

        payload = topic_hierarchy(run.model, run.topic_vocab, top_n=min(int(top_n),
                                                                       len(run.topic_vocab)))
        if dot_path or svg_path:
            dot = hierarchy_to_dot(payload)
            if dot_path:
                pathlib.Path(dot_path).write_text(dot, encoding="utf-8")
                say(log, f"wrote {dot_path}")
            if svg_path:
                if shutil.which("dot") is not None:
                    hierarchy_to_svg(dot, svg_path)
                else:  # no Graphviz: the same picture from matplotlib
                    pictures.save_hierarchy(payload, svg_path)
                say(log, f"wrote {svg_path}")
        if picture_path:
            pictures.save_hierarchy(payload, picture_path)
            say(log, f"wrote {picture_path}")
    else:
        payload = {"model": run.name, "top_n": int(top_n), "topics": run_topics(run, top_n),
                   "usage": usage}
        if picture_path:
            pictures.save_topic_grid(_topic_weights(run, top_n), picture_path,
                                     title=f"{run.name}: top words per topic", usage=usage,
                                     unused=unused(usage) if usage else None)
            say(log, f"wrote {picture_path}")
    if json_path:
        write_json(json_path, jsonable(payload))
        say(log, f"wrote {json_path}")
    return payload


def _topic_weights(run, top_n):
    """(words, weights) of each topic: its word distribution (a softmax of the
    row where the model's topic-word matrix holds logits, e.g. TopicRNN's B)."""
    matrix = np.asarray(run.model.topic_word_matrix(), dtype=np.float64)
    if np.any(matrix < 0) or not np.allclose(matrix.sum(axis=1), 1.0, atol=1e-3):
        matrix = np.exp(matrix - matrix.max(axis=1, keepdims=True))
        matrix /= matrix.sum(axis=1, keepdims=True)
    topics = []
    for row in matrix:
        order = np.argsort(-row, kind="stable")[:int(top_n)]
        topics.append((run.topic_vocab.decode(order), [float(row[i]) for i in order]))
    return topics


def run_splits(config):
    """The split of a run's own corpus, recomputed from its ``run.json``: the corpus's
    own files (`given_split`) or the seeded 80/10/10 split by document.

    Raises:
        TfktopicError: a run trained from a prepared directory (``train --prepared``):
            its split lives in shards, not in a corpus to re-read.
    """
    if config.get("format") == "prepared":
        raise TfktopicError(f"{config['corpus']}: the run was trained from this prepared "
                            "directory; its test perplexity is in the run's results.json "
                            "(evaluate reads corpora: pass --corpus FILE)")
    files = given_split(config["corpus"])
    if files is not None:
        return {name: subset_documents(read_corpus(path, config.get("format"), config["data"]),
                                       config.get("max_documents"))
                for name, path in files.items()}
    source = read_corpus(config["corpus"], config.get("format"), config["data"],
                         config.get("max_documents"), config.get("subset_seed"))
    return split_corpus(source, config.get("split_seed", config["seed"]))


def _evaluation_corpus(run, corpus, format, max_documents):
    """(corpus part to score, description): the run's test split or a whole corpus."""
    config = run.config
    if corpus is None:
        if max_documents is not None:
            raise ValueError("--max-documents applies with --corpus (the run's own test split "
                             "uses the run's documents)")
        test = run_splits(config)["test"]
        return test, f"{config['corpus']} (the run's test split, {len(test)} documents)"
    if format is None:
        try:
            format = resolve_format(corpus)
        except ValueError:
            if config.get("format") in (None, "lee"):
                raise
            format = config["format"]  # e.g. another TDLM file than the run's
    source = read_corpus(corpus, format, config["data"], max_documents)
    return source, f"{source.source or corpus} (whole corpus, {len(source)} documents)"


def evaluate_run(run, corpus=None, format=None, protocol="preceding", max_documents=None,
                 num_generated=100, seed=0, log=print, lda_baseline=False):
    """Perplexity, NPMI coherence and BLEU of a run on a corpus.

    Args:
        run: a `Run` (`load_run`).
        corpus: "lee" or a path scored whole; `None` scores the run's own test
            split (recomputed from ``run.json``: same corpus, seed, documents).
        format: the corpus format (inferred, else the run's).
        protocol: "preceding" (leak-free), "all_other" / "all-other" (the
            papers' protocol, which lets future text into the context) or "none"
            (every context empty: what the model scores without its topics).
        max_documents: with `corpus`, score only its first N documents.
        num_generated: generating models: sentences generated for BLEU.
        seed: generation seed (and the LDA baseline's).
        log: output lines (`None`: silent).
        lda_baseline: topic models: also fit a gensim LDA with as many topics
            on the run's training split and report its NPMI and diversity.

    Returns:
        dict: ``perplexity`` (`PerplexityResult.as_dict`), ``unigram_ppl``,
        ``parameters`` (`parameter_counts`),
        topic models ``npmi`` (top-10 words; reference: the run's training
        split, `tfktopic.runs.data.npmi_reference`) and ``diversity`` (top-25
        words), with `lda_baseline` ``lda_baseline``; generating models
        ``bleu`` (test-BLEU-3/4 against the corpus
        sentences and self-BLEU-3/4).
    """
    from tfktopic.evaluation import bleu_report

    protocol = normalize_protocol(protocol)
    part, description = _evaluation_corpus(run, corpus, format, max_documents)
    data = run.config["data"]
    batch = int(run.config.get("training", {}).get("batch_size", 64))
    result, _ = score_perplexity(run.name, run.model, part, run.lm_vocab, run.topic_vocab,
                                 data, protocol, batch)
    # Every model predicts the same targets: the sentence windows' (unigram, OOV rate).
    examples = sentence_windows(part, run.lm_vocab, run.topic_vocab, data)
    unigram = unigram_perplexity(run.lm_vocab, examples)
    report = {"run": str(run.path), "model": run.name, "corpus": description,
              "protocol": result.protocol, "perplexity": result.as_dict(), "unigram_ppl": unigram,
              "parameters": parameter_counts(run.model)}
    say(log, f"run {run.path}: {run.name} (preset {run.config.get('preset')})")
    say(log, parameters_message(report["parameters"]))
    say(log, f"corpus: {description}")
    report["oov_rate"] = oov_rate(examples, run.lm_vocab.unk_id)
    if report["oov_rate"] > OOV_WARNING_RATE:
        say(log, f"warning: {report['oov_rate']:.1%} of the scored tokens are not in the run's "
                 f"vocabulary (<unk>; threshold {OOV_WARNING_RATE:.0%}): the perplexity is not "
                 "comparable with the test split's")
    say(log, perplexity_message(run.name, result).replace("test perplexity", "perplexity"))
    say(log, f"unigram model on the same tokens: {unigram:.2f}")
    if _trait(run, "has_topics"):
        topics = run_topics(run, 10)
        topics = topics[0] if _trait(run, "hierarchical") else topics
        try:
            train = run_splits(run.config)["train"]
        except (TfktopicError, OSError) as error:  # e.g. a pretrained run without its corpus
            reason = str(error).splitlines()[0]
            report["npmi"] = {"skipped": f"the run's training corpus is not readable here: "
                                         f"{reason}", "reference": NPMI_REFERENCE}
            say(log, f"NPMI skipped: its reference ({NPMI_REFERENCE}) is not readable here: "
                     f"{reason}")
            train = None
    if _trait(run, "has_topics") and train is not None:
        quality = quality_report(run, train, seed=seed, log=log, lda=lda_baseline)
        ours = quality["model"]
        report["npmi"] = {"mean": ours["npmi"], "top_n": ours["top_n"],
                          "per_topic": ours["npmi_per_topic"], "reference": NPMI_REFERENCE}
        report["diversity"] = {"value": ours["diversity"], "top_n": ours["diversity_top_n"]}
        if "lda" in quality:
            report["lda_baseline"] = {"npmi": quality["lda"]["npmi"],
                                      "diversity": quality["lda"]["diversity"],
                                      "num_topics": len(topics)}
    if _trait(run, "generates") and int(num_generated) > 0:
        references = [run.lm_vocab.map_unknown(s) for s in part.sentences()]
        # BLEU keeps its protocol: <unk> as in the references (TCNLM never, as Wang et al.)
        unk = _trait(run, "allow_unk")
        hypotheses = [h.split() for h in generate_text(run, num=int(num_generated),
                                                       seed=seed, detokenized=False,
                                                       allow_unk=unk, **GENERATION)]
        empty = sum(1 for h in hypotheses if not h)
        hypotheses = [h for h in hypotheses if h]
        if len(hypotheses) >= 2 and references:
            bleu = bleu_report(hypotheses, references, orders=(3, 4))
            bleu.update({"empty_generated_dropped": empty,
                         "generation": {**GENERATION, "seed": seed, "allow_unk": unk,
                                        "conditioning": "prior" if _trait(run, "has_topics")
                                        else "none"}})
            report["bleu"] = bleu
            say(log, f"BLEU of {len(hypotheses)} generated sentences against the corpus "
                     f"sentences: test-BLEU-3 {bleu['test_bleu_3']:.4f}, test-BLEU-4 "
                     f"{bleu['test_bleu_4']:.4f}; self-BLEU-3 {bleu['self_bleu_3']:.4f}, "
                     f"self-BLEU-4 {bleu['self_bleu_4']:.4f}")
        else:
            say(log, f"BLEU skipped: {empty} of {num_generated} generated sentences were empty")
    return jsonable(report)


# ---------------------------------------------------------------------------- generation
def document_bow(run, path):
    """The topic bag of words [V_c] of a text file, tokenised as the run's corpus.

    The file is read as one document (its lines joined, as
    ``tfktopic.data.read_text(path, documents="file")`` reads it) and its topic
    words (the first ``context_len``) counted by the run's `Tokenizer`.

    Raises:
        CorpusFormatError / TfktopicError: missing or unreadable file, or no
            topic word in it.
    """
    from tfktopic.data.corpora import decoded_lines

    text = " ".join(line for _, line in decoded_lines(path))
    bow = run.tokenizer.bow(text, max_words=int(run.config["data"].get("context_len", 300)))
    if not bow.any():
        raise TfktopicError(f"{path}: none of its words is in the run's topic vocabulary; "
                            "nothing to condition on")
    return bow


def generate_text(run, num=None, max_len=30, topic=None, layer=None, document=None,
                  paragraph=None, method="top_k", temperature=1.0, top_k=10, seed=0,
                  allow_unk=False, log=None, sampler=None, top_p=0.9, detokenized=True):
    """Generate sentences with a run's model (``registry.get(name).generates``).

    Args:
        run: a `Run`.
        num: sentences (default 3), or with `paragraph` paragraphs (default 1).
        max_len: maximum tokens per sentence.
        topic: condition on topic K (0-based) of `layer`.
        layer: rGBN / GBN: 1-based layer of `topic` (1 = word-level topics).
        document: a text file whose topic bag of words conditions the text.
        paragraph: rGBN / GBN: paragraphs of this many sentences whose topics
            evolve through Pi (GBN: independent sentences).
        method: "greedy", "temperature" (or "sample") or "top_k".
        temperature, top_k: sampling settings.
        sampler: instead of `method`, a `tfktopic.models.samplers` name ("greedy",
            "random", "top_k", "top_p"); `top_p`: the nucleus mass of "top_p".
        seed: sampling seed.
        allow_unk: whether ``<unk>`` may be generated (default: no; `None`: the
            model's habit -- TCNLM never, as Wang et al.'s samples; the others may).
        log: where a note goes when `topic` is unused by the model
            (`tfktopic.runs.usage.unused_topic_note`); None: no note.
        detokenized: readable text (`tfktopic.tokenizer.detokenize`, what
            ``tfktopic generate`` prints); `False`: the space-separated tokens of
            the LM vocabulary (what BLEU compares with the corpus' sentences).

    Returns:
        A list of strings (sentences; with `paragraph`, paragraphs with one
        sentence per line), detokenised unless ``detokenized=False``.

    Raises:
        ValueError: an option that does not apply to the model (message names it).
    """
    name, model = run.name, run.model
    entry = registry.get(name)
    if not entry.generates:
        raise ValueError(f"{run.path} holds a {name} model, which cannot generate text; "
                         f"generation works with {', '.join(registry.names('generates'))}")
    hierarchical = entry.hierarchical
    if layer is not None and not hierarchical:
        raise ValueError(f"--layer applies to rgbn_rnn and gbn_rnn (topic layers); {name} has "
                         "one layer of topics")
    if paragraph is not None and not hierarchical:
        raise ValueError(f"--paragraph applies to rgbn_rnn and gbn_rnn (topics evolving from "
                         f"sentence to sentence); {name} generates single sentences")
    if layer is not None and topic is None:
        raise ValueError("--layer selects the layer of --topic; give --topic K as well")
    if (topic is not None or document is not None) and not entry.has_topics:
        raise ValueError(f"--topic and --document condition on topics; {name} has none "
                         "(it generates from <bos> alone)")
    if topic is not None and document is not None:
        raise ValueError("give --topic or --document, not both")
    if paragraph is not None and document is not None and not entry.topic_transitions:
        raise ValueError("--paragraph with --document continues the document through the topic "
                         "transitions Pi, which only rgbn_rnn has (gbn_rnn: drop --document)")
    if paragraph is not None and topic is not None:
        raise ValueError("--paragraph starts from the prior or from --document; it does not "
                         "take --topic")
    if method == "temperature":
        method = "sample"
    if allow_unk is None:
        allow_unk = entry.allow_unk
    options = {"method": method, "temperature": float(temperature), "top_k": int(top_k),
               "allow_unk": bool(allow_unk)}
    if sampler is not None:
        from tfktopic.models import samplers
        config = {"greedy": {}, "random": {"temperature": float(temperature)},
                  "top_k": {"k": int(top_k), "temperature": float(temperature)},
                  "top_p": {"p": float(top_p), "temperature": float(temperature)}}
        if sampler not in config:
            raise ValueError(f"--sampler must be one of {sorted(config)}, got {sampler!r}")
        options["sampler"] = samplers.get({"class_name": sampler, "config": config[sampler]})
        del options["method"]                                 # the sampler replaces it
    for key, value in (("--max-len", max_len), ("--top-k", top_k), ("--num", num),
                       ("--paragraph", paragraph)):
        if value is not None and int(value) < 1:
            raise ValueError(f"{key} must be >= 1, got {value}")
    if not float(temperature) > 0:
        raise ValueError(f"--temperature must be > 0, got {temperature}")
    if topic is not None:
        level = 1 if layer is None else int(layer)
        num_layers = model.num_layers if hierarchical else 1
        if not 1 <= level <= num_layers:
            raise ValueError(f"--layer {level}: the model has {num_layers} layer"
                             f"{'s' if num_layers > 1 else ''} of topics (1-{num_layers})")
        size = model.topic_sizes[level - 1] if hierarchical else model.num_topics
        if not 0 <= int(topic) < size:
            raise ValueError(f"--topic {topic}: layer {level} has {size} topics (0-{size - 1})")
        note = unused_topic_note(run, topic, level)
        if note:
            say(log, note)
    bow = None if document is None else document_bow(run, document)
    # Readable text (the attached tokenizer's), or the LM's tokens (ids decoded as they are).
    options["tokenizer"] = run.tokenizer if detokenized else False
    text = list if detokenized else run.tokenizer.decode_batch
    if paragraph is not None:
        texts = []
        for i in range(int(num or 1)):
            lines = model.generate_paragraph(int(paragraph), max_len=int(max_len),
                                             context_bow=None if bow is None else bow[None],
                                             seed=None if seed is None else int(seed) + i,
                                             **options)
            texts.append("\n".join(text(lines)))
        return texts
    num = int(num or 3)
    kwargs = dict(options, seed=seed, max_len=int(max_len))
    if hierarchical:
        if topic is not None:
            kwargs.update(topic=int(topic), layer=int(layer or 1))
        return text(model.generate(num, context_bow=None if bow is None else bow[None],
                                   **kwargs))
    return text(model.generate(num, topic=None if topic is None else int(topic),
                               context_bow=bow, **kwargs))


def export_run(run, saved_model):
    """Export a run's model and vocabularies as a TensorFlow SavedModel.

    Calls `tfktopic.export.export_saved_model(model, saved_model, lm_vocab=...,
    topic_vocab=...)`.

    Returns:
        The SavedModel path.
    """
    from tfktopic.export import export_saved_model

    export_saved_model(run.model, saved_model, lm_vocab=run.lm_vocab,
                              topic_vocab=run.topic_vocab)
    return pathlib.Path(saved_model)
