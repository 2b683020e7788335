"""Telling an APU's integrated GPU from a discrete one — by PCI device id (preflight reads sysfs) and by GPU
architecture (the runtime probe reads torch's gcnArchName).

AMD's prerequisites: with an integrated GPU enumerated beside the discrete one the runtime may crash, even with
HIP_VISIBLE_DEVICES set; disable the iGPU in the BIOS (llamacpp-rocm#96: gfx1036 enumerated → segfault).

Device ids: the PCI ID database (pci.ids 2023.04.10, Debian 12's `pci.ids` package, vendor 1002), the APU graphics
entries. Newer APUs (Granite Ridge, Strix, Strix Halo …) are not in that edition: the architecture set catches them
at run time, and the table grows with a newer pci.ids. Architectures: the gfx targets of those APUs' GPUs.
"""

from __future__ import annotations

# PCI device id (vendor 0x1002) → the name pci.ids gives it, for APU graphics.
INTEGRATED_PCI_IDS = {
    "0x15dd": "Raven Ridge (gfx902)",
    "0x15d8": "Picasso/Raven 2 (gfx902)",
    "0x1636": "Renoir (gfx90c)",
    "0x1638": "Cezanne (gfx90c)",
    "0x164c": "Lucienne (gfx90c)",
    "0x15e7": "Barcelo (gfx90c)",
    "0x1681": "Rembrandt (gfx1035)",
    "0x164d": "Rembrandt (gfx1035)",
    "0x164e": "Raphael (gfx1036)",
    "0x1506": "Mendocino (gfx1037)",
    "0x15bf": "Phoenix1 (gfx1103)",
    "0x15c8": "Phoenix2 (gfx1103)",
    "0x164f": "Phoenix (gfx1103)",
}
# gfx targets that only APUs carry (the discrete RDNA3 parts are gfx1100-gfx1102; gfx1103 and gfx115x are APUs).
INTEGRATED_ARCHS = frozenset(
    {
        "gfx902",
        "gfx909",
        "gfx90c",
        "gfx1013",
        "gfx1033",
        "gfx1035",
        "gfx1036",
        "gfx1037",
        "gfx1103",
        "gfx1150",
        "gfx1151",
        "gfx1152",
        "gfx1153",
    }
)


def integrated_gpu_name(device_id: str) -> str | None:
    """'0x164e' → 'Raphael (gfx1036)' for an APU's GPU, None for anything else."""
    return INTEGRATED_PCI_IDS.get(device_id.lower())


def is_integrated_arch(arch: str | None) -> bool:
    return (arch or "").split(":", 1)[0] in INTEGRATED_ARCHS
