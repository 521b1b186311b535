"""Graders: score each completion against its reference.

Use `get_grader(spec)` to build one from a spec string (see `curate.graders.registry`)
and always call `Grader.close()` when done (graders that run code in worker processes
own a pool: math, python, verl, trl). Before generating anything:

* `curate.graders.references.extract_references` reads the answer out of worked
  solutions (GSM8K ``####``, ``\boxed{}``, "The answer is", choice letters), and
  `choose_grader` picks the grader for the extracted references, with a reason;
* `curate.graders.checks.check_references` grades every reference against itself as a
  correct answer and counts the ones the grader cannot use.

`curate.graders.base.grade` grades through any grader, handing per-sample context (the
data set's row) to the graders that read it (the trainer rewards, `verl` and `trl:`).
`default_grader_spec` is the first version's choice (`numeric` or `exact`).
"""

from curate.graders.base import Grader, GradeResult
from curate.graders.registry import GRADER_NAMES, default_grader_spec, get_grader

__all__ = ["GRADER_NAMES", "GradeResult", "Grader", "default_grader_spec", "get_grader"]
