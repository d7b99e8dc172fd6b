"""Pretrained tfktopic models (package data; see `tfktopic.pretrained`).

Installed as ``tfktopic.pretrained_models``. Each sub-folder is a run directory written
by ``tfktopic train`` (the exact command is in ``index.json``) and trimmed by
``scripts/make_pretrained.py``.
"""
