"""TopicRNN vs a plain RNN of the same size on Penn Treebank (issue 3; Dieng et al. 2017, Table 2).

Runs ``studies/papers/topicrnn_ptb.py --neurons 100 --cell rnn --baseline`` (imported as
`studies.papers.topicrnn_ptb`; its data, models, training and scoring are `tfktopic.runs`') (one recurrent layer
of 100 tanh units, K = 50 topics, documents of 10 sentences, Mallet stop words for the
inference network's bag of words, Adam 1e-3, batch 64, early stopping on the validation
perplexity) and records the test perplexity of TopicRNN against the plain RNN trained on
the same sentence windows with the same budget. Both are scored with a zero state per
sentence window; TopicRNN's theta comes from the **preceding** sentences only
(leak-free; the paper's protocol lets the whole document in, which is recorded as an
extra, labelled record). The paper reports 122.3 (TopicRNN) vs 142.1 (RNN) at 100
neurons.

Budgets: ``quick`` = a 200-document slice, 2 epochs; ``medium`` = all of PTB, 4 epochs;
``full`` = all of PTB, the paper's at most 15 epochs.

    python -m benchmarks.quality --mode medium --models topicrnn_ptb
"""

from benchmarks.common import SHARED_DATA, record, shared_file
from studies.papers import topicrnn_ptb

EPOCHS = {"quick": None, "medium": 4, "full": None}  # None: the script's own budget
PAPER = {"topicrnn": 122.3, "rnn": 142.1}


def quality(mode):
    """Test perplexity records of TopicRNN-100 (baseline: RNN-100) on PTB."""
    shared_file("ptb/ptb.train.txt")
    shared_file("stopwords/mallet_en.txt")
    argv = ["--neurons", "100", "--cell", "rnn", "--baseline", "--data-dir", str(SHARED_DATA)]
    if mode == "quick":
        argv.append("--quick")
    if EPOCHS[mode]:
        argv += ["--epochs", str(EPOCHS[mode])]
    results = topicrnn_ptb.main(argv)
    baseline = results["baseline"]["perplexity"]["test"]
    config = {k: results[k] for k in ("neurons", "cell", "num_topics", "epochs", "lm_vocab",
                                      "topic_vocab", "train_seconds")}
    config.update(baseline_train_seconds=results["baseline"]["train_seconds"], paper=PAPER,
                  command="python studies/papers/topicrnn_ptb.py " + " ".join(argv[:5]))
    protocol = ("sentence windows from a zero state; TopicRNN theta from the preceding "
                "sentences only (leak-free), stop-word indicator marginalised")
    return [
        record("quality", "topicrnn_ptb", "perplexity", results["perplexity"]["test"],
               "rnn_ptb", baseline, protocol=protocol, dataset="ptb", config=config),
        record("quality", "topicrnn_ptb", "perplexity", results["perplexity"]["test_all_other"],
               "rnn_ptb", baseline, protocol="the paper's: theta from all other sentences of "
               "the document (later text leaks into the context)", dataset="ptb", config=config),
        record("quality", "rnn_ptb", "perplexity", baseline, "unigram",
               results["perplexity"]["test_unigram"], protocol="sentence windows from a zero "
               "state", dataset="ptb", config=config),
    ]


QUALITY = {"topicrnn_ptb": quality}
