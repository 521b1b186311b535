"""verl's RL Parquet: `prompt` as chat messages and `reward_model.ground_truth`.

verl's preprocessing scripts write `data_source`, `prompt` (a list of {role,
content}), `ability`, `reward_model` (a struct with `style` and `ground_truth`) and
`extra_info`; `curate filter --format verl` writes the same, with the sample id in
`extra_info.sample_id`.
"""

from __future__ import annotations

from curate.data.layouts.base import Columns, Layout


class Verl(Layout):
    name = "verl"
    family = "trainer"
    sets = "verl RL Parquet (curate filter --format verl)"
    expects = "prompt: list[{role, content}], reward_model: {ground_truth}, data_source"
    grader = None
    prompt_from = "prompt, as chat turns"
    reference_from = "reward_model.ground_truth"

    def matches(self, cols: Columns) -> bool:
        return cols.is_messages("prompt") and "ground_truth" in cols.struct_fields("reward_model")

    def messages_field(self, cols: Columns) -> str | None:
        return "prompt"

    def answer_field(self, cols: Columns) -> str:
        return "reward_model.ground_truth"

    def id_field(self, cols: Columns) -> str | None:
        if "sample_id" in cols.struct_fields("extra_info"):
            return "extra_info.sample_id"
        return cols.named("sample_id", "id")


LAYOUT = Verl()
