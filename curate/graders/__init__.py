"""Graders: score each completion against its reference.

Use `get_grader(spec)` to build one from a spec string (see `curate.graders.registry`),
`default_grader_spec(references)` to pick `numeric` or `exact` for a data set, and
always call `Grader.close()` when done (the `math` grader owns a process pool).
"""

from curate.graders.base import Grader, GradeResult
from curate.graders.registry import GRADER_NAMES, default_grader_spec, get_grader

__all__ = ["GRADER_NAMES", "GradeResult", "Grader", "default_grader_spec", "get_grader"]
