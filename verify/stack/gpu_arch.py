"""GPU architecture names as torch reports them, against the architectures a release's builds have kernels for
(`RocmRelease.gpu_archs`, from the release's file in releases/).

On an arch outside that list the first kernel launch fails with `HIP error: invalid device function`, so it is a
warning the report must carry even when the NF4 smoke happened to pass (e.g. HSA_OVERRIDE_GFX_VERSION).
"""

from __future__ import annotations

from collections.abc import Collection


def base_arch(gcn_arch_name: str | None) -> str | None:
    """'gfx90a:sramecc+:xnack-' → 'gfx90a' (torch reports target features after the arch)."""
    if not gcn_arch_name:
        return None
    return gcn_arch_name.split(":", 1)[0].strip() or None


def arch_supported(gcn_arch_name: str | None, archs: Collection[str]) -> bool:
    """Whether the arch has kernels in a build for `archs` (a release's gpu_archs)."""
    return base_arch(gcn_arch_name) in archs
