"""save_figure: format by suffix, atomic writes, errors, always frees the figure."""

from __future__ import annotations

from pathlib import Path

import pytest
from matplotlib.figure import Figure

from curate.errors import InputError
from curate.plots import save_figure
from curate.plots._common import new_figure


def tiny_figure() -> Figure:
    fig = new_figure(2.0, 2.0)
    fig.add_subplot().plot([0, 1], [0, 1])
    return fig


@pytest.mark.parametrize("name", ["plot.xyz", "plot.PNG.bak", "plot.jpg"])
def test_unknown_suffix_is_an_input_error_and_writes_nothing(name: str, tmp_path: Path) -> None:
    fig = tiny_figure()
    suffix = Path(name).suffix.lower()
    with pytest.raises(InputError) as err:
        save_figure(fig, tmp_path / name)
    assert f"unknown plot format '{suffix}' (use .png, .svg or .pdf)" in str(err.value)
    assert err.value.path == tmp_path / name
    assert list(tmp_path.iterdir()) == []
    assert not fig.axes  # freed even though nothing was written


def test_no_suffix_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no format suffix"):
        save_figure(tiny_figure(), tmp_path / "plot")


def test_suffix_is_case_insensitive(tmp_path: Path) -> None:
    out = save_figure(tiny_figure(), tmp_path / "plot.PNG")
    assert out.read_bytes().startswith(b"\x89PNG")


def test_missing_parent_directory_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "deeper"
    with pytest.raises(InputError, match="does not exist") as err:
        save_figure(tiny_figure(), missing / "plot.png")
    assert str(missing) in str(err.value)
    assert not missing.exists()
    assert list(tmp_path.iterdir()) == []


def test_path_that_is_a_directory(tmp_path: Path) -> None:
    (tmp_path / "plot.png").mkdir()
    with pytest.raises(InputError, match="is a directory"):
        save_figure(tiny_figure(), tmp_path / "plot.png")


def test_accepts_str_and_returns_path(tmp_path: Path) -> None:
    out = save_figure(tiny_figure(), str(tmp_path / "plot.svg"))
    assert isinstance(out, Path)
    assert out.exists()


def test_figure_is_freed_after_saving(tmp_path: Path) -> None:
    fig = tiny_figure()
    save_figure(fig, tmp_path / "plot.pdf")
    assert not fig.axes


def test_failure_while_rendering_leaves_old_file_and_no_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "plot.png"
    target.write_bytes(b"old plot")
    fig = tiny_figure()

    def broken_savefig(handle: object, **_kwargs: object) -> None:
        handle.write(b"half a png")  # type: ignore[attr-defined]
        raise RuntimeError("renderer died")

    monkeypatch.setattr(fig, "savefig", broken_savefig)
    with pytest.raises(RuntimeError, match="renderer died"):
        save_figure(fig, target)
    assert target.read_bytes() == b"old plot"
    assert [p.name for p in tmp_path.iterdir()] == ["plot.png"]
    assert not fig.axes


def test_overwrites_existing_file(tmp_path: Path) -> None:
    target = tmp_path / "plot.png"
    target.write_bytes(b"old plot")
    save_figure(tiny_figure(), target)
    assert target.read_bytes().startswith(b"\x89PNG")


def test_same_figure_data_gives_same_bytes(tmp_path: Path) -> None:
    # Dates and versions are stripped from the metadata, so reruns do not churn files.
    for suffix in (".svg", ".pdf", ".png"):
        a = save_figure(tiny_figure(), tmp_path / f"a{suffix}").read_bytes()
        b = save_figure(tiny_figure(), tmp_path / f"b{suffix}").read_bytes()
        assert a == b, suffix
