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
