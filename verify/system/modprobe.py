"""Whether the amdgpu kernel module is kept from loading: modprobe configuration and the kernel command line (pure
parsers, plus `read_modprobe_config` that reads the files under a root).

What keeps amdgpu out (AMD's install FAQ names the first; the others do the same):
- a modprobe.d file: `blacklist amdgpu` (udev no longer loads it for the GPU it finds) or `install amdgpu CMD` whose
  command never runs modprobe (`/bin/false`, `/bin/true`: loading is replaced by the command);
- the kernel command line: `modprobe.blacklist=…amdgpu…` (modprobe honours it like a blacklist line),
  `module_blacklist=…amdgpu…` (the kernel refuses the module), `nomodeset` and `amdgpu.modeset=0` (amdgpu declines to
  bind: no /dev/kfd), `initcall_blacklist=amdgpu_init`.

modprobe.d files are read as kmod does: `*.conf` in /etc/modprobe.d, /run/modprobe.d, /usr/local/lib/modprobe.d,
/usr/lib/modprobe.d and /lib/modprobe.d, where a file name found in an earlier directory hides the same name in a
later one. Not modelled: `softdep`, aliases that point another name at amdgpu, and the initramfs' own copy of the
configuration (update-initramfs copies modprobe.d into it: a blacklist line removed without rebuilding the initramfs
can still apply early in boot — the fix lines say to rebuild it).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from verify.system.textfiles import list_dir, read_optional

MODULE = "amdgpu"
MODPROBE_DIRS = (
    "/etc/modprobe.d",
    "/run/modprobe.d",
    "/usr/local/lib/modprobe.d",
    "/usr/lib/modprobe.d",
    "/lib/modprobe.d",
)


@dataclass(frozen=True)
class Block:
    """One thing that keeps amdgpu from loading: where it is and what it says."""

    where: str  # "/etc/modprobe.d/blacklist-gpu.conf:3" or "/proc/cmdline"
    text: str  # the line or the command-line word

    def describe(self) -> str:
        return f"{self.text!r} in {self.where}"


def blocks_in_modprobe_conf(text: str, where: str, module: str = MODULE) -> list[Block]:
    """The lines of one modprobe.d file that keep `module` out (continuation lines joined, comments dropped)."""
    found = []
    logical, start = "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        if not logical:
            start = number
        line = raw.rstrip()
        if line.endswith("\\"):
            logical += line[:-1] + " "
            continue
        logical += line
        words = logical.split("#", 1)[0].split()
        logical = ""
        if len(words) < 2 or words[1].replace("-", "_") != module:
            continue
        if words[0] == "blacklist" or (words[0] == "install" and "modprobe" not in " ".join(words[2:])):
            found.append(Block(f"{where}:{start}", " ".join(words)))
    return found


def blocks_in_cmdline(cmdline: str, where: str = "/proc/cmdline", module: str = MODULE) -> list[Block]:
    """The words of a kernel command line that keep `module` from loading or binding."""
    found = []
    for word in cmdline.split():
        key, _, value = word.partition("=")
        listed = [item.replace("-", "_") for item in value.split(",")]
        if key in ("modprobe.blacklist", "module_blacklist", "rd.driver.blacklist") and module in listed:
            found.append(Block(where, word))
        elif key == "initcall_blacklist" and f"{module}_init" in listed:
            found.append(Block(where, word))
        elif word == "nomodeset" or (key == f"{module}.modeset" and value == "0"):
            found.append(Block(where, word))
    return found


def modprobe_files(root: str) -> list[str]:
    """The modprobe.d files kmod reads, in its order: a name in an earlier directory hides it in a later one."""
    seen: dict[str, str] = {}
    for directory in MODPROBE_DIRS:
        for name in list_dir(os.path.join(root, directory.lstrip("/"))):
            if name.endswith(".conf") and name not in seen:
                seen[name] = f"{directory}/{name}"
    return [seen[name] for name in sorted(seen)]


def read_modprobe_config(root: str = "/") -> tuple[list[Block], list[str]]:
    """(every block found in the modprobe.d files under `root`, one line per file that could not be read)."""
    blocks, unreadable = [], []
    for path in modprobe_files(root):
        text, error = read_optional(os.path.join(root, path.lstrip("/")))
        if error:
            unreadable.append(error)
        elif text is not None:
            blocks += blocks_in_modprobe_conf(text, path)
    return blocks, unreadable
