"""Preflight facts: each a command and a call to the pure parser in roles/preflight/model.py."""

from __future__ import annotations

import shlex

from pyinfra.api import FactBase

from roles.preflight.model import FreeSpace, GpuInventory, parse_existing_users, parse_free_space, parse_gpu_inventory


class GpuDevices(FactBase):
    """/dev/kfd and every PCI device's vendor, class and device id, read from sysfs (no lspci needed)."""

    def command(self) -> str:
        return (
            "if [ -e /dev/kfd ]; then echo 'kfd yes'; else echo 'kfd no'; fi; "
            'for d in /sys/bus/pci/devices/*; do [ -r "$d/vendor" ] || continue; '
            'echo "pci ${d##*/} $(cat "$d/vendor") $(cat "$d/class") $(cat "$d/device" 2>/dev/null)"; done'
        )

    def process(self, output) -> GpuInventory:
        return parse_gpu_inventory(output)

    @staticmethod
    def default() -> GpuInventory:
        return GpuInventory(kfd=False, devices=())


class FreeSpaceFor(FactBase):
    """Free space of the filesystem each path will land on (the nearest existing ancestor of a path yet to exist)."""

    default = tuple

    def command(self, paths) -> str:
        quoted = " ".join(shlex.quote(p) for p in paths)
        return (
            f'for p in {quoted}; do q=$p; while [ ! -e "$q" ]; do q=$(dirname "$q"); done; '
            'echo "$p $(df -Pk "$q" | tail -n 1)"; done'
        )

    def process(self, output) -> tuple[FreeSpace, ...]:
        return parse_free_space(output)


class ExistingUsers(FactBase):
    """Which of the named accounts exist (getent passwd)."""

    default = frozenset

    def command(self, users) -> str:
        if not users:
            return "true"
        return f"getent passwd {' '.join(shlex.quote(u) for u in users)} || true"

    def process(self, output) -> frozenset[str]:
        return parse_existing_users(output)
