"""Cross-checks against the peers' own code (see ``studies/study/peer/README.md``)."""
