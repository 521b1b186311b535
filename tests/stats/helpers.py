"""Reference computations shared by the statistics tests, written independently of curate."""

from __future__ import annotations


def posterior_moment(prior, n: int, c: int, a: int, b: int = 0) -> float:
    """E[p^a (1-p)^b | c of n] under a discrete prior, summed atom by atom here."""
    num = den = 0.0
    for p, w in zip(prior.atoms.tolist(), prior.weights.tolist(), strict=True):
        like = w * p**c * (1 - p) ** (n - c)
        den += like
        num += like * p**a * (1 - p) ** b
    return num / den
