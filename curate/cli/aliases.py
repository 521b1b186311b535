"""Option spellings renamed since an earlier release, still accepted on the command line.

"Run" once meant both a run directory and one rollout (`--runs`). The options now say
rollouts; scripts written against the old spellings keep working, and `--help` shows only
the new ones. One table, applied to argv before typer parses it.
"""

from __future__ import annotations

from typing import Final

# command -> {old spelling: current spelling}
RENAMED_OPTIONS: Final[dict[str, dict[str, str]]] = {
    "eval": {"--runs": "--rollouts", "--max-runs": "--max-rollouts"},
    "allocate": {"--min-runs": "--min-rollouts", "--max-runs": "--max-rollouts"},
}


def current_spellings(argv: list[str]) -> list[str]:
    """`argv` (without the program name) with renamed options spelled as today.

    Only the command's own options are rewritten, and nothing after a bare `--`. The
    program's own options (flags, before the command) are passed over.
    """
    at = next((i for i, token in enumerate(argv) if not token.startswith("-")), None)
    if at is None or argv[at] not in RENAMED_OPTIONS:
        return list(argv)
    renames = RENAMED_OPTIONS[argv[at]]
    out = list(argv[: at + 1])
    rest = iter(argv[at + 1 :])
    for token in rest:
        if token == "--":
            out.append(token)
            out.extend(rest)
            break
        name, eq, value = token.partition("=")
        out.append(renames[name] + eq + value if name in renames else token)
    return out
