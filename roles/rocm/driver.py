"""What the ROCm stage keeps true beyond ROCm itself, so the GPU survives the next upgrade and the next account
(pure): AMD's apt pin, the kernel packages the in-box driver needs, and /etc/adduser.conf for new users.

- AMD's pin: apt must prefer AMD's repositories (Origin repo.radeon.com) over the distribution's for the names both
  ship — Ubuntu's rocminfo 5.7.1 sorts above AMD's 1.0.0.70204 (ROCm #3656, #6367). amdgpu-install's deb ships
  /etc/apt/preferences.d/repo-radeon-pin-600; a distribution upgrade or a purge can lose it. When no preferences file
  pins `o=repo.radeon.com` above 500, the stage writes AMD's text to that file again.
- Kernel packages: AMD's Ubuntu prerequisites are linux-headers-$(uname -r) and linux-modules-extra-$(uname -r)
  (amdgpu.ko lives in modules-extra on Ubuntu's generic kernels); Debian needs the headers only. The stage installs
  those apt knows, for the running kernel and for the newest installed one (the kernel the next boot runs).
- New accounts: ADD_EXTRA_GROUPS=1 and render and video in EXTRA_GROUPS (AMD's post-install docs), keeping the groups
  EXTRA_GROUPS already names (adduser's default is "users").
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from verify.checks.apt import pin_text
from verify.debian.apt_policy import parse_preferences, pins_origin

ADDUSER_CONF = "/etc/adduser.conf"
ADDUSER_DEFAULT_EXTRA_GROUPS = ("users",)  # adduser(8): "Default: EXTRA_GROUPS="users""
_ASSIGNMENT = re.compile(r"^\s*(ADD_EXTRA_GROUPS|EXTRA_GROUPS)\s*=\s*(.*?)\s*$")


# --- the pin ----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PinState:
    amd_pin: str | None  # the file that pins AMD's origin above 500, None when none does

    @property
    def present(self) -> bool:
        return self.amd_pin is not None


def parse_preference_files(lines: list[str], origin: str) -> PinState:
    """`==> PATH` headers each followed by that preferences file's lines (see roles/rocm/facts.py)."""
    files: dict[str, list[str]] = {}
    current = None
    for line in lines:
        if line.startswith("==> "):
            current = line[4:].strip()
            files[current] = []
        elif current is not None:
            files[current].append(line)
    for path, body in files.items():
        for pin in parse_preferences("\n".join(body), path):
            if pins_origin(pin, origin) and (pin.priority or 0) > 500:
                return PinState(path)
    return PinState(None)


def write_pin_command(path: str, origin: str, priority: int) -> str:
    """Write AMD's pin text to `path` in one step (apt never reads half of it)."""
    partial = f"{path}.rocm-fleet-new"
    return (
        f"printf %s {shlex.quote(pin_text(origin, priority))} > {shlex.quote(partial)} && "
        f"chmod 644 {shlex.quote(partial)} && mv -f {shlex.quote(partial)} {shlex.quote(path)}"
    )


# --- /etc/adduser.conf ------------------------------------------------------------------------------------------------


def adduser_conf_update(text: str, groups: tuple[str, ...]) -> str | None:
    """`text` with ADD_EXTRA_GROUPS=1 and `groups` in EXTRA_GROUPS, or None when it already says so. Active lines are
    changed in place; missing settings are appended (the commented defaults are left as documentation)."""
    lines = text.splitlines()
    current = {}
    for index, line in enumerate(lines):
        found = _ASSIGNMENT.match(line)
        if found:
            current[found.group(1)] = (index, found.group(2).strip().strip("\"'"))
    extra = current.get("EXTRA_GROUPS", (None, " ".join(ADDUSER_DEFAULT_EXTRA_GROUPS)))[1].split()
    wanted_extra = extra + [g for g in groups if g not in extra]
    wanted = {"ADD_EXTRA_GROUPS": "1", "EXTRA_GROUPS": " ".join(wanted_extra)}
    if current.get("ADD_EXTRA_GROUPS", (None, ""))[1] == "1" and wanted_extra == extra and "EXTRA_GROUPS" in current:
        return None
    appended = []
    for key, value in wanted.items():
        line = f'{key}="{value}"' if key == "EXTRA_GROUPS" else f"{key}={value}"
        if key in current:
            lines[current[key][0]] = line
        else:
            appended.append(line)
    if appended:
        lines += ["", "# rocm-fleet: new accounts join the GPU groups (AMD's post-install docs)"] + appended
    return "\n".join(lines) + "\n"


def write_file_command(path: str, text: str, mode: str = "644") -> str:
    partial = f"{path}.rocm-fleet-new"
    return (
        f"printf %s {shlex.quote(text)} > {shlex.quote(partial)} && chmod {mode} {shlex.quote(partial)} && "
        f"mv -f {shlex.quote(partial)} {shlex.quote(path)}"
    )
