"""The reproduction work: the comparison study, the papers' claims, the papers' setups.

Not part of the library: nothing under ``tfktopic/`` imports this package. See
``studies/README.md``.
"""
