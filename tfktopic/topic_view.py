"""An interactive, self-contained HTML view of a run's topics (``tfktopic topics RUN --html``).

Own small view, not pyLDAvis: pyLDAvis pulls pandas and its HTML loads d3 from a CDN,
while this file must open offline; the view is inline SVG + ~80 lines of JavaScript.

The page shows an intertopic distance map (each topic a circle placed by classical
MDS of the Jensen-Shannon distances between the topic-word distributions; circle area
= the topic's usage where the run stores it, else equal) and, for the selected topic,
bars of its top words ranked by relevance (Sievert & Shirley 2014):

    relevance(w, k | lambda) = lambda * log p(w|k) + (1 - lambda) * log(p(w|k) / p(w))

with p(w) = sum_k usage_k p(w|k) and a slider for lambda. Each topic embeds its
`CANDIDATES` most probable words; the relevance re-ranks those (pyLDAvis re-ranks its
30 by lambda the same way over the whole vocabulary: with lambda near 0 a rare word
outside a topic's most probable ones is not offered here). rGBN / GBN runs get a
layer selector (layer l's topics through Phi^1 ... Phi^l).

Example:
>>> import numpy as np
>>> html = topic_view_html([{"name": "topics", "phi": np.full((2, 3), 1 / 3)}],
...                        ["a", "b", "c"])
>>> "<svg" in html and "http" not in html
True
"""

import html as html_escape
import json
import pathlib

import numpy as np

__all__ = ["CANDIDATES", "js_distances", "classical_mds", "topic_view_html", "save_topic_view",
           "run_layers", "save_run_view"]

#: Words per topic embedded in the page (the relevance slider re-ranks these).
CANDIDATES = 40


def js_distances(phi):
    """Jensen-Shannon distances (sqrt of the divergence, base 2, in [0, 1]) between rows.

    Args:
        phi: [K, V] rows of non-negative weights (normalised here).

    Returns:
        [K, K] symmetric matrix with zeros on the diagonal.
    """
    p = np.asarray(phi, np.float64)
    p = p / np.maximum(p.sum(axis=1, keepdims=True), 1e-300)
    k = len(p)
    out = np.zeros((k, k))
    logp = np.log2(np.maximum(p, 1e-300))
    for i in range(k):
        m = 0.5 * (p[i] + p)
        logm = np.log2(np.maximum(m, 1e-300))
        kl_i = np.sum(p[i] * (logp[i] - logm), axis=1)
        kl_j = np.sum(p * (logp - logm), axis=1)
        out[i] = np.sqrt(np.clip(0.5 * (kl_i + kl_j), 0.0, 1.0))
    return 0.5 * (out + out.T)


def classical_mds(distances, dims=2):
    """Classical (Torgerson) MDS: coordinates whose Euclidean distances approximate `distances`.

    Args:
        distances: [K, K] symmetric distances.
        dims: output dimensions.

    Returns:
        [K, dims] coordinates (zeros where K is too small).
    """
    d = np.asarray(distances, np.float64)
    k = len(d)
    centre = np.eye(k) - np.full((k, k), 1.0 / k)
    b = -0.5 * centre @ (d ** 2) @ centre
    values, vectors = np.linalg.eigh(b)
    order = np.argsort(-values)[:dims]
    coords = vectors[:, order] * np.sqrt(np.clip(values[order], 0.0, None))
    if coords.shape[1] < dims:
        coords = np.pad(coords, ((0, 0), (0, dims - coords.shape[1])))
    return coords


def _layer_data(layer, words):
    phi = np.asarray(layer["phi"], np.float64)
    if phi.ndim != 2 or phi.shape[1] != len(words):
        raise ValueError(f"layer {layer.get('name')!r}: phi must be [K, {len(words)}] "
                         f"(topics x words), got {phi.shape}")
    if np.any(~np.isfinite(phi)) or np.any(phi < 0):
        raise ValueError(f"layer {layer.get('name')!r}: phi must be finite and >= 0")
    phi = phi / np.maximum(phi.sum(axis=1, keepdims=True), 1e-300)
    k = len(phi)
    usage = layer.get("usage")
    has_usage = usage is not None
    usage = np.full(k, 1.0 / k) if usage is None else np.asarray(usage, np.float64)
    if usage.shape != (k,):
        raise ValueError(f"layer {layer.get('name')!r}: {usage.size} usage values for {k} topics")
    weights = usage / max(usage.sum(), 1e-300)
    marginal = np.maximum(weights @ phi, 1e-300)
    coords = classical_mds(js_distances(phi)) if k > 1 else np.zeros((1, 2))
    topics = []
    for index, row in enumerate(phi):
        top = np.argsort(-row, kind="stable")[:CANDIDATES]
        topics.append({"id": index, "x": round(float(coords[index, 0]), 5),
                       "y": round(float(coords[index, 1]), 5),
                       "usage": round(float(usage[index]), 6),
                       "words": [str(words[i]) for i in top],
                       "logp": [round(float(np.log(max(row[i], 1e-300))), 4) for i in top],
                       "logpw": [round(float(np.log(marginal[i])), 4) for i in top]})
    return {"name": str(layer.get("name", "topics")), "has_usage": has_usage, "topics": topics}


_SCRIPT = r"""
const DATA = JSON.parse(document.getElementById('topic-data').textContent);
const NS = 'http' + '://www.w3.org/2000/svg';
let layer = 0, topic = 0;
function el(tag, attrs, parent) {
  const e = document.createElementNS(NS, tag);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (parent) parent.appendChild(e);
  return e;
}
function drawMap() {
  const svg = document.getElementById('map'); svg.innerHTML = '';
  const ts = DATA.layers[layer].topics, W = 460, P = 40;
  const xs = ts.map(t => t.x), ys = ts.map(t => t.y);
  const span = Math.max(Math.max(...xs) - Math.min(...xs), Math.max(...ys) - Math.min(...ys), 1e-9);
  const cx = (Math.max(...xs) + Math.min(...xs)) / 2, cy = (Math.max(...ys) + Math.min(...ys)) / 2;
  const total = ts.reduce((s, t) => s + t.usage, 0) || 1;
  el('line', {x1: P / 2, y1: W / 2, x2: W - P / 2, y2: W / 2, stroke: '#ddd'}, svg);
  el('line', {x1: W / 2, y1: P / 2, x2: W / 2, y2: W - P / 2, stroke: '#ddd'}, svg);
  ts.forEach((t, i) => {
    const r = Math.max(3, 22 * Math.sqrt(t.usage / total * ts.length) / Math.sqrt(ts.length / 8 + 1));
    const g = el('g', {class: 'topic', 'data-topic': i}, svg);
    el('circle', {cx: W / 2 + (t.x - cx) / span * (W - 2 * P), cy: W / 2 - (t.y - cy) / span * (W - 2 * P),
                  r: r, fill: i === topic ? '#d62728' : '#1f77b4', 'fill-opacity': 0.45, stroke: '#333'}, g);
    const label = el('text', {x: W / 2 + (t.x - cx) / span * (W - 2 * P), y: W / 2 - (t.y - cy) / span * (W - 2 * P) + 4,
                              'text-anchor': 'middle', 'font-size': 10}, g);
    label.textContent = String(t.id);
    g.addEventListener('click', () => { topic = i; drawMap(); drawBars(); });
  });
}
function drawBars() {
  const svg = document.getElementById('bars'); svg.innerHTML = '';
  const t = DATA.layers[layer].topics[topic];
  const lam = parseFloat(document.getElementById('lambda').value);
  document.getElementById('lambda-value').textContent = lam.toFixed(2);
  const rel = t.words.map((w, i) => ({w: w, p: Math.exp(t.logp[i]),
                                      r: lam * t.logp[i] + (1 - lam) * (t.logp[i] - t.logpw[i])}));
  rel.sort((a, b) => b.r - a.r);
  const shown = rel.slice(0, DATA.shown), pmax = Math.max(...t.logp.map(Math.exp));
  document.getElementById('title').textContent = DATA.layers[layer].name + ': topic ' + t.id +
    (DATA.layers[layer].has_usage ? ' (usage ' + t.usage.toFixed(4) + ')' : '');
  shown.forEach((d, i) => {
    el('rect', {x: 110, y: 10 + i * 18, width: 300 * d.p / pmax, height: 14, fill: '#1f77b4'}, svg);
    const label = el('text', {x: 105, y: 21 + i * 18, 'text-anchor': 'end', 'font-size': 11}, svg);
    label.textContent = d.w;
  });
}
const select = document.getElementById('layer');
DATA.layers.forEach((l, i) => { const o = document.createElement('option'); o.value = i; o.textContent = l.name; select.appendChild(o); });
select.addEventListener('change', () => { layer = parseInt(select.value); topic = 0; drawMap(); drawBars(); });
document.getElementById('lambda').addEventListener('input', drawBars);
drawMap(); drawBars();
"""


def topic_view_html(layers, words, title="topics", shown=15):
    """The self-contained HTML page (no external URL) of one or more layers of topics.

    Args:
        layers: list of dicts ``{"name", "phi": [K, V] topic-word weights, "usage":
            optional K topic proportions}``.
        words: the V words (columns of every phi).
        title: the page title.
        shown: bars drawn for the selected topic.

    Returns:
        The HTML text.
    """
    if not layers:
        raise ValueError("topic_view_html: no layers")
    words = [str(w) for w in words]
    data = {"shown": int(shown), "layers": [_layer_data(layer, words) for layer in layers]}
    # "</" inside the JSON would end the <script> element.
    payload = json.dumps(data).replace("</", "<\\/")
    hidden = "" if len(layers) > 1 else " style=\"display:none\""
    name = html_escape.escape(str(title))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{name}</title>
<style>body{{font-family:sans-serif;margin:16px}} .topic{{cursor:pointer}}
.panel{{display:inline-block;vertical-align:top;margin-right:24px}}</style></head>
<body><h2>{name}</h2>
<p>Intertopic distance map: classical MDS of the Jensen-Shannon distances between the
topics' word distributions; circle area = topic usage (equal where the run has none).
Click a topic. Relevance = &lambda; log p(w|k) + (1 &minus; &lambda;) log(p(w|k) / p(w));
bar length = p(w|k).</p>
<div{hidden}>layer: <select id="layer"></select></div>
<div class="panel"><svg id="map" width="460" height="460"></svg></div>
<div class="panel"><div id="title"></div>
<div>&lambda; = <span id="lambda-value"></span>
<input id="lambda" type="range" min="0" max="1" step="0.01" value="1"></div>
<svg id="bars" width="430" height="{20 + 18 * int(shown)}"></svg></div>
<script type="application/json" id="topic-data">{payload}</script>
<script>{_SCRIPT}</script>
</body></html>
"""


def save_topic_view(layers, words, path, title="topics", shown=15):
    """Write `topic_view_html` to `path` (must end in ``.html`` / ``.htm``); returns it."""
    path = pathlib.Path(path)
    if path.suffix.lower() not in (".html", ".htm"):
        raise ValueError(f"{path}: the topic view is written as .html")
    path.write_text(topic_view_html(layers, words, title, shown), encoding="utf-8")
    return str(path)


def run_layers(run):
    """The layers of a run for `topic_view_html`: (layers, words).

    rGBN / GBN: one layer per level (Phi^1 ... Phi^l's columns); others: the
    topic-word matrix (a softmax of the rows where it holds logits, TopicRNN's B).
    The first layer gets the usage stored by `tfktopic train`, where there is one.
    """
    from tfktopic.models import registry
    from tfktopic.runs.usage import stored_usage

    words = list(run.topic_vocab.decode(list(range(len(run.topic_vocab)))))
    usage = stored_usage(run)
    if registry.get(run.name).hierarchical:
        products = [np.asarray(p, np.float64).T for p in run.model.topic_model.phi_products()]
        layers = [{"name": f"layer {l + 1}", "phi": phi} for l, phi in enumerate(products)]
    else:
        matrix = np.asarray(run.model.topic_word_matrix(), np.float64)
        if np.any(matrix < 0) or not np.allclose(matrix.sum(axis=1), 1.0, atol=1e-3):
            matrix = np.exp(matrix - matrix.max(axis=1, keepdims=True))
        layers = [{"name": "topics", "phi": matrix}]
    if usage is not None and len(usage) == len(layers[0]["phi"]):
        layers[0]["usage"] = usage
    return layers, words


def save_run_view(run, path):
    """Write the HTML topic view of a run (`run_layers`); returns the path."""
    layers, words = run_layers(run)
    return save_topic_view(layers, words, path, title=f"{run.name} topics ({run.path.name})")
