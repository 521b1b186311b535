"""curate: measure which prompts carry RL learning signal before you train on them."""

__version__ = "0.1.0"
