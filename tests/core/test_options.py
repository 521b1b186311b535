"""The option-schema base every backend and grader kind declares its options with:
required options, flags spelled by the schema, `-O NAME=VALUE` read as each field's
type, and one-line errors naming the option and the ones that exist."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest

from curate.core.options import OptionSchema, option
from curate.errors import UsageError


@dataclass(frozen=True)
class Widget(OptionSchema):
    label: ClassVar[str] = "--grader widget"
    flag_prefix: ClassVar[str] = "--widget-"

    url: str = option(help="where the widget is")
    depth: int = option(3, "how deep", min=1, max=9)
    ratio: float | None = option(None, "a ratio", min=0.0)
    notes: Path | None = option(None, "a notes file", cli="--notes")
    verbose: bool = option(False, "talk more")
    tags: tuple[str, ...] = option((), "labels")
    cache: Path | None = option(None, "set by the program", settable=False)


def test_a_required_option_is_named_by_its_flag() -> None:
    assert Widget.required() == ["url"]
    with pytest.raises(UsageError, match=r"^--grader widget needs --widget-url$"):
        Widget.parse({"depth": 2})
    assert Widget.parse({"url": "u"}).given == ("url",)


def test_flags_follow_the_prefix_unless_the_field_names_its_own() -> None:
    assert Widget.flag("depth") == "--widget-depth"
    assert Widget.flag("notes") == "--notes"
    with pytest.raises(UsageError, match=r"--widget-depth must be at most 9, not 10"):
        Widget(url="u", depth=10)


def test_assignments_read_each_value_as_its_field_type() -> None:
    pairs = [
        "w.depth=4",
        "w.ratio=none",
        "w.notes=a/b.txt",
        "w.verbose=yes",
        'w.tags=["x", "y"]',
        "w.url=http://h:1",
    ]
    values = Widget.assignments(pairs, owner="--grader w", qualifier="w.")
    assert values == {
        "depth": 4,
        "ratio": None,
        "notes": Path("a/b.txt"),
        "verbose": True,
        "tags": ("x", "y"),
        "url": "http://h:1",
    }
    built = Widget.parse(values)
    assert built.notes == Path("a/b.txt") and set(built.given) == set(values)  # field order


@pytest.mark.parametrize(
    ("pair", "message"),
    [
        ("w.dept=2", "--option w.dept: not an option of --grader w (did you mean w.depth? "),
        ("w.cache=x", "--option w.cache: not an option of --grader w"),
        ("w.depth=deep", "--option 'w.depth=deep': expected a whole number"),
        ("w.depth", "--option 'w.depth': expected NAME=VALUE"),
    ],
)
def test_a_bad_assignment_is_one_line_naming_it(pair: str, message: str) -> None:
    with pytest.raises(UsageError) as info:
        Widget.assignments([pair], owner="--grader w", qualifier="w.")
    text = str(info.value)
    assert text.startswith(message) and "\n" not in text
    if "not an option" in message:
        # The options that exist, each as the user would write it; never the ones the
        # program sets itself.
        assert "w.url, w.depth, w.ratio, w.notes, w.verbose, w.tags)" in text
        assert "w.cache," not in text


def test_the_same_option_twice_is_refused() -> None:
    with pytest.raises(UsageError, match=r"--option w\.depth: given twice"):
        Widget.assignments(["w.depth=2", "w.depth=3"], owner="--grader w", qualifier="w.")
