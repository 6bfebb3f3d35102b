"""Small statistics the detectors share."""

from __future__ import annotations

import numpy as np


def poisson_tail(k: np.ndarray, lam: np.ndarray) -> np.ndarray:
    """P(K >= k) for K ~ Poisson(lam), elementwise (1 where k <= 0); a tight bound in the far tail."""
    k = np.asarray(k, dtype=np.int64)
    lam = np.maximum(np.asarray(lam, dtype=np.float64), 1e-12)
    top = int(k.max()) if k.size else 0
    log_fact = np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, top + 1)))]) if top else np.zeros(1)
    kk = np.maximum(k, 0)
    log_pmf = -lam + kk * np.log(lam) - log_fact[kk]
    # P(K >= k) <= pmf(k) / (1 - lam / (k + 1)) once k + 1 > lam; where k is not in the tail, say 1.
    with np.errstate(divide="ignore", invalid="ignore"):
        bound = np.exp(log_pmf) / np.maximum(1 - lam / (kk + 1), 1e-12)
    return np.where((k <= 0) | (kk + 1 <= lam), 1.0, np.minimum(bound, 1.0))
