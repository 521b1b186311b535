"""`check_request`: every bad option of a filter fails as a UsageError before anything is
read, and a good request comes out resolved (paths, format, spec, pool files)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from curate.errors import UsageError
from curate.filtering import FilterRequest, filter_run
from curate.filtering.request import check_request

# Each option (or combination) a user can get wrong, with a word of the message. The run
# named does not exist: had anything been read first, the error would be an InputError
# about the run, not a UsageError about the option.
BAD_OPTIONS: list[tuple[dict[str, Any], str]] = [
    ({"as_frequency": True}, "--as-frequency"),
    ({"total": 10}, "--total"),
    ({"difficulty": "ladder"}, "--difficulty"),
    ({"difficulty": "column", "difficulty_cuts": "0.7:0.3"}, "--difficulty-cuts"),
    ({"difficulty": "column", "difficulty_cuts": "half"}, "--difficulty-cuts"),
    ({"difficulty_cuts": "0.3:0.7"}, "--difficulty-cuts"),
    ({"format": "csv"}, "csv"),
    ({"format": "parquet", "output": "kept.jsonl"}, "--format parquet"),
    ({"pass_rate": "0.9:0.1"}, "--pass-rate"),
    ({"pass_rate": "half"}, "--pass-rate"),
    ({"keep": ["loud"]}, "--keep"),
    ({"keep": ["learned"]}, "--against"),
    ({"suspects": "maybe"}, "--suspects"),
    ({"split": "train"}, "--split"),
    ({"weights": "lin"}, "--weights"),
    ({"weights": "log", "weight_delta": 0.5}, "--weight-delta"),
    ({"weights": "sqrt", "weight_default": 1.0}, "--weight-default"),
    ({"weight_default": 1.0}, "--weight-default"),
    ({"weights": "w.csv", "weight_default": -1.0}, "--weight-default"),
    ({"difficulty": "pools", "format": "parquet", "output": "kept.jsonl"}, "--format parquet"),
]


@pytest.mark.parametrize(("options", "word"), BAD_OPTIONS, ids=[w for _, w in BAD_OPTIONS])
def test_every_bad_option_fails_before_reading(
    options: dict[str, Any], word: str, tmp_path: Path
) -> None:
    options = {"run": tmp_path / "missing-run", "output": tmp_path / "kept.jsonl", **options}
    if isinstance(options["output"], str):
        options["output"] = tmp_path / options["output"]
    request = FilterRequest(**options)
    with pytest.raises(UsageError, match=word.replace("-", r"\-")):
        check_request(request)
    with pytest.raises(UsageError):
        filter_run(request)
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing written


def test_a_good_request_is_resolved(tmp_path: Path) -> None:
    checked = check_request(
        FilterRequest(
            str(tmp_path / "run"),
            str(tmp_path / "out" / "train.parquet"),
            keep=["mixed", "always_correct"],
            pass_rate="0.1:",
            weights="arcsin",
            difficulty="pools",
            difficulty_cuts="0.2:0.8",
        )
    )
    assert checked.run == tmp_path / "run" and checked.format.name == "parquet"
    assert checked.spec.keep == {"high_variance", "low_variance", "always_correct"}
    assert checked.spec.pass_rate == (0.1, 1.0)
    assert (checked.objective, checked.weights_path, checked.cuts) == ("arcsin", None, (0.2, 0.8))
    assert [(p.name, level) for p, level in checked.outputs] == [
        ("train.easy.parquet", "easy"),
        ("train.medium.parquet", "medium"),
        ("train.hard.parquet", "hard"),
    ]


def test_weights_naming_an_existing_file_is_a_table_even_if_named_like_an_objective(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "log").write_text("sample_id,weight\n")
    checked = check_request(FilterRequest("run", "kept.jsonl", weights="log", weight_default=1))
    assert (checked.objective, checked.weights_path) == (None, Path("log"))
