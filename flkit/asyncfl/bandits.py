"""Client selectors of the synchronous baselines: discounted UCB (Sync-UCB-ST) and expected
improvement (Sync-Bayes-ST)."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["ucb_scores", "expected_improvement"]


def ucb_scores(rewards: np.ndarray, plays: np.ndarray, t: int, gamma: float) -> np.ndarray:
    """Discounted UCB score rewards / plays + sqrt(2 ln(sum_{s<t} gamma^s) / plays) (the paper's
    A = L/N + ...); inf where plays = 0 (our choice: the paper does not score unplayed arms)."""
    discount_sum = sum(gamma**s for s in range(int(t)))
    bonus_num = 2.0 * math.log(discount_sum) if discount_sum > 0 else 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        scores = rewards / plays + np.sqrt(max(bonus_num, 0.0) / plays)
    scores = np.where(plays > 0, scores, np.inf)
    return scores


def expected_improvement(mu, sigma, best: float) -> np.ndarray:
    """Expected improvement for minimisation: (best - mu) Phi(z) + sigma phi(z),
    z = (best - mu) / sigma.

    sigma = 0 gives max(best - mu, 0)."""
    from scipy.stats import norm

    mu = np.asarray(mu, float)
    sigma = np.asarray(sigma, float)
    imp = best - mu
    with np.errstate(divide="ignore", invalid="ignore"):
        z = imp / sigma
        ei = imp * norm.cdf(z) + sigma * norm.pdf(z)
    return np.where(sigma > 0, ei, np.maximum(imp, 0.0))
