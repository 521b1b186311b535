"""`curate view`: runs as a static site of their figures, their per-sample table and
every rollout (`build_site`), opened from the disk with no server."""

from __future__ import annotations

from curate.view.site import SiteResult, build_site

__all__ = ["SiteResult", "build_site"]
