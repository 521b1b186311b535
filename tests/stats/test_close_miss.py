"""Close misses of a reference: numbers by relative distance, text by edit distance,
on pairs of the kinds a weak model produces and the kinds a wrong label produces."""

from __future__ import annotations

import random

import pytest

from curate.stats.close_miss import close_miss, edit_distance


@pytest.mark.parametrize(
    ("answer", "reference"),
    [
        ("3.14", "3.1416"),  # rounding
        ("1,000", "1001"),  # within 1%, separators aside
        ("$99.5", "$100"),  # currency
        ("33%", "33.2%"),
        ("Pariss", "Paris"),  # a typo
        ("mitochondria", "mitochondrion"),  # two edits in 13 characters
        ("  Photo  synthesis ", "photo synthesys"),  # case and spacing folded, one edit
    ],
)
def test_close(answer: str, reference: str) -> None:
    assert close_miss(answer, reference)


@pytest.mark.parametrize(
    ("answer", "reference"),
    [
        ("45", "46"),  # two-digit numbers 2% apart: a different answer
        ("B", "C"),  # a choice letter is never close by spelling
        ("12", "21"),
        ("cat", "dog"),
        ("Paris", "paris"),  # equal after folding: not a miss at all
        ("100", "110"),
        ("7", "seven"),  # number against text
        ("Lyon", "Paris"),
        (None, "3"),
        ("3", None),
        ("", "3"),
    ],
)
def test_not_close(answer: str | None, reference: str | None) -> None:
    assert not close_miss(answer, reference)


def test_banded_edit_distance_matches_the_full_one_within_the_cap() -> None:
    """The banded distance against a plain dynamic-programming one, on random strings
    from a small alphabet (where near misses are common)."""

    def full(a: str, b: str) -> int:
        row = list(range(len(b) + 1))
        for i, ca in enumerate(a, 1):
            prev, row[0] = row[0], i
            for j, cb in enumerate(b, 1):
                prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
        return row[-1]

    rng = random.Random(7)
    for _ in range(3000):
        a = "".join(rng.choices("abc", k=rng.randint(0, 7)))
        b = "".join(rng.choices("abc", k=rng.randint(0, 7)))
        for cap in (1, 2, 3):
            assert edit_distance(a, b, cap) == min(full(a, b), cap + 1), (a, b, cap)
