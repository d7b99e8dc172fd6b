"""TLASGR-MCMC tested as a SAMPLER on a conjugate case (issue 17).

With one-hot theta (document n uses topic k(n) only) the augmentation is
deterministic: every count of document n goes to topic k(n). The posterior
of column k of Phi under the Dirichlet(eta) prior is then exactly

    Phi[:, k] | d, theta ~ Dirichlet(eta + rho * sum_{n: k(n)=k} d_n),

with rho = num_documents / batch size (rho = 1 here). Run through the public
`TLASGRTopics.update`, the chain's samples must have this posterior's mean
AND per-coordinate variance; an optimiser (no Langevin noise) or a wrong noise
scale fails the variance check.

Expected spread of the discretised chain. With a constant step eps, forgetting
rate 1 (M = colsum of the counts = N) and the prior mass S = N + R eta, the
step is an AR(1) on the simplex, x' = x + eps (a - S x)/N + sqrt(2 eps x/N) xi
projected to the simplex, so the stationary variance is
x(1-x) / (S (1 - eps S / (2 N))), within eps/2 (2.5% here) of the Dirichlet's
x(1-x)/(S+1). The tolerance below (+-25%) is 4-5 standard errors of the
variance estimate from ~1000 effective samples (60 independent chains x
480 kept steps / an integrated autocorrelation time of ~2/eps = 40 steps),
while a noise scaled by 2 or 1/2 changes the variance by 4x or 1/4x, and a
zero noise makes it ~0.
"""
import numpy as np
import pytest

from tests.bayes_backend_cases import compiled_update
from tfktopic.bayes import TLASGRTopics

pytestmark = pytest.mark.backends

V, K = 5, 60
STEP = 0.05
BURN_IN, KEPT = 120, 480
COUNTS = np.array([40.0, 25.0, 15.0, 12.0, 8.0])      # one document's bag of words
PRIOR = 0.1


def _run_chain(seed=4):
    # Every topic gets one document with the same counts: K independent chains
    # (the Langevin noise is independent per entry) targeting the same Dirichlet.
    topics = TLASGRTopics(vocab_size=V, topic_sizes=(K,), num_documents=K, recurrent=False,
                          seed=seed, step_size=STEP, step_size_decay=0.0,
                          forgetting_decay=0.0, phi_prior=PRIOR)
    bow = np.tile(COUNTS, (K, 1))[:, None, :].astype(np.float32)        # [B=K, J=1, V]
    theta = np.eye(K, dtype=np.float32)[:, None, :]                      # one-hot, [K, 1, K]
    update = compiled_update(topics)
    samples = []
    for step in range(BURN_IN + KEPT):
        update(bow, [theta])
        if step >= BURN_IN:
            samples.append(np.asarray(topics.phi[0], np.float64))
    return np.stack(samples), topics                                    # [KEPT, V, K]


def test_tlasgr_samples_have_the_dirichlet_posterior_mean_and_spread():
    samples, topics = _run_chain()
    alpha = COUNTS + PRIOR
    total = alpha.sum()
    mean = alpha / total
    variance = mean * (1 - mean) / (total + 1)
    # Schedule and counts as intended: constant eps, one augmented count per token.
    assert int(topics.iterations) == BURN_IN + KEPT
    np.testing.assert_allclose(samples.sum(1), 1.0, atol=1e-5)
    pooled = samples.transpose(1, 0, 2).reshape(V, -1)                 # [V, KEPT * K]
    # Mean: each of K chains' time average is ~ 12 effective samples; pooled
    # ~ 700, standard error sqrt(var / 700).
    np.testing.assert_allclose(pooled.mean(1), mean, atol=4 * np.sqrt(variance / 700).max())
    ratio = pooled.var(1) / variance
    assert (np.abs(ratio - 1) < 0.25).all(), ratio
    # Chains are independent draws, not one shared trajectory.
    assert np.corrcoef(samples[:, 0, 0], samples[:, 0, 1])[0, 1] < 0.5
