"""Empty answers: how many rollouts answered with nothing a grader could read.

A completion is *empty* when its answer (the text after any reasoning) holds no
letter and no digit: nothing, white space, or punctuation and markup alone ("", "\n",
"...", "**"). A short answer such as "45" or "B" is not empty. A chat model given a
system turn or a template it does not know often answers this way, and every such
rollout is graded wrong: a data set that looks hard may only be badly prompted.

`load_empty` counts them (the report's `empty_completions` section) with one example;
the report flags a share of at least WARN_SHARE.
"""

from __future__ import annotations

import os
from typing import Any, Final

from curate.errors import InputError
from curate.store.scores import COMPLETION_COLUMN, scan_completions

# The share of completions at which the report flags them on the terminal and in Markdown.
WARN_SHARE: Final = 0.10
# A letter or a digit of any script (Rust regex classes, as polars reads them).
CONTENT: Final = r"[\p{L}\p{N}]"
# How much of the example the report shows.
EXAMPLE_CHARS: Final = 60
# Only completions of at most this many tokens are read as text when the input counts
# tokens: an answer with no letter or digit is a few tokens of white space or
# punctuation, and the texts are the costliest column of a run to read.
SHORT_TOKENS: Final = 16


def load_empty(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """{rollouts, empty, share, warn_share, example} over the input's completions;
    None when the input stores none (a bare score table). `rollouts` counts the rollouts
    without an error; `example` is the first empty one in (sample_id, rollout_idx) order:
    {sample_id, rollout_idx, completion}, or None. Only completions of at most SHORT_TOKENS
    tokens (or without a count) are read as text."""
    import polars as pl

    keys = scan_completions(path, text=False)
    if keys is None:
        return None
    short = ~(pl.col("completion_tokens") > SHORT_TOKENS).fill_null(False)
    scored = pl.col("error").is_null()
    try:
        total, candidates = (
            keys.select(scored.sum().alias("total"), (scored & short).sum().alias("short"))
            .collect()
            .row(0)
        )
        empty = pl.DataFrame(
            schema={"sample_id": pl.String, "rollout_idx": pl.Int64, COMPLETION_COLUMN: pl.String}
        )
        # The texts only when some completion is short enough to be empty.
        lf = scan_completions(path) if candidates else None
        if lf is not None:
            text = pl.col(COMPLETION_COLUMN)
            empty = (
                lf.filter(scored & short & text.is_not_null() & ~text.str.contains(CONTENT))
                .select("sample_id", "rollout_idx", text.str.slice(0, EXAMPLE_CHARS))
                .unique(["sample_id", "rollout_idx"], keep="first")
                .sort("sample_id", "rollout_idx", nulls_last=True)
                .collect()
            )
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise InputError(f"cannot read the completions: {exc}", path=path) from exc
    if total == 0:
        return None
    example = empty.row(0, named=True) if empty.height else None
    return {
        "rollouts": total,
        "empty": empty.height,
        "share": empty.height / total,
        "warn_share": WARN_SHARE,
        "example": example,
    }


def flagged(section: dict[str, Any] | None) -> bool:
    """Whether the share is high enough for the report to say so."""
    return section is not None and section["empty"] > 0 and section["share"] >= WARN_SHARE


def empty_text(section: dict[str, Any]) -> tuple[str, str]:
    """(the line, the example as a quoted literal): the example comes apart so that each
    renderer shows the untrusted text in its own safe form (never as markup)."""
    n, total = section["empty"], section["rollouts"]
    ex = section["example"] or {}
    where = f"sample {ex.get('sample_id')}"
    if ex.get("rollout_idx") is not None:
        where += f" run {ex['rollout_idx']}"
    line = (
        f"empty answers: {n:,} of {total:,} completions ({section['share']:.1%}) hold no "
        f"letter or digit; the prompt format may not suit the model. E.g. {where}:"
    )
    return line, repr(ex.get("completion", ""))
