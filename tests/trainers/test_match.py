"""Matching a trainer's logged prompt text to the curated samples' prompts."""

from __future__ import annotations

from curate.trainers.match import PromptMatcher


def test_matcher_respects_word_boundaries_and_prefers_the_longest() -> None:
    matcher = PromptMatcher({"a": "What is 2 * 1?", "b": "What is 2 * 11?", "c": "Add 2 and 3"})
    got = matcher.match(
        ["user What is 2 * 11? assistant", "user Add 2 and 3 please", "xWhat is 2 * 1?"]
    )
    assert got.ids["user What is 2 * 11? assistant"] == "b"
    assert got.ids["user Add 2 and 3 please"] == "c"
    assert got.unmatched == ["xWhat is 2 * 1?"]
