"""The AMD GPUs on the PCI bus, read from sysfs (/sys/bus/pci/devices/*/{vendor,class,device}): no lspci needed."""

from __future__ import annotations

import os
from dataclasses import dataclass

from verify.system.textfiles import list_dir, read_optional

SYSFS_PCI = "/sys/bus/pci/devices"
AMD_VENDOR = "0x1002"
# PCI base classes of AMD GPUs: 0x03 display controller, 0x12 processing accelerator (Instinct MI300X).
GPU_CLASSES = ("0x03", "0x12")


@dataclass(frozen=True)
class PciGpu:
    slot: str
    device: str
    pci_class: str


def amd_gpus(sysfs: str = SYSFS_PCI) -> tuple[PciGpu, ...]:
    found = []
    for slot in list_dir(sysfs):
        fields = {}
        for name in ("vendor", "class", "device"):
            text, _ = read_optional(os.path.join(sysfs, slot, name), 64)
            fields[name] = (text or "").strip().lower()
        if fields["vendor"] == AMD_VENDOR and fields["class"].startswith(GPU_CLASSES):
            found.append(PciGpu(slot, fields["device"], fields["class"]))
    return tuple(found)
