"""Topic pictures drawn with matplotlib: no Graphviz, no display, SVG or PNG by suffix.

Two pictures:

* `save_hierarchy` -- the rGBN-RNN topic hierarchy of
  `tfktopic.models.rgbn.hierarchy.topic_hierarchy` (paper Fig. 5): one row
  per layer (top layer at the top), one box per topic with its top words,
  solid arrows parent -> child for the hierarchical loadings Phi^{l+1} and
  dashed arcs for the temporal transitions Pi^l, line width by weight.
* `save_topic_grid` -- a grid of topics, each a small horizontal bar chart of
  its top words and their weights (TCNLM, TopicRNN, LDA, or one rGBN layer).

Both use `matplotlib.figure.Figure` directly (the Agg / SVG canvases that
ship with matplotlib), so they work on a server without a display and
without touching pyplot's global state.

Example:
>>> from tfktopic.pictures import save_topic_grid
>>> save_topic_grid([(["game", "team"], [0.2, 0.1]), (["court", "judge"], [0.3, 0.2])],
...                 "topics.svg")                                  # doctest: +SKIP
'topics.svg'
"""

import pathlib

import numpy as np

__all__ = ["FORMATS", "hierarchy_figure", "save_hierarchy", "topic_grid_figure",
           "save_topic_grid", "select_subtree", "grid_shape",
           "omitted_topics"]

#: File suffixes the pictures are written in.
FORMATS = (".svg", ".png")


def _figure(width, height, layout=None):
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout=layout)


def _save(figure, path, dpi):
    path = pathlib.Path(path)
    if path.suffix.lower() not in FORMATS:
        raise ValueError(f"{path}: a picture is written as {' or '.join(FORMATS)} (by the "
                         f"file's suffix), not {path.suffix or 'a file without suffix'!r}")
    import matplotlib

    # SVG text stays <text> (searchable, selectable, small), not glyph outlines.
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        figure.savefig(path, format=path.suffix.lower()[1:], dpi=dpi, bbox_inches="tight")
    return str(path)


# ------------------------------------------------------------------------ hierarchy
def select_subtree(hierarchy, max_roots=8):
    """The topics a readable hierarchy picture shows.

    Starting from the first `max_roots` topics of the top layer, follow the
    hierarchical edges down and keep every child reached (the picture of
    paper Fig. 5). A one-layer hierarchy keeps its first `max_roots` topics.

    Args:
        hierarchy: a `topic_hierarchy` dict.
        max_roots: top-layer topics to start from (`None`: every topic of
            every layer).

    Returns:
        dict layer -> sorted list of kept topic ids.
    """
    layers = hierarchy["layers"]
    if max_roots is None:
        return {layer["layer"]: [t["id"] for t in layer["topics"]] for layer in layers}
    top = layers[-1]["layer"]
    kept = {layer["layer"]: set() for layer in layers}
    kept[top] = {t["id"] for t in layers[-1]["topics"][:int(max_roots)]}
    for l in range(top, 0, -1):
        for edge in hierarchy["hierarchical_edges"]:
            if edge["parent_layer"] == l and edge["parent"] in kept[l]:
                kept[edge["child_layer"]].add(edge["child"])
    return {l: sorted(ids) for l, ids in kept.items()}


def _order_rows(hierarchy, kept):
    """Order each row by the barycentre of its parents (fewer crossings)."""
    rows = {}
    top = max(kept)
    rows[top] = list(kept[top])
    for l in range(top - 1, -1, -1):
        above = {k: i for i, k in enumerate(rows[l + 1])}
        weight_sum, position_sum = {}, {}
        for edge in hierarchy["hierarchical_edges"]:
            if (edge["child_layer"] == l and edge["child"] in kept[l]
                    and edge["parent"] in above):
                w = max(edge["weight"], 1e-9)
                weight_sum[edge["child"]] = weight_sum.get(edge["child"], 0.0) + w
                position_sum[edge["child"]] = (position_sum.get(edge["child"], 0.0)
                                               + w * above[edge["parent"]])
        centre = (len(rows[l + 1]) - 1) / 2.0
        rows[l] = sorted(kept[l], key=lambda k: (position_sum.get(k, centre * 1.0)
                                                 / weight_sum.get(k, 1.0), k))
    return rows


def omitted_topics(hierarchy, kept):
    """The topics of each layer a picture leaves out, with the reason, as caption lines.

    Args:
        hierarchy: a `topic_hierarchy` dict.
        kept: `select_subtree`'s dict layer -> shown topic ids.

    Returns:
        list of strings, one per layer that omits topics (empty: every topic shown).
    """
    lines = []
    for layer in hierarchy["layers"]:
        l = layer["layer"]
        left = sorted({t["id"] for t in layer["topics"]} - set(kept.get(l, ())))
        if left:
            ids = ", ".join(f"{l + 1}.{k}" for k in left[:40]) + (" ..." if len(left) > 40
                                                                  else "")
            reason = ("beyond the first top-layer topics shown" if l == max(kept)
                      else "not reached by an edge from the shown topics above")
            lines.append(f"layer {l + 1}: {len(left)} of {len(layer['topics'])} topics omitted "
                         f"({reason}): {ids}")
    return lines


def _arc(x0, x1, y, height):
    """A quadratic Bezier arc from (x0, y) to (x1, y) peaking `height` above y (data units)."""
    from matplotlib.path import Path

    middle = ((x0 + x1) / 2.0, y + 2.0 * height)
    return Path([(x0, y), middle, (x1, y)], [Path.MOVETO, Path.CURVE3, Path.CURVE3])


def hierarchy_figure(hierarchy, words_per_topic=5, temporal=True, max_roots=8):
    """A matplotlib `Figure` of a topic hierarchy.

    One row per layer (top layer at the top; the layer label on the left),
    solid arrows parent -> child for the loadings Phi^{l+1} and dashed arcs
    for the temporal transitions Pi^l, line width by weight; a legend says
    so. The arcs are drawn in data coordinates with a bounded height, so
    they stay inside the canvas. Every topic not drawn is listed, with the
    reason, in a caption under the picture (`omitted_topics`).

    Args:
        hierarchy: a `topic_hierarchy` dict (``layers``, ``hierarchical_edges``,
            ``temporal_edges``).
        words_per_topic: words shown in each topic's box.
        temporal: draw the temporal (Pi) edges among the shown topics.
        max_roots: top-layer topics to expand (`select_subtree`); `None`
            draws every topic.

    Returns:
        A `matplotlib.figure.Figure`.
    """
    from matplotlib.lines import Line2D
    from matplotlib.patches import FancyArrowPatch

    if int(words_per_topic) < 1:
        raise ValueError(f"words_per_topic must be >= 1, got {words_per_topic}")
    kept = select_subtree(hierarchy, max_roots)
    rows = _order_rows(hierarchy, kept)
    topics = {(layer["layer"], t["id"]): t for layer in hierarchy["layers"]
              for t in layer["topics"]}
    caption = omitted_topics(hierarchy, kept)
    widest = max(1, max(len(ids) for ids in rows.values()))
    num_layers = len(rows)
    unit = 0.45 + 0.17 * int(words_per_topic)       # inches per layer row
    figure = _figure(max(6.0, 1.5 * widest + 0.8),
                     unit * (num_layers + 0.5) + 0.8 + 0.18 * len(caption),
                     layout="constrained")
    axes = figure.add_subplot()
    axes.set_xlim(-0.9, widest - 0.4)
    top = num_layers - 1 + 0.75
    axes.set_ylim(-0.5, top)
    axes.axis("off")
    position = {}
    for l, ids in rows.items():
        offset = (widest - len(ids)) / 2.0
        for i, k in enumerate(ids):
            position[(l, k)] = (offset + i, float(l))
    edge_colour, arc_colour = "0.25", "tab:blue"
    labels = {}
    for (l, k), (x, y) in position.items():
        words = [str(w) for w in topics[(l, k)]["words"][:int(words_per_topic)]]
        labels[(l, k)] = axes.text(
            x, y, f"{l + 1}.{k}\n" + "\n".join(words), ha="center", va="center", fontsize=7,
            bbox={"boxstyle": "round,pad=0.3", "facecolor": "white", "edgecolor": "0.3"})
    for l in rows:
        axes.text(-0.85, float(l), f"layer {l + 1}" + (" (words)" if l == 0 else ""),
                  ha="left", va="center", fontsize=8, rotation=90, color="0.3")
    handles = []
    if any((e["parent_layer"], e["parent"]) in position
           and (e["child_layer"], e["child"]) in position
           for e in hierarchy["hierarchical_edges"]):
        handles.append(Line2D([], [], color=edge_colour, lw=2,
                              label="parent -> child: loading Phi (width ~ weight)"))
    arcs = temporal and any(
        (e["layer"], e["from"]) in position and (e["layer"], e["to"]) in position
        and e["from"] != e["to"] for e in hierarchy["temporal_edges"])
    if arcs:
        handles.append(Line2D([], [], color=arc_colour, lw=1.5, linestyle="--", alpha=0.6,
                              label="topic transition over time: Pi (width ~ weight)"))
    if handles:
        figure.legend(handles=handles, loc="outside upper center", ncols=len(handles),
                      fontsize=7, frameon=False)
    shown = sum(len(ids) for ids in rows.values())
    total = sum(len(layer["topics"]) for layer in hierarchy["layers"])
    text = f"{shown} of {total} topics shown (box: layer.topic and its top words)"
    figure.supxlabel("\n".join([text] + caption), fontsize=6, ha="left", x=0.01,
                     color="0.3")
    # The boxes' real half height in data units (after the layout), for the edges' ends.
    figure.draw_without_rendering()
    inverse = axes.transData.inverted()
    heights = [np.diff(inverse.transform(t.get_bbox_patch().get_window_extent())[:, 1])[0]
               for t in labels.values()]
    half = 0.5 * max(heights) if heights else 0.2
    for edge in hierarchy["hierarchical_edges"]:
        parent = (edge["parent_layer"], edge["parent"])
        child = (edge["child_layer"], edge["child"])
        if parent in position and child in position:
            (x0, y0), (x1, y1) = position[parent], position[child]
            axes.add_patch(FancyArrowPatch((x0, y0 - half), (x1, y1 + half),
                                           arrowstyle="-|>", mutation_scale=8,
                                           color=edge_colour, shrinkA=0, shrinkB=0,
                                           lw=0.5 + 3.0 * min(float(edge["weight"]), 1.0)))
    if temporal:
        for edge in hierarchy["temporal_edges"]:
            source, target = (edge["layer"], edge["from"]), (edge["layer"], edge["to"])
            if source in position and target in position and source != target:
                (x0, y0), (x1, _) = position[source], position[target]
                height = max(0.02, min(top - (y0 + half) - 0.05, 0.08 + 0.05 * abs(x1 - x0)))
                axes.add_patch(FancyArrowPatch(
                    path=_arc(x0, x1, y0 + half, height), arrowstyle="-|>", mutation_scale=7,
                    linestyle="--", color=arc_colour, alpha=0.6,
                    lw=0.5 + 2.0 * min(float(edge["weight"]), 1.0)))
    return figure


def save_hierarchy(hierarchy, path, words_per_topic=5, temporal=True, max_roots=8, dpi=150):
    """Write the hierarchy picture (`hierarchy_figure`) to ``.svg`` or ``.png``.

    Args:
        hierarchy: a `topic_hierarchy` dict.
        path: the output file; its suffix (``.svg`` / ``.png``) picks the format.
        words_per_topic, temporal, max_roots: see `hierarchy_figure`.
        dpi: resolution of a PNG.

    Returns:
        The path written, as a string.
    """
    return _save(hierarchy_figure(hierarchy, words_per_topic, temporal, max_roots), path, dpi)


# ------------------------------------------------------------------------- grid
def grid_shape(num_topics):
    """Columns and rows of the topic grid for `num_topics` panels.

    At most 10 columns (a panel ~1.9 inches wide stays readable on a screen);
    below that about sqrt(2 K) columns, so the grid is wider than tall.

    Args:
        num_topics: K >= 1.

    Returns:
        (columns, rows).
    """
    k = int(num_topics)
    if k < 1:
        raise ValueError(f"grid_shape: need at least one topic, got {num_topics}")
    columns = max(1, min(10, k, int(np.ceil(np.sqrt(2.0 * k)))))
    return columns, -(-k // columns)


def topic_grid_figure(topics, columns=None, title=None, usage=None, unused=None):
    """A grid of horizontal bar charts, one per topic (top word at the top).

    Every panel shares one x scale (0 .. the largest weight of any used topic), so
    bar lengths compare across topics; a bar of an unused topic beyond it is clipped at
    the scale's end and its weight written at the bar (an unused topic that puts most of
    its mass on one word would otherwise shrink every used topic's bars). The layout follows K (`grid_shape`;
    constrained layout places the title above the panels). Every topic gets
    a panel: an unused topic (`unused`) is drawn grey with "unused" in its
    title, a topic without words or with all weights 0 says "empty".

    Args:
        topics: a sequence of ``(words, weights)`` pairs (weights may be any
            non-negative scores, e.g. probabilities), or of word lists (then
            the bars show rank).
        columns: topics per row (`None`: `grid_shape`).
        title: optional figure title.
        usage: optional K mean topic proportions, shown in each panel's title.
        unused: optional topic ids to mark as unused (e.g.
            `tfktopic.runs.usage.unused(usage)`).

    Returns:
        A `matplotlib.figure.Figure`.
    """
    from matplotlib.ticker import MaxNLocator

    topics = list(topics)
    if not topics:
        raise ValueError("topic_grid_figure: no topics")
    if usage is not None and len(usage) != len(topics):
        raise ValueError(f"topic_grid_figure: {len(usage)} usage values for {len(topics)} "
                         "topics")
    idle = set(int(k) for k in (unused or ()))
    pairs = [_words_weights(t) for t in topics]
    if columns is None:
        columns, rows = grid_shape(len(topics))
    else:
        columns = max(1, min(int(columns), len(topics)))
        rows = -(-len(topics) // columns)
    words_per_topic = max(1, max(len(words) for words, _ in pairs))
    scaled = [weights for k, (_, weights) in enumerate(pairs) if weights and k not in idle]
    xmax = max([max(weights) for weights in scaled or
                [w for _, w in pairs if w]] + [0.0]) or 1.0
    height = rows * (0.16 * words_per_topic + 0.45) + (0.5 if title else 0.1)
    figure = _figure(1.9 * columns, height, layout="constrained")
    grid = figure.subplots(rows, columns, squeeze=False)
    for index, axes in enumerate(grid.flat):
        if index >= len(pairs):
            axes.set_visible(False)
            continue
        words, weights = pairs[index]
        marked = index in idle
        empty = not words or not any(weights)
        label = f"topic {index}"
        if usage is not None:
            label += f" ({float(usage[index]):.3f})"
        if marked:
            label += " unused"
        if empty:
            label += " empty"
        y = np.arange(len(words))[::-1]
        if words:
            shown = np.minimum(weights, 1.05 * xmax)
            axes.barh(y, shown, color="0.6" if marked else "tab:blue", alpha=0.8)
            for row, weight in zip(y, weights):
                if weight > 1.05 * xmax:   # clipped: say how long it is
                    axes.text(1.03 * xmax, row, f"{weight:.2f}", ha="right", va="center",
                              fontsize=5, color="white")
            axes.set_yticks(y, [str(w) for w in words], fontsize=6)
            axes.set_ylim(-0.6, words_per_topic - 0.4)
        else:
            axes.set_yticks([])
            axes.text(0.5, 0.5, "no words", transform=axes.transAxes, ha="center",
                      va="center", fontsize=7, color="0.4")
        axes.set_xlim(0.0, 1.05 * xmax)
        axes.xaxis.set_major_locator(MaxNLocator(3))
        axes.tick_params(axis="x", labelsize=5)
        axes.tick_params(axis="y", length=0)
        axes.set_title(label, fontsize=7, color="0.45" if (marked or empty) else "black")
        for side in ("top", "right"):
            axes.spines[side].set_visible(False)
    if title:
        note = f"{len(pairs)} topics; one x scale (weight) for every panel"
        if idle:
            note += f"; {len(idle)} unused (grey)"
        figure.suptitle(f"{title}\n{note}", fontsize=9)
    return figure


def _words_weights(topic):
    if (isinstance(topic, tuple) and len(topic) == 2
            and not isinstance(topic[0], (str, bytes))):
        words, weights = list(topic[0]), [float(w) for w in topic[1]]
        if len(words) != len(weights):
            raise ValueError(f"a topic has {len(words)} words but {len(weights)} weights")
        if any(not np.isfinite(w) or w < 0 for w in weights):
            raise ValueError("topic weights must be finite and >= 0")
        return words, weights
    words = list(topic)
    return words, [float(len(words) - i) for i in range(len(words))]


def save_topic_grid(topics, path, columns=None, title=None, dpi=150, usage=None, unused=None):
    """Write the topic grid (`topic_grid_figure`) to ``.svg`` or ``.png``.

    Args:
        topics: ``(words, weights)`` pairs or word lists.
        path: the output file; its suffix picks the format.
        columns, title, usage, unused: see `topic_grid_figure`.
        dpi: resolution of a PNG.

    Returns:
        The path written, as a string.
    """
    return _save(topic_grid_figure(topics, columns, title, usage, unused), path, dpi)
