"""The self-contained HTML topic view: parses, has no external URL, embeds every topic."""

import html.parser
import json
import re

import numpy as np
import pytest

from tfktopic.topic_view import (classical_mds, js_distances, save_topic_view,
                                 topic_view_html)


class _Collect(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.data = [], {}
        self._current = None

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self._current = dict(attrs).get("id")

    def handle_endtag(self, tag):
        self._current = None

    def handle_data(self, data):
        if self._current == "topic-data":
            self.data = json.loads(data)


def _layers(sizes=(8, 3), vocabulary=60, seed=0):
    rng = np.random.default_rng(seed)
    return [{"name": f"layer {l + 1}", "phi": rng.dirichlet(np.full(vocabulary, 0.1), size=k),
             **({"usage": rng.dirichlet(np.ones(k))} if l == 0 else {})}
            for l, k in enumerate(sizes)]


def test_js_distances_are_zero_on_equal_rows_and_one_on_disjoint_rows():
    d = js_distances([[0.5, 0.5, 0, 0], [0.5, 0.5, 0, 0], [0, 0, 0.5, 0.5]])
    np.testing.assert_allclose(d, [[0, 0, 1], [0, 0, 1], [1, 1, 0]], atol=1e-9)


def test_classical_mds_recovers_planar_distances():
    points = np.array([[0.0, 0.0], [3.0, 0.0], [0.0, 4.0], [1.0, 1.0]])
    distances = np.linalg.norm(points[:, None] - points[None], axis=-1)
    coords = classical_mds(distances)
    np.testing.assert_allclose(np.linalg.norm(coords[:, None] - coords[None], axis=-1),
                               distances, atol=1e-9)


def test_html_parses_has_no_url_and_embeds_every_topic_of_every_layer(tmp_path):
    words = [f"w{i}" for i in range(60)]
    text = open(save_topic_view(_layers(), words, tmp_path / "v.html"), encoding="utf-8").read()
    parser = _Collect()
    parser.feed(text)
    parser.close()
    assert {"svg", "script", "select", "input"} <= set(parser.tags)
    assert not re.search(r"https?://", text)
    assert "src=" not in text and "<link" not in text
    layers = parser.data["layers"]
    assert [len(l["topics"]) for l in layers] == [8, 3]
    assert [t["id"] for t in layers[0]["topics"]] == list(range(8))
    assert layers[0]["has_usage"] and not layers[1]["has_usage"]


def test_embedded_words_are_each_topics_most_probable_and_marginal_is_usage_weighted():
    layers = _layers(sizes=(4,))
    words = [f"w{i}" for i in range(60)]
    data = json.loads(re.search(r'id="topic-data">(.*?)</script>', topic_view_html(layers, words),
                                re.S).group(1))
    phi, usage = layers[0]["phi"], layers[0]["usage"]
    marginal = usage @ phi
    for k, topic in enumerate(data["layers"][0]["topics"]):
        best = int(np.argmax(phi[k]))
        assert topic["words"][0] == words[best]
        np.testing.assert_allclose(topic["logp"][0], np.log(phi[k, best]), atol=1e-3)
        np.testing.assert_allclose(topic["logpw"][0], np.log(marginal[best]), atol=1e-3)


def test_words_that_would_close_the_script_are_escaped():
    text = topic_view_html([{"name": "t", "phi": np.eye(2)}], ["</script>", "b"])
    assert text.count("</script>") == 2


@pytest.mark.parametrize("layers, message", [
    ([{"name": "x", "phi": np.ones((2, 3))}], r"phi must be \[K, 4\]"),
    ([{"name": "x", "phi": -np.ones((2, 4))}], "finite and >= 0"),
    ([{"name": "x", "phi": np.ones((2, 4)), "usage": [1.0]}], "1 usage values for 2 topics"),
    ([], "no layers"),
])
def test_bad_view_input_names_the_problem(layers, message):
    with pytest.raises(ValueError, match=message):
        topic_view_html(layers, list("abcd"))
