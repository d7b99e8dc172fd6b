"""Experiment scripts of the papers (presets plus extra reports over `tfktopic.runs`).

Run one as ``python scripts/NAME.py`` or ``python -m scripts.NAME``; the benchmarks import
them as modules (``from scripts import topicrnn_ptb``).
"""
