"""The inside of the code grader's sandbox, in this process: the plain-data codec, the
free-name analysis of test code and the seccomp filter's shape (the boxes themselves are
exercised through real runs in test_code_sandbox.py)."""

from __future__ import annotations

import decimal
import fractions
import math
import struct
import sys

import pytest

from curate.graders import boxserver
from curate.graders.boxserver import NotPlain, decode, encode


def roundtrip(value: object) -> object:
    import json

    return decode(json.loads(json.dumps(encode(value))))


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        0,
        -(10**40),
        1.5,
        "tuple",
        "\ud800 lone surrogate",
        [1, [2, (3, 4)]],
        (1, "a", None),
        (),
        {"a": 1, 2: (3,), (1, 2): [True]},
        {1, 2, 3},
        frozenset({"x"}),
        b"\x00\xff",
        3 + 4j,
        fractions.Fraction(1, 3),
        decimal.Decimal("1.10"),
        range(1, 10, 2),
    ],
)
def test_plain_values_cross_with_their_types(value: object) -> None:
    back = roundtrip(value)
    assert back == value and type(back) is type(value)


def test_floats_keep_nan_and_infinity_and_bools_stay_bools() -> None:
    back = roundtrip([math.inf, -math.inf, True, 1])
    assert isinstance(back, list)
    assert back[:2] == [math.inf, -math.inf] and math.isnan(roundtrip(math.nan))  # type: ignore[arg-type]
    assert [type(v) for v in back[2:]] == [bool, int]


def test_subclasses_cross_as_their_plain_value_whatever_they_override() -> None:
    class Rigged(int):
        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = int.__hash__

        def __repr__(self) -> str:
            return "4"

    back = roundtrip(Rigged(7))
    assert back == 7 and type(back) is int
    assert roundtrip(map(str, [1, 2])).__next__() == "1"  # type: ignore[attr-defined]


@pytest.mark.parametrize("value", [object(), lambda: 1, type, [object()], {"k": print}])
def test_objects_and_functions_cannot_cross(value: object) -> None:
    with pytest.raises(NotPlain):
        encode(value)


def test_a_cycle_cannot_cross() -> None:
    loop: list[object] = []
    loop.append(loop)
    with pytest.raises(NotPlain):
        encode(loop)


@pytest.mark.parametrize("data", [{"x": 1}, {"t": 1}, {"d": [[1]]}, {"i": "z"}, {"a": 1, "b": 2}])
def test_decode_refuses_anything_but_the_tags(data: object) -> None:
    with pytest.raises((ValueError, TypeError)):
        decode(data)


def test_free_names_are_what_the_tests_read_but_never_bind() -> None:
    code = (
        "import math\nfrom os import path as p\nHELPER = 3\n"
        "def check(candidate):\n    assert candidate(HELPER) == solve(math.pi)\n"
        "assert [y for y in other(1)] and len(p.sep)\n"
    )
    assert boxserver._free_names(code) == ["solve", "other"]


def test_the_seccomp_filter_is_well_formed_bpf() -> None:
    raw = boxserver.seccomp_filter()
    assert len(raw) % 8 == 0 and len(raw) // 8 < 4096
    instructions = [struct.unpack("HBBI", raw[i : i + 8]) for i in range(0, len(raw), 8)]
    assert instructions[0] == (0x20, 0, 0, 4)  # load the architecture first
    assert instructions[-1] == (0x06, 0, 0, 0x7FFF0000)  # allow what is not denied
    denied = {k for code, _, _, k in instructions if code == 0x15}
    assert {101, 165, 272, 308, 321} <= denied  # ptrace, mount, unshare, setns, bpf


def test_a_program_cannot_raise_stop_iteration_into_the_judge_or_pick_its_modules() -> None:
    assert "StopIteration" not in boxserver._SAFE_EXCEPTIONS
    assert "ValueError" in boxserver._SAFE_EXCEPTIONS
    assert "AssertionError" not in boxserver._SAFE_EXCEPTIONS


def test_package_masks_cover_every_package_directory_and_never_the_stdlib() -> None:
    """On this machine's real layout: the standard library (and what holds it) stays;
    the site-packages inside it, and every other Python installation's package directory
    under the system directories, is covered."""
    import glob
    import os
    import sysconfig

    paths = sysconfig.get_paths(vars={"base": sys.base_prefix, "platbase": sys.base_exec_prefix})
    stdlib = [p for p in {paths["stdlib"], paths["platstdlib"]} if os.path.isdir(p)]
    view = boxserver.ProgramView(stdlib, [], [], [], False)
    masks = boxserver.package_masks(view)
    for kept in stdlib:
        assert not any(kept == m or kept.startswith(m + "/") for m in masks), (kept, masks)
        for name in ("site-packages", "dist-packages"):
            if os.path.isdir(os.path.join(kept, name)):
                assert os.path.join(kept, name) in masks
    for pattern in boxserver.PACKAGE_GLOBS:
        for path in glob.glob(pattern):
            if os.path.isdir(path) and not os.path.islink(path):
                holds_stdlib = any(k == path or k.startswith(path + "/") for k in stdlib)
                assert holds_stdlib or path in masks, path
