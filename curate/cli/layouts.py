"""`curate layouts`: the data set layouts `curate eval` recognises, with the fields
each expects, how it makes the prompt and the reference, and its grader."""

from __future__ import annotations

import textwrap

from curate.cli.errors import handle_errors
from curate.cli.output import write_stdout

WIDTH = 80


@handle_errors
def layouts() -> None:
    """List the data set layouts `curate eval` recognises (--layout NAME forces one)."""
    from curate.data.layouts import all_layouts

    out: list[str] = []
    for layout in all_layouts():
        grader = layout.grader or "chosen from the references"
        out.append(f"{layout.name} ({layout.family}; grader: {grader})")
        for label, text in (
            ("sets", layout.sets),
            ("fields", layout.expects),
            ("prompt", layout.prompt_from),
            ("reference", layout.reference_from),
        ):
            out += textwrap.wrap(
                f"{label}: {text}",
                WIDTH,
                initial_indent="  ",
                subsequent_indent="    ",
                break_on_hyphens=False,
            )
    out += textwrap.wrap(
        "Detected in this order from field names and types; --layout none uses the "
        "generic field names (prompt, question, answer, ...).",
        WIDTH,
    )
    write_stdout("\n".join(out) + "\n")
