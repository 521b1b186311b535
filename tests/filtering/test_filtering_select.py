"""Selecting samples: --keep, --pass-rate, drop reasons, joining original fields."""

from __future__ import annotations

import polars as pl
import pytest

from curate.errors import InputError, UsageError
from curate.filtering import (
    KEEP_CHOICES,
    FilterSpec,
    attach_fields,
    decide,
    parse_keep,
    parse_range,
)
from curate.stats import CATEGORIES
from curate.stats.columns import STAT_COLUMNS


def outcome(frame: pl.DataFrame) -> dict[str, str | None]:
    return dict(frame.select("sample_id", "drop_reason").rows())


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (["high-variance"], {"high_variance"}),
        (["high_variance"], {"high_variance"}),
        (["  High-Variance "], {"high_variance"}),
        (["mixed"], {"high_variance", "low_variance"}),
        (["always-correct", "always-incorrect"], {"always_correct", "always_incorrect"}),
        (["all"], set(CATEGORIES)),
    ],
)
def test_parse_keep(values: list[str], expected: set[str]) -> None:
    assert parse_keep(values) == frozenset(expected)


def test_every_keep_choice_names_real_categories() -> None:
    for cats in KEEP_CHOICES.values():
        assert set(cats) <= set(CATEGORIES)


@pytest.mark.parametrize("value", ["learnable", "", "high variance", "hv"])
def test_parse_keep_rejects_unknown(value: str) -> None:
    with pytest.raises(UsageError, match="unknown --keep value") as info:
        parse_keep([value])
    assert "high-variance" in str(info.value)  # lists the choices
    assert info.value.exit_code == 2


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0.1:0.9", (0.1, 0.9)),
        (":0.5", (0.0, 0.5)),
        ("0.5:", (0.5, 1.0)),
        (":", (0.0, 1.0)),
        ("0:1", (0.0, 1.0)),
        (" 0.2 : 0.2 ", (0.2, 0.2)),
    ],
)
def test_parse_range(text: str, expected: tuple[float, float]) -> None:
    assert parse_range(text) == expected


@pytest.mark.parametrize(
    "text", ["0.5", "a:b", "0.1:0.2:0.3", "0.9:0.1", "-0.1:0.5", "0:1.5", "nan:1"]
)
def test_parse_range_rejects(text: str) -> None:
    with pytest.raises(UsageError, match="--pass-rate"):
        parse_range(text)


def test_decide_default_keeps_high_variance(per_sample: pl.DataFrame) -> None:
    decisions = decide(per_sample, FilterSpec())
    assert outcome(decisions) == {
        "hv1": None,
        "hv2": None,
        "right": "always_correct",
        "wrong": "always_incorrect",
        "flat": "low_variance",
        "dead": "no scored rollouts",
    }
    assert dict(decisions.select("sample_id", "kept").rows())["hv1"] is True


def test_decide_with_pass_rate(per_sample: pl.DataFrame) -> None:
    spec = FilterSpec(keep=parse_keep(["all"]), pass_rate=(0.3, 0.9))
    got = outcome(decide(per_sample, spec))
    assert got["hv1"] is None
    assert got["hv2"] == "pass_rate 0.25 outside [0.3, 0.9]"
    assert got["right"] == "pass_rate 1.0 outside [0.3, 0.9]"
    assert got["wrong"].startswith("pass_rate 0.0 outside")
    assert got["flat"].startswith("pass_rate 0.0 outside")  # partial credit is not a pass
    assert got["dead"] == "no scored rollouts"


def test_category_reason_takes_precedence(per_sample: pl.DataFrame) -> None:
    spec = FilterSpec(keep=frozenset({"high_variance"}), pass_rate=(0.4, 0.6))
    got = outcome(decide(per_sample, spec))
    assert got["right"] == "always_correct"
    assert got["hv2"].startswith("pass_rate 0.25")


def test_attach_fields_bare_table(per_sample: pl.DataFrame) -> None:
    rows = attach_fields(decide(per_sample, FilterSpec()), None)
    assert rows.columns == ["sample_id", *STAT_COLUMNS, "drop_reason", "kept"]
    assert rows["sample_id"].to_list() == sorted(rows["sample_id"].to_list())


def test_attach_fields_keeps_original_order_and_fields(per_sample: pl.DataFrame) -> None:
    samples = pl.DataFrame(
        {
            "sample_id": ["wrong", "hv1", "right", "hv2", "flat", "dead", "unscored"],
            "question": list("abcdefg"),
            "meta": [{"k": i} for i in range(7)],
            "variance": [9.0] * 7,  # collides with a statistic: the statistic wins
        }
    )
    rows = attach_fields(decide(per_sample, FilterSpec()), samples)
    assert rows["sample_id"].to_list() == ["wrong", "hv1", "right", "hv2", "flat", "dead"]
    assert rows.columns[:3] == ["sample_id", "question", "meta"]
    assert rows["question"].to_list() == list("abcdef")
    assert rows["meta"].to_list()[1] == {"k": 1}
    assert rows.filter(pl.col("sample_id") == "hv1")["variance"].item() == pytest.approx(0.25)


def test_attach_fields_other_id_column(per_sample: pl.DataFrame) -> None:
    samples = pl.DataFrame({"id": ["hv1", "hv2"], "prompt": ["p1", "p2"]})
    rows = attach_fields(decide(per_sample, FilterSpec()), samples, id_field="id")
    assert rows.columns[:3] == ["id", "prompt", "sample_id"]
    assert rows["sample_id"].to_list() == ["hv1", "hv2"]


def test_attach_fields_integer_ids(per_sample: pl.DataFrame) -> None:
    ps = per_sample.with_columns(pl.col("sample_id").replace({"hv1": "1", "hv2": "2"}))
    samples = pl.DataFrame({"sample_id": [1, 2], "x": ["a", "b"]})
    rows = attach_fields(decide(ps, FilterSpec()), samples)
    assert rows["x"].to_list() == ["a", "b"]


def test_attach_fields_errors(per_sample: pl.DataFrame) -> None:
    decisions = decide(per_sample, FilterSpec())
    with pytest.raises(InputError, match="no 'sample_id' column") as info:
        attach_fields(decisions, pl.DataFrame({"q": [1]}), source="data.jsonl")
    assert str(info.value).startswith("data.jsonl: ")
    with pytest.raises(InputError, match="duplicate values"):
        attach_fields(decisions, pl.DataFrame({"sample_id": ["a", "a"]}), source="data.jsonl")


# ---------------------------------------------------------------- --suspects


@pytest.mark.parametrize(
    ("value", "want"), [("keep", "keep"), (" Drop ", "drop"), ("ONLY", "only")]
)
def test_parse_suspects(value: str, want: str) -> None:
    from curate.filtering.select import parse_suspects

    assert parse_suspects(value) == want


def test_parse_suspects_refuses_other_values() -> None:
    from curate.filtering.select import parse_suspects

    with pytest.raises(UsageError, match="choose from keep, drop, only"):
        parse_suspects("yes")


def test_decide_with_suspect_labels(per_sample: pl.DataFrame) -> None:
    flagged = per_sample.with_columns(
        pl.col("sample_id").is_in(["wrong", "hv1"]).alias("suspect_label")
    )
    everything = frozenset(CATEGORIES)
    drop = outcome(decide(flagged, FilterSpec(keep=everything, suspects="drop")))
    assert drop["wrong"] == drop["hv1"] == "suspect_label"
    assert drop["right"] is None and drop["dead"] == "no scored rollouts"
    only = outcome(decide(flagged, FilterSpec(keep=everything, suspects="only")))
    assert only["wrong"] is None and only["hv1"] is None
    assert only["right"] == only["hv2"] == "not a suspect label"
    # keep ignores the column (and does not need it).
    assert outcome(decide(per_sample, FilterSpec(keep=everything))) == outcome(
        decide(flagged, FilterSpec(keep=everything, suspects="keep"))
    )
