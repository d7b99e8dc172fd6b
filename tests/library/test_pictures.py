"""Topic pictures without Graphviz: SVG files parse, PNG files open, content is drawn."""

import xml.etree.ElementTree as ElementTree

import numpy as np
import pytest

from tfktopic.pictures import save_hierarchy, save_topic_grid, select_subtree


def _hierarchy():
    """A 3-layer hierarchy dict in the `topic_hierarchy` format (sizes 6-4-2)."""
    rng = np.random.default_rng(0)
    sizes = (6, 4, 2)
    layers = [{"layer": l, "topics": [
        {"id": k, "words": [f"w{l}_{k}_{i}" for i in range(6)],
         "weights": sorted(rng.uniform(0, 1, 6), reverse=True)} for k in range(size)]}
        for l, size in enumerate(sizes)]
    hierarchical = [{"parent_layer": l, "parent": p, "child_layer": l - 1,
                     "child": (2 * p + c) % sizes[l - 1], "weight": 0.5}
                    for l in (1, 2) for p in range(sizes[l]) for c in range(2)]
    temporal = [{"layer": l, "from": k, "to": (k + 1) % size, "weight": 0.3}
                for l, size in enumerate(sizes) for k in range(size)]
    return {"num_layers": 3, "recurrent": True, "layers": layers,
            "hierarchical_edges": hierarchical, "temporal_edges": temporal}


def _svg_text(path):
    root = ElementTree.parse(path).getroot()          # raises if not well-formed XML
    assert root.tag.endswith("svg")
    # The labels are real <text> elements (svg.fonttype "none").
    return "\n".join("".join(node.itertext()) for node in root.iter()
                     if node.tag.endswith("text"))


def test_hierarchy_svg_parses_and_shows_every_selected_topic(tmp_path):
    hierarchy = _hierarchy()
    path = save_hierarchy(hierarchy, tmp_path / "h.svg", words_per_topic=3, max_roots=None)
    text = _svg_text(path)
    for layer in hierarchy["layers"]:
        for topic in layer["topics"]:
            assert f"{layer['layer'] + 1}.{topic['id']}" in text
            assert topic["words"][0] in text
            assert topic["words"][3] not in text     # only words_per_topic words


def test_hierarchy_png_opens_with_the_drawn_size(tmp_path):
    import matplotlib.image

    path = save_hierarchy(_hierarchy(), tmp_path / "h.png", dpi=60)
    image = matplotlib.image.imread(path)
    assert image.ndim == 3 and image.shape[0] > 50 and image.shape[1] > 50
    assert image[..., :3].std() > 0.05               # not a blank page


def test_subtree_follows_hierarchical_edges_from_the_roots():
    hierarchy = _hierarchy()
    kept = select_subtree(hierarchy, max_roots=1)
    assert kept[2] == [0]
    assert kept[1] == [0, 1]                          # children of root 0: 0, 1
    assert kept[0] == [0, 1, 2, 3]                    # children of 0 and 1


def test_topic_grid_svg_and_png(tmp_path):
    import matplotlib.image

    topics = [(["court", "judge", "trial"], [0.3, 0.2, 0.1]),
              (["game", "team", "season"], [0.25, 0.2, 0.15]), ["tax", "budget", "bill"]]
    text = _svg_text(save_topic_grid(topics, tmp_path / "g.svg", columns=2))
    for word in ("court", "season", "budget"):
        assert word in text
    image = matplotlib.image.imread(save_topic_grid(topics, tmp_path / "g.png", dpi=50))
    assert image.shape[0] > 20


@pytest.mark.parametrize("call, message", [
    (lambda p: save_topic_grid([["a"]], p / "g.pdf"), "g.pdf: a picture is written as"),
    (lambda p: save_topic_grid([(["a", "b"], [1.0])], p / "g.svg"), "2 words but 1 weights"),
    (lambda p: save_topic_grid([], p / "g.svg"), "no topics"),
])
def test_bad_picture_requests_name_the_problem(tmp_path, call, message):
    with pytest.raises(ValueError, match=message):
        call(tmp_path)


# ------------------------------------------------- layout: shared scale, no overlaps, every topic
def _dirichlet_topics(num_topics, words_per_topic=10, seed=0):
    rng = np.random.default_rng(seed)
    vocabulary = np.array([f"word{i}" for i in range(500)])
    topics = []
    for row in rng.dirichlet(np.full(len(vocabulary), 0.05), size=num_topics):
        order = np.argsort(-row)[:words_per_topic]
        topics.append((list(vocabulary[order]), list(row[order])))
    return topics


def _drawn(figure):
    """Lay out and draw `figure` on an Agg canvas; returns the renderer."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    return canvas.get_renderer()


def _visible_axes(figure):
    return [axes for axes in figure.axes if axes.get_visible()]


@pytest.mark.parametrize("num_topics", [10, 50, 100])
def test_topic_grid_shares_one_x_scale_and_has_a_panel_per_topic(num_topics):
    from tfktopic.pictures import topic_grid_figure

    figure = topic_grid_figure(_dirichlet_topics(num_topics), title="t", unused=[1])
    panels = _visible_axes(figure)
    assert len(panels) == num_topics
    assert len({axes.get_xlim() for axes in panels}) == 1
    largest = max(max(w) for _, w in _dirichlet_topics(num_topics))
    assert panels[0].get_xlim()[1] >= largest
    assert panels[1].get_title().endswith("unused")


@pytest.mark.parametrize("num_topics", [50, 100])
def test_topic_grid_title_and_panels_do_not_overlap(num_topics):
    from tfktopic.pictures import topic_grid_figure

    figure = topic_grid_figure(_dirichlet_topics(num_topics), title="a title\nsecond line")
    renderer = _drawn(figure)
    title = figure._suptitle.get_window_extent(renderer)
    boxes = [axes.get_tightbbox(renderer) for axes in _visible_axes(figure)]
    for box in boxes:
        assert not title.overlaps(box)
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            assert not a.overlaps(b)


def test_topic_grid_svg_names_every_topic_including_empty_ones(tmp_path):
    topics = _dirichlet_topics(12) + [([], [])]
    text = _svg_text(save_topic_grid(topics, tmp_path / "g.svg", unused=[3]))
    for k in range(13):
        assert f"topic {k}" in text
    assert "topic 12 empty" in text and "topic 3 unused" in text


def test_hierarchy_edges_stay_inside_the_canvas_and_it_has_a_legend():
    from matplotlib.patches import FancyArrowPatch

    from tfktopic.pictures import hierarchy_figure

    figure = hierarchy_figure(_hierarchy(), max_roots=None)
    renderer = _drawn(figure)
    canvas = figure.bbox
    arrows = [p for p in figure.axes[0].patches if isinstance(p, FancyArrowPatch)]
    assert len(arrows) > 10
    for arrow in arrows:
        box = arrow.get_window_extent(renderer)
        assert canvas.x0 <= box.x0 and box.x1 <= canvas.x1
        assert canvas.y0 <= box.y0 and box.y1 <= canvas.y1
    assert len(figure.legends) == 1
    assert "Pi" in " ".join(t.get_text() for t in figure.legends[0].get_texts())


def test_hierarchy_lists_the_topics_it_omits():
    from tfktopic.pictures import omitted_topics

    hierarchy = _hierarchy()
    lines = omitted_topics(hierarchy, select_subtree(hierarchy, max_roots=1))
    assert lines[0].startswith("layer 1: 2 of 6 topics omitted") and "1.4, 1.5" in lines[0]
    assert lines[1].startswith("layer 2: 2 of 4") and lines[2].startswith("layer 3: 1 of 2")
    assert omitted_topics(hierarchy, select_subtree(hierarchy, max_roots=None)) == []


def test_hierarchy_svg_caption_names_the_omitted_topics(tmp_path):
    text = _svg_text(save_hierarchy(_hierarchy(), tmp_path / "h.svg", max_roots=1))
    assert "7 of 12 topics shown" in text and "3.1" in text
