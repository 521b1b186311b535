"""Self-hinting for collapsed prompts (`curate hint`): a training-only hint built from a
prompt's reference solution, so that a prompt every rollout fails can open its gate."""
