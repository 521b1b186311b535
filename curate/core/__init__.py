"""The ground floor: the vocabulary every layer of curate shares.

Prompt and message types, sampling settings, seed derivation, the typed rollout
record, the outcome/category rule and the registry shape. Nothing here imports any
other part of curate (except `curate.errors`), nor polars at module level.
"""
