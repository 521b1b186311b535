"""Trainer-ready exports of the kept samples: one module per format, a registry by name.

jsonl, parquet   original fields + statistics (the generic forms)
verl             verl RL Parquet
trl              TRL GRPO: `datasets` save_to_disk directory + Parquet
openrlhf         OpenRLHF prompt JSONL
openai-rft       OpenAI reinforcement fine-tuning JSONL
"""

from curate.exports.base import (
    DEFAULT_WEIGHT_COLUMN,
    TRAINER_STATS,
    ExportBatch,
    ExportFormat,
    ExportResult,
)
from curate.exports.prepare import (
    default_ability,
    default_data_source,
    export_fields,
    join_weights,
    prepare_batch,
)
from curate.exports.registry import (
    FORMATS,
    format_for_output,
    format_names,
    get_format,
    register,
    write_export,
)

__all__ = [
    "DEFAULT_WEIGHT_COLUMN",
    "FORMATS",
    "TRAINER_STATS",
    "ExportBatch",
    "ExportFormat",
    "ExportResult",
    "default_ability",
    "default_data_source",
    "export_fields",
    "format_for_output",
    "format_names",
    "get_format",
    "join_weights",
    "prepare_batch",
    "register",
    "write_export",
]
