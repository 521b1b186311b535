"""The endpoint pool: least outstanding requests, and the circuit breaker that rests a
failing replica, then lets one request through to decide."""

from __future__ import annotations

from curate.remote.pool import EndpointPool


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_least_outstanding_spreads_and_prefers_the_idle_replica() -> None:
    pool = EndpointPool(["http://a/v1", "http://b/v1", "http://c/v1"], clock=Clock())
    first = [pool.pick() for _ in range(3)]
    assert [r.index for r in first] == [0, 1, 2]  # one each
    pool.finished(first[1], fault=False, rollouts=4)  # b is free again
    assert pool.pick().index == 1
    # a slow replica keeps its requests: new ones go elsewhere
    a, b, c = pool.replicas
    assert (a.outstanding, b.outstanding, c.outstanding) == (1, 1, 1)
    assert b.rollouts == 4 and b.ok == 1


def test_a_failing_replica_is_rested_then_probed_with_one_request() -> None:
    clock = Clock()
    pool = EndpointPool(["http://good/v1", "http://bad/v1"], failures=3, rest_s=5.0, clock=clock)
    good, bad = pool.replicas
    for _ in range(3):  # bad fails three times in a row
        r = pool.pick()
        while r is not bad:
            pool.finished(r, fault=False, rollouts=1)
            r = pool.pick()
        pool.finished(bad, fault=True)
    assert bad.rests == 1 and bad.resting(clock.now)
    # While it rests, every request goes to the good replica, however busy.
    picks = [pool.pick() for _ in range(5)]
    assert all(r is good for r in picks)
    for r in picks:
        pool.finished(r, fault=False, rollouts=1)
    # The rest ends: one probe request goes to bad; while it is out, no second one.
    clock.now += 5.1
    probe = pool.pick()
    assert probe is bad and bad.probing
    assert pool.pick() is good
    # The probe fails: rested again, twice as long.
    pool.finished(bad, fault=True)
    assert bad.rests == 2 and bad.rest_until == clock.now + 10.0
    clock.now += 10.1
    assert pool.pick() is bad
    pool.finished(bad, fault=False, rollouts=2)  # it recovered: closed, rest length reset
    assert not bad.probing and bad.consecutive_rests == 0 and bad.streak == 0
    assert bad.rollouts == 2


def test_when_every_replica_rests_the_first_to_wake_still_gets_the_request() -> None:
    clock = Clock()
    pool = EndpointPool(["http://a/v1", "http://b/v1"], failures=1, rest_s=5.0, clock=clock)
    a = pool.pick()
    pool.finished(a, fault=True)
    clock.now += 1
    b = pool.pick()
    pool.finished(b, fault=True)
    assert a.resting(clock.now) and b.resting(clock.now)
    assert pool.pick() is a  # its rest ends first


def test_lines_name_each_replica_without_credentials() -> None:
    clock = Clock()
    pool = EndpointPool(["http://user:pw@a/v1", "http://b/v1"], failures=1, clock=clock)
    a = pool.pick()
    b = pool.pick()
    clock.now += 2.0
    pool.finished(a, fault=False, rollouts=8)
    pool.finished(b, fault=True)
    lines = pool.lines()
    assert "pw" not in " ".join(lines)
    assert lines[0].endswith("1 requests, 8 rollouts, 4.0 rollouts/s, 0 errors")
    assert lines[1].endswith("0 requests, 0 rollouts, 0.0 rollouts/s, 1 errors, rested 1x")
