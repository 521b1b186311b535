"""Selecting the learnable subset and writing it out: `decide` and `attach_fields` on
frames, `filter_run(FilterRequest(...))` for a run or score table (what `curate filter`
calls)."""

from curate.filtering.request import FilterRequest
from curate.filtering.run import FilterResult, filter_run, rejects_path
from curate.filtering.select import (
    KEEP_CHOICES,
    FilterSpec,
    attach_fields,
    decide,
    parse_keep,
    parse_range,
)

__all__ = [
    "KEEP_CHOICES",
    "FilterRequest",
    "FilterResult",
    "FilterSpec",
    "attach_fields",
    "decide",
    "filter_run",
    "parse_keep",
    "parse_range",
    "rejects_path",
]
