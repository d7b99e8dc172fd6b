"""Experiment scripts of the papers (presets plus extra reports over `tfktopic.runs`).

Run one as ``python studies/papers/NAME.py`` or ``python -m studies.papers.NAME``; the benchmarks import
them as modules (``from studies.papers import topicrnn_ptb``).
"""
