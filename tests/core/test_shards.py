"""Shard assignment: stable, total, disjoint, and documented."""

from __future__ import annotations

import hashlib
import random

import pytest

from curate.core.shards import ShardSpec, parse_shard, shard_of


def test_every_id_in_exactly_one_shard_and_shares_are_even() -> None:
    ids = [f"s{i}" for i in range(4000)]
    shards = [ShardSpec(i, 4) for i in range(4)]
    owned = [set(s.select(ids)) for s in shards]
    assert set().union(*owned) == set(ids)
    assert sum(len(o) for o in owned) == len(ids)
    # sha256 spreads ids evenly: each share within 10% of 1000.
    assert all(900 < len(o) < 1100 for o in owned)


def test_assignment_is_the_documented_hash_and_ignores_order() -> None:
    ids = [f"id-{i}" for i in range(200)]
    shuffled = ids[:]
    random.Random(1).shuffle(shuffled)
    spec = ShardSpec(2, 5)
    assert set(spec.select(ids)) == set(spec.select(shuffled))
    for sid in ids:
        expected = int.from_bytes(hashlib.sha256(sid.encode()).digest()[:8], "big") % 5
        assert shard_of(sid, 5) == expected
    assert shard_of("abc", 1) == 0


@pytest.mark.parametrize(
    ("text", "spec"),
    [("0/1", ShardSpec(0, 1)), ("3/8", ShardSpec(3, 8)), (" 1 / 2 ", ShardSpec(1, 2))],
)
def test_parse(text: str, spec: ShardSpec) -> None:
    assert parse_shard(text) == spec
    assert str(spec) == f"{spec.index}/{spec.count}"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("3/2", "I must be below K"),
        ("2/2", "I must be below K"),
        ("x", "expected I/K"),
        ("1/0", "K must be at least 1"),
        ("-1/2", "expected I/K"),
        ("1", "expected I/K"),
    ],
)
def test_parse_refuses(text: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        parse_shard(text)
