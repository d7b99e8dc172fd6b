"""Cross-checks against the peers' own code (see ``benchmarks/peer/README.md``)."""
