"""The mixed-group estimator (`curate.stats.mixed`) on hand-made counts."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from curate.stats.estimators import BetaPrior, gate_open_posterior, gate_open_unbiased
from curate.stats.mixed import (
    MAX_VALUES,
    ScoreModel,
    binary_signature,
    fit_score_model,
    mixed_probability,
)
from tests.conftest import long_frame
from tests.stats.helpers import posterior_moment


@pytest.mark.parametrize(("n", "c"), [(8, 3), (8, 0), (4, 4), (3, 1), (0, 0)])
@pytest.mark.parametrize("g", [1, 2, 4, 8, 16])
def test_binary_is_the_beta_binomial_estimator(n: int, c: int, g: int) -> None:
    prior = BetaPrior(0.7, 1.9)
    got = mixed_probability(ScoreModel.binary(prior), binary_signature(n, c), g)
    if n == 0 or g == 1:
        assert got == 0.0
    elif n >= g:
        assert got == pytest.approx(gate_open_unbiased(n, c, g), abs=1e-12)
    else:
        assert got == pytest.approx(gate_open_posterior(n, c, 0.7, 1.9, g), abs=1e-12)


def test_partial_credit_without_replacement_when_n_reaches_g() -> None:
    # 3 x 0.5, 2 x 1.0, 1 x 0.0 in six rollouts, groups of 3: only the 0.5s can fill one.
    model = fit_score_model(long_frame({"a": [0.5, 0.5, 0.5, 1.0, 1.0, 0.0]}))
    (sig,) = model.signatures
    assert mixed_probability(model, sig, 3) == pytest.approx(1 - 1 / math.comb(6, 3))


def test_a_value_the_sample_never_showed_keeps_its_prior_mass() -> None:
    frame = long_frame({"a": [0.5] * 3, "b": [1.0] * 3, "c": [0.0, 0.5, 1.0]})
    model = fit_score_model(frame)
    number = dict(model.index.rows())
    sig = model.signatures[number["a"]]
    half, one, zero = (model.priors[model.values.index(v)] for v in (0.5, 1.0, 0.0))
    same = sum(posterior_moment(p, 3, k, 8) for p, k in ((half, 3), (one, 0), (zero, 0)))
    assert mixed_probability(model, sig, 8) == pytest.approx(1 - same)
    assert 0 < mixed_probability(model, sig, 8) < 1


def test_rare_values_share_one_prior() -> None:
    """Continuous scores: past MAX_VALUES distinct values the rest are pooled; a sample
    whose scores all differ is almost surely mixed, one repeating a value is less so."""
    rng = np.random.default_rng(3)
    samples = {f"s{i}": list(np.round(rng.random(4), 4)) for i in range(50)}
    samples["same"] = [0.123456] * 4
    model = fit_score_model(long_frame(samples))
    assert len(model.values) == MAX_VALUES and model.rare is not None
    assert model.rare_values == len({v for s in samples.values() for v in s}) - MAX_VALUES
    number = dict(model.index.rows())
    spread = mixed_probability(model, model.signatures[number["s0"]], 8)
    repeat = mixed_probability(model, model.signatures[number["same"]], 8)
    assert spread > 0.99 and repeat < spread
    assert model.index.height == 51
    assert model.index.schema == pl.Schema({"sample_id": pl.String, "signature": pl.Int64})
