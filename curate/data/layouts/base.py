"""What a layout is: how one family of public data sets stores its prompt, its reference
and its id, recognised from the names AND the types of its fields.

A layout is a `Layout` subclass in its own small module under `curate/data/layouts/`,
registered in `curate.data.layouts.LAYOUTS`. It looks at a `Columns` view of the data
(the schema and the first row) and, when it recognises the data, says which columns
hold the prompt, the reference and the id, renders a row's prompt text when the
question alone is not the prompt (multiple choice), maps a row's reference to what the
grader reads (an option index to its letter), and names the grader that fits.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    import polars as pl

LETTERS = "ABCDEFGHIJ"  # at most ten options, as MMLU-Pro has
MAX_OPTIONS = len(LETTERS)


@dataclass(frozen=True)
class Columns:
    """The data as a layout sees it: each column's type and the first row's values."""

    schema: Mapping[str, pl.DataType]
    first: Mapping[str, Any]

    @classmethod
    def of(cls, frame: pl.DataFrame) -> Columns:
        first: dict[str, Any] = {}
        if frame.height:
            first = {k: plain(v) for k, v in frame.row(0, named=True).items()}
        return cls(dict(frame.schema), first)

    def has(self, name: str) -> bool:
        return name in self.schema

    def named(self, *names: str) -> str | None:
        """The first of `names` that is a column (exact spelling)."""
        return next((n for n in names if n in self.schema), None)

    def is_text(self, name: str) -> bool:
        import polars as pl

        return self.schema.get(name) == pl.String

    def is_int(self, name: str) -> bool:
        dtype = self.schema.get(name)
        return dtype is not None and dtype.is_integer()

    def is_text_list(self, name: str) -> bool:
        import polars as pl

        dtype = self.schema.get(name)
        return isinstance(dtype, pl.List | pl.Array) and dtype.inner == pl.String

    def struct_fields(self, name: str) -> dict[str, Any]:
        """A struct column's field names and types ({} for any other column)."""
        import polars as pl

        dtype = self.schema.get(name)
        if not isinstance(dtype, pl.Struct):
            return {}
        return {f.name: f.dtype for f in dtype.fields}

    def is_messages(self, name: str) -> bool:
        """A list of {role, content} structs whose first value is a real message list."""
        import polars as pl

        dtype = self.schema.get(name)
        if not isinstance(dtype, pl.List) or not isinstance(dtype.inner, pl.Struct):
            return False
        inner = {f.name for f in dtype.inner.fields}
        return {"role", "content"} <= inner and is_message_list(self.first.get(name))

    def text_value(self, name: str) -> str:
        value = self.first.get(name)
        return value if isinstance(value, str) else ""


def plain(value: Any) -> Any:
    """polars values as plain Python (a Series inside a row becomes a list)."""
    if hasattr(value, "to_list"):
        return value.to_list()
    return value


def is_message_list(value: Any) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(m, dict) and "role" in m and "content" in m for m in value)
    )


class Layout:
    """One family's layout. Subclasses set the class attributes and `matches`, and
    override `fields`/`text`/`reference` where the family needs it."""

    name: ClassVar[str]
    family: ClassVar[str]  # "multiple choice", "math", "code", "chat", "trainer"
    sets: ClassVar[str]  # the public sets stored this way
    expects: ClassVar[str]  # the fields (and types) it recognises, for `curate layouts`
    grader: ClassVar[str | None] = None  # None: chosen from the references
    prompt_from: ClassVar[str]  # how the prompt is made, for the docs table and the CLI
    reference_from: ClassVar[str]
    id_fields: ClassVar[tuple[str, ...]] = ("id",)
    # Other columns it reads (the options, the entry point), named in the start lines.
    also: ClassVar[tuple[str, ...]] = ()

    def matches(self, cols: Columns) -> bool:
        raise NotImplementedError

    def prompt_field(self, cols: Columns) -> str | None:
        """The column holding the question text (None when the prompt is a message list)."""
        return None

    def messages_field(self, cols: Columns) -> str | None:
        """The column holding the chat message list (None for a text prompt)."""
        return None

    def answer_field(self, cols: Columns) -> str:
        raise NotImplementedError

    def id_field(self, cols: Columns) -> str | None:
        return cols.named(*self.id_fields)

    def text(self, row: Mapping[str, Any]) -> str | None:
        """The prompt text of a row; None: the prompt field as it is."""
        return None

    def reference(self, row: Mapping[str, Any], answer_field: str) -> Any:
        """The reference the grader reads; by default the answer field as it is."""
        return field_of(row, answer_field)


def field_of(row: Mapping[str, Any], name: str) -> Any:
    """A row's `name`, or `struct.field` inside a struct column."""
    if name in row:
        return plain(row[name])
    head, _, rest = name.partition(".")
    value = plain(row.get(head))
    return value.get(rest) if isinstance(value, Mapping) else None


# -- multiple choice ----------------------------------------------------------------------

# The instruction under the options; the choice grader reads "Answer: X" first.
MC_INSTRUCTION = (
    "Think it through, then give your final answer on the last line as "
    "'Answer: X', where X is the letter of the correct option ({letters})."
)


def letter_span(count: int) -> str:
    return f"A-{LETTERS[count - 1]}" if count > 1 else "A"


def render_choices(question: str, options: Sequence[str], *, lettered: bool = True) -> str:
    """The standard multiple-choice prompt: question, lettered options, instruction
    (`lettered=False`: the options already carry their letters)."""
    lines = [str(question).strip(), ""]
    lines += [
        f"{LETTERS[i]}) {str(option).strip()}" if lettered else str(option).strip()
        for i, option in enumerate(options)
    ]
    lines += ["", MC_INSTRUCTION.format(letters=letter_span(len(options)))]
    return "\n".join(lines)


def index_letter(index: object, count: int) -> str | None:
    """An option index (0-based) as its letter; None when it is not one."""
    if isinstance(index, bool) or not isinstance(index, int):
        if isinstance(index, str) and index.strip().isdigit():
            index = int(index.strip())
        else:
            return None
    return LETTERS[index] if 0 <= index < min(count, MAX_OPTIONS) else None


_LETTER_KEY = re.compile(r"^\s*\(?([A-Ja-j])\)?[.):]?\s*$")


def key_letter(key: object, labels: Sequence[str] | None = None) -> str | None:
    """An answer key as the letter of its option: "C", "(c)", or a label of `labels`
    ("3" among labels "1".."4", as some ARC rows have) mapped to its position."""
    if labels is not None:
        texts = [str(label).strip() for label in labels]
        if str(key).strip() in texts:
            return LETTERS[texts.index(str(key).strip())]
    if isinstance(key, str):
        match = _LETTER_KEY.match(key)
        if match:
            return match[1].upper()
    return None


def shuffled_options(correct: str, wrong: Sequence[str], seed_text: str) -> tuple[list[str], str]:
    """The correct answer among the distractors in an order fixed by `seed_text` (the
    sample's question): the same sample always gets the same order, and across samples
    the correct letter is spread evenly. Returns (options, correct letter)."""
    options = [correct, *wrong]
    seed = int.from_bytes(hashlib.sha256(seed_text.encode("utf-8")).digest()[:8], "big")
    order = list(range(len(options)))
    random.Random(seed).shuffle(order)
    shuffled = [options[i] for i in order]
    return shuffled, LETTERS[order.index(0)]


_OPTION_PREFIX = re.compile(r"^\s*\(?([A-Ja-j])\s*[).:]\s*")


def option_prefix(text: object) -> str | None:
    """The letter an option written "A) ...", "(B) ..." or "C. ..." starts with."""
    if not isinstance(text, str):
        return None
    match = _OPTION_PREFIX.match(text)
    return match[1].upper() if match else None


def strip_option_prefix(text: str) -> str:
    return _OPTION_PREFIX.sub("", text, count=1)
