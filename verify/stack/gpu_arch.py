"""GPU architectures bitsandbytes' ROCm 7.2 build (and the torch rocm7.2 wheel) has kernels for.

From ../shared/notes/rocm-stack.md: gfx90a, gfx942, gfx950, gfx1100–1103, gfx1150–1153, gfx1200, gfx1201; no RDNA2
(gfx103x). On an arch outside the list the first kernel launch fails with `HIP error: invalid device function`, so it
is a warning the report must carry even when the NF4 smoke happened to pass (e.g. HSA_OVERRIDE_GFX_VERSION).
"""

from __future__ import annotations

BNB_ROCM72_ARCHS = frozenset(
    {
        "gfx90a",
        "gfx942",
        "gfx950",
        "gfx1100",
        "gfx1101",
        "gfx1102",
        "gfx1103",
        "gfx1150",
        "gfx1151",
        "gfx1152",
        "gfx1153",
        "gfx1200",
        "gfx1201",
    }
)


def base_arch(gcn_arch_name: str | None) -> str | None:
    """'gfx90a:sramecc+:xnack-' → 'gfx90a' (torch reports target features after the arch)."""
    if not gcn_arch_name:
        return None
    return gcn_arch_name.split(":", 1)[0].strip() or None


def arch_supported(gcn_arch_name: str | None) -> bool:
    return base_arch(gcn_arch_name) in BNB_ROCM72_ARCHS
