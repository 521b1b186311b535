"""Per-rollout seeds derived from (base seed, sample id, run index).

Re-running a command asks for the same seeds (so the same samples); adding runs
asks for new ones; no two samples or runs share a seed by construction.
"""

from __future__ import annotations

import hashlib


def derive_seed(base_seed: int, sample_id: str, rollout_idx: int) -> int:
    """A 31-bit seed (every engine accepts it) for this sample's run `rollout_idx`."""
    digest = hashlib.blake2b(
        f"{base_seed}\x1f{sample_id}\x1f{rollout_idx}".encode(), digest_size=8
    ).digest()
    return int.from_bytes(digest, "big") & 0x7FFF_FFFF
