"""The topic hierarchy of a trained rGBN-RNN / GBN-RNN and its Graphviz export.

`topic_hierarchy` reads the global parameters of a model (paper Fig. 5;
reference rgbn_rnn.md §6.4): the top words of every topic of every layer
(through Phi^1 ... Phi^l), the strongest parent -> child loadings of Phi^{l+1}
and the strongest topic transitions of Pi^l, as a JSON-serialisable dict.
`hierarchy_to_dot` draws it as Graphviz DOT text and `hierarchy_to_svg` renders
the text with Graphviz's ``dot`` binary (a subprocess), when installed.

Example:
>>> tree = topic_hierarchy(model, topic_vocab, top_n=8)              # doctest: +SKIP
>>> hierarchy_to_svg(hierarchy_to_dot(tree), "topics.svg")          # doctest: +SKIP
'topics.svg'
"""

import shutil
import subprocess

import numpy as np

from tfktopic.data.vocab import topic_words

__all__ = ["topic_hierarchy", "hierarchy_to_dot", "hierarchy_to_svg"]


def topic_hierarchy(model, vocabulary=None, top_n=10, num_children=3, num_transitions=3,
                    min_weight=0.0):
    """The topic hierarchy of a trained rGBN-RNN (paper Fig. 5; reference §6.4).

    Args:
        model: an `RGBNRNN`.
        vocabulary: a `TopicVocabulary` or list of topic words; `None` gives ids.
        top_n: words per topic (top entries of Phi^1 ... Phi^l's column).
        num_children: hierarchical edges kept per parent topic (largest
            Phi^{l+1}[child, parent]).
        num_transitions: temporal edges kept per "from" topic (largest
            Pi^l[to, from]).
        min_weight: drop edges lighter than this.

    Returns:
        A JSON-serialisable dict: ``num_layers``, ``recurrent``, ``layers`` (a
        list, bottom first, of ``{"layer", "topics": [{"id", "words",
        "weights"}]}``), ``hierarchical_edges`` (``{"parent_layer", "parent",
        "child_layer", "child", "weight"}``) and ``temporal_edges``
        (``{"layer", "from", "to", "weight"}``).
    """
    if int(top_n) < 1:
        raise ValueError(f"top_n must be >= 1, got {top_n}")
    if int(num_children) < 0 or int(num_transitions) < 0:
        raise ValueError(f"num_children and num_transitions must be >= 0, got "
                         f"{num_children}, {num_transitions}")
    products = [np.asarray(p, np.float64) for p in model.topic_model.phi_products()]
    layers = []
    for l, loadings in enumerate(products):
        order = np.argsort(-loadings, axis=0, kind="stable")[:int(top_n)]
        topics = []
        for k in range(loadings.shape[1]):
            ids = order[:, k]
            topics.append({"id": k,
                           "words": [int(i) for i in ids] if vocabulary is None
                           else topic_words(vocabulary, ids),
                           "weights": [round(float(loadings[i, k]), 6) for i in ids]})
        layers.append({"layer": l, "topics": topics})
    hierarchical = []
    for l in range(1, model.num_layers):
        phi = np.asarray(model.phis[l], np.float64)  # [K_{l-1}, K_l]: children x parents
        for parent in range(phi.shape[1]):
            for child in np.argsort(-phi[:, parent], kind="stable")[:int(num_children)]:
                if phi[child, parent] >= min_weight:
                    hierarchical.append({"parent_layer": l, "parent": int(parent),
                                         "child_layer": l - 1, "child": int(child),
                                         "weight": round(float(phi[child, parent]), 6)})
    temporal = []
    for l, pi in enumerate(model.pis):
        pi = np.asarray(pi, np.float64)  # [to, from]
        for source in range(pi.shape[1]):
            for target in np.argsort(-pi[:, source], kind="stable")[:int(num_transitions)]:
                if pi[target, source] >= min_weight:
                    temporal.append({"layer": l, "from": int(source), "to": int(target),
                                     "weight": round(float(pi[target, source]), 6)})
    return {"num_layers": model.num_layers, "recurrent": model.recurrent, "layers": layers,
            "hierarchical_edges": hierarchical, "temporal_edges": temporal}


def _node(layer, topic):
    return f"L{layer}_T{topic}"


def hierarchy_to_dot(hierarchy, words_per_topic=5, temporal=True, name="rgbn_topics"):
    """Graphviz DOT text of a `topic_hierarchy` dict.

    One node per topic (labelled with its top words), one rank per layer (top
    layer first), solid arrows parent -> child (Phi) and, with `temporal`,
    dashed arrows from -> to (Pi) within a layer.

    Args:
        hierarchy: the dict of `topic_hierarchy`.
        words_per_topic: words shown per node.
        temporal: draw the Pi edges.
        name: graph name.

    Returns:
        DOT source text.
    """
    def quote(text):
        return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"') + '"'

    lines = [f"digraph {quote(name)} {{", "  rankdir=TB;",
             '  node [shape=box, style=rounded, fontsize=10];']
    for layer in reversed(hierarchy["layers"]):
        l = layer["layer"]
        lines.append(f"  subgraph {quote('cluster_layer_' + str(l))} {{")
        lines.append(f"    label={quote(f'layer {l + 1}')}; rank=same;")
        for topic in layer["topics"]:
            k = topic["id"]
            words = " ".join(str(w) for w in topic["words"][:int(words_per_topic)])
            label = quote(f"{l + 1}.{k}: {words}")
            lines.append(f"    {_node(l, k)} [label={label}];")
        lines.append("  }")
    for edge in hierarchy["hierarchical_edges"]:
        lines.append(f"  {_node(edge['parent_layer'], edge['parent'])} -> "
                     f"{_node(edge['child_layer'], edge['child'])} "
                     f"[penwidth={1 + 3 * edge['weight']:.2f}];")
    if temporal:
        for edge in hierarchy["temporal_edges"]:
            lines.append(f"  {_node(edge['layer'], edge['from'])} -> "
                         f"{_node(edge['layer'], edge['to'])} "
                         f"[style=dashed, color=gray40, constraint=false];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def hierarchy_to_svg(dot_text, path):
    """Render DOT text to an SVG file with Graphviz's ``dot``, if installed.

    Args:
        dot_text: from `hierarchy_to_dot`.
        path: output ``.svg`` path.

    Returns:
        `path` when written, `None` when the ``dot`` binary is not on PATH.
    """
    dot = shutil.which("dot")
    if dot is None:
        return None
    svg = subprocess.run([dot, "-Tsvg"], input=dot_text.encode("utf-8"), capture_output=True,
                         check=True).stdout
    with open(path, "wb") as handle:
        handle.write(svg)
    return path
