"""Selecting the learnable subset and writing it out."""

from curate.filtering.select import (
    KEEP_CHOICES,
    STAT_COLUMNS,
    FilterSpec,
    attach_fields,
    decide,
    parse_keep,
    parse_range,
)

__all__ = [
    "KEEP_CHOICES",
    "STAT_COLUMNS",
    "FilterSpec",
    "attach_fields",
    "decide",
    "parse_keep",
    "parse_range",
]
