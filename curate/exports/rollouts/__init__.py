"""A run's rollouts as training data (`curate export`): one module per format.

sft        rejection-sampling SFT: the right completions per prompt (TRL SFT format)
dpo        preference pairs from mixed groups (TRL preference format)
groups     offline groups for GRPO-style trainers, with the objective weight
balanced   balanced groups from an oversampled pool, with corrected advantages

`curate filter` writes one row per prompt; these write rows of completions, so they
read the stored texts and take options of their own.
"""

from curate.exports.rollouts.run import (
    KINDS,
    RolloutExportRequest,
    RolloutExportResult,
    export_rollouts,
)

__all__ = ["KINDS", "RolloutExportRequest", "RolloutExportResult", "export_rollouts"]
