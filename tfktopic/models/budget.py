"""The training budget of every family's ``small`` preset (the default of ``tfktopic train``).

Train until the validation perplexity has not improved for ``patience`` epochs, at most
``epochs``, and keep the best epoch (`tfktopic.runs`). A fixed budget stopped every model on
Lee while it still improved (the LSTM's validation perplexity 129.9 after its 8 epochs, 79.5
when it converged), so comparing defaults compared training speed; the numbers are in
docs/results/defaults.md.

Example:
>>> CONVERGE
{'epochs': 100, 'patience': 2}
"""

__all__ = ["CONVERGE"]

#: ``training`` settings of the convergence rule (``epochs`` is the maximum).
CONVERGE = {"epochs": 100, "patience": 2}
