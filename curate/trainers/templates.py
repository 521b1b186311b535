"""The chat templates of the common model families, as the text a trainer dumps.

A trainer's rollout file holds the prompt as the model saw it: the user's text inside
the chat template's wrapping. verl decodes the prompt tokens with
`skip_special_tokens=True`, so a template's special tokens are gone and its plain words
stay; other dumps keep every token. What is left around the user's text, per family
(from each family's documented chat format; whitespace runs count as one space):

  Llama 3 / 3.1   ...<|start_header_id|>user<|end_header_id|>\\n\\nQ<|eot_id|>
                  <|start_header_id|>assistant<|end_header_id|>\\n\\n
                  skipped: "...user\\n\\nQassistant\\n\\n" (the question runs straight
                  into the role word)
  DeepSeek-R1     <｜begin▁of▁sentence｜>SYSTEM<｜User｜>Q<｜Assistant｜><think>\\n
  distills        (the role markers are not special tokens: they stay)
  Qwen (ChatML)   <|im_start|>user\\nQ<|im_end|>\\n<|im_start|>assistant\\n
                  [<think>\\n\\n</think>\\n\\n with thinking off];
                  skipped: "user\\nQ\\nassistant\\n"
  Gemma           <bos><start_of_turn>user\\n[SYSTEM\\n\\n]Q<end_of_turn>\\n
                  <start_of_turn>model\\n;  skipped: "user\\nQ\\nmodel\\n"
  Mistral         <s>[INST] Q [/INST]   (v3+: [INST] and [/INST] are control tokens)
  Phi-3           <|user|>\\nQ<|end|>\\n<|assistant|>\\n
  Phi-4           <|im_start|>user<|im_sep|>Q<|im_end|><|im_start|>assistant<|im_sep|>
                  skipped: "userQassistant" (no space on either side)

So the user's text ends the prompt once the generation prompt (the assistant's marker,
and a reasoning model's opened or empty think block) is taken off the end, and it
starts after a role marker, a role word or whitespace. `GENERATION_MARKERS` are the
pieces taken off, one at a time; `USER_LABELS` the words that may touch the text's
start.
"""

from __future__ import annotations

from typing import Final

# Pieces of a generation prompt, longest first so that a marker is taken whole.
GENERATION_MARKERS: Final[tuple[str, ...]] = tuple(
    sorted(
        {
            # Llama 3
            "<|start_header_id|>assistant<|end_header_id|>",
            "<|eot_id|>",
            # DeepSeek-R1 distills (fullwidth bars, as their tokenizers spell them)
            "<｜Assistant｜>",
            "<｜end▁of▁sentence｜>",
            # Qwen / ChatML, Phi-4
            "<|im_start|>assistant",
            "<|im_end|>",
            "<|im_sep|>",
            # Gemma
            "<start_of_turn>model",
            "<end_of_turn>",
            # Mistral
            "[/INST]",
            # Phi-3
            "<|assistant|>",
            "<|end|>",
            # Reasoning models: an opened, or an empty, think block
            "<think>",
            "</think>",
            # The role words left when special tokens are skipped
            "assistant",
            "Assistant:",
            "model",
        },
        key=len,
        reverse=True,
    )
)
# At most this many pieces come off (Phi-4 kept: <|im_end|><|im_start|>assistant<|im_sep|>
# is three; a Qwen3 prompt with thinking off is four).
MAX_MARKERS: Final = 6
# Role words that may run straight into the user's text (special tokens skipped).
USER_LABELS: Final[tuple[str, ...]] = ("user", "User")


def strip_generation_marker(text: str) -> str | None:
    """`text` less one generation-prompt piece at its end (and the space before it), or
    None when it ends with none."""
    for marker in GENERATION_MARKERS:
        if text.endswith(marker):
            return text[: len(text) - len(marker)].rstrip()
    return None


def after_user_label(prefix: str) -> bool:
    """Whether `prefix` (the text before a candidate user message) ends with a role word."""
    return prefix.endswith(USER_LABELS)
