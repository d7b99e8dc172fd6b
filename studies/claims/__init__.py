"""The papers' claims and the investigations behind them, each one module with its own
command line (``python -m studies.claims.NAME``); records under ``studies/results/``."""
