"""ROCm, the pure part: AMD's file names and URLs, what to do about the installed ROCm (roles/debian/installed_rocm.py
reads it), what the apt lists must say, and the GPU groups.
"""

from __future__ import annotations

from dataclasses import dataclass

from roles import pins
from roles.debian.installed_rocm import RocmInstallation


def release_folder(release: str) -> str:
    """AMD's folder name for a release: 7.2.4 -> 7.2.4, but 7.2.0 -> 7.2 (AMD drops a .0 patch level)."""
    major, minor, patch = release.split(".")
    return f"{major}.{minor}" if patch == "0" else release


def installer_package_version(release: str, build: str) -> str:
    """The version of the amdgpu-install package: 7.2.4.70204-1 (7.2.70200-1 for 7.2.0)."""
    return f"{release_folder(release)}.{build}-{pins.AMDGPU_INSTALL_REVISION}"


def installer_file_name(release: str, build: str) -> str:
    return f"amdgpu-install_{installer_package_version(release, build)}_all.deb"


def installer_url(base_url: str, release: str, build: str, codename: str) -> str:
    return (
        f"{base_url.rstrip('/')}/amdgpu-install/{release_folder(release)}/ubuntu/{codename}/"
        f"{installer_file_name(release, build)}"
    )


# --- what to do ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RocmPlan:
    action: str  # "none" | "install" | "stop"
    side_by_side: bool  # install with --rocmrelease beside another release
    reason: str


def plan_rocm(installation: RocmInstallation, release: str, build: str, other_release_policy: str) -> RocmPlan:
    if installation.is_complete(release, build):
        return RocmPlan(
            "none", False, f"ROCm {release} is installed (/opt/rocm-{release}, rocm-core {release}.{build})"
        )
    others = [r for r in installation.releases() if r != release]
    if not others:
        return RocmPlan("install", False, f"ROCm {release} is not installed")
    listed = ", ".join(f"{r} (/opt/rocm-{r})" for r in others)
    if other_release_policy == "stop":
        return RocmPlan(
            "stop",
            False,
            f"another ROCm release is installed: {listed}; rocm_other_release is 'stop': uninstall it "
            f"(sudo amdgpu-install --uninstall --rocmrelease=all) or set rocm_other_release: side-by-side",
        )
    single = installation.single_version_release()
    if single and single != release:
        return RocmPlan(
            "stop",
            False,
            f"ROCm {single} is a single-version install (package rocm-core), and AMD does not support "
            f"multi-version packages beside it: uninstall it first (sudo amdgpu-install --uninstall), "
            f"then deploy again",
        )
    return RocmPlan("install", True, f"installing ROCm {release} beside {listed} (rocm_other_release: side-by-side)")


# --- the apt lists amdgpu-install writes -----------------------------------------------------------------------------

ROCM_LIST = "/etc/apt/sources.list.d/rocm.list"
AMDGPU_LIST = "/etc/apt/sources.list.d/amdgpu.list"
# Used only when a list file has no entry whose options could be kept (AMD's manual method uses this keyring).
DEFAULT_OPTIONS = "[arch=amd64 signed-by=/etc/apt/keyrings/rocm.gpg]"
# Options that switch apt's signature check off for a source (sources.list(5)). apt checks every ROCm package against
# the keyring the installer deb brought — over plain http the only thing that vouches for them — unless one of these
# is set to yes: then nothing does, and a mirror (or anyone on the way to an http one) chooses what root installs.
INSECURE_OPTIONS = ("trusted", "allow-insecure", "allow-weak", "allow-downgrade-to-insecure")


@dataclass(frozen=True)
class AptEntry:
    options: str  # "[arch=amd64 signed-by=…]" or ""
    url: str
    suite: str
    components: str

    def line(self) -> str:
        return " ".join(part for part in ("deb", self.options, self.url, self.suite, self.components) if part)


def _option_words(options: str) -> list[str]:
    return options.strip()[1:-1].split() if options.strip().startswith("[") else []


def _apt_true(value: str) -> bool:
    """How apt reads a boolean option (apt-pkg's StringToBool): yes/true/with/on/enable, or a non-zero number."""
    value = value.strip().lower()
    return value in ("yes", "true", "with", "on", "enable") or (value.isdigit() and int(value) != 0)


def insecure_options(options: str) -> list[str]:
    """The words of `[options]` that switch apt's signature check off (e.g. ["trusted=yes"])."""
    return [
        word
        for word in _option_words(options)
        if word.partition("=")[0] in INSECURE_OPTIONS and _apt_true(word.partition("=")[2])
    ]


def secure_options(options: str) -> str:
    """`[options]` without those words ("" when none is left)."""
    bad = insecure_options(options)
    kept = [word for word in _option_words(options) if word not in bad]
    return f"[{' '.join(kept)}]" if kept else ""


def parse_list_entries(text: str) -> tuple[AptEntry, ...]:
    """One-line-style `deb [options] URL SUITE COMPONENT…` entries; comments, deb-src and junk ignored."""
    entries = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line.startswith("deb "):
            continue
        rest = line[4:].strip()
        options = ""
        if rest.startswith("["):
            end = rest.find("]")
            if end < 0:
                continue
            options, rest = rest[: end + 1], rest[end + 1 :].strip()
        words = rest.split()
        if len(words) < 2:
            continue
        entries.append(
            AptEntry(options=options, url=words[0].rstrip("/"), suite=words[1], components=" ".join(words[2:]))
        )
    return tuple(entries)


def wanted_repositories(base_url: str, release: str, driver_release: str, codename: str) -> dict[str, tuple[str, ...]]:
    """list file -> (url, suite) pairs it must hold, exactly. From 7.2 AMD splits them: rocm.list holds rocm/apt and
    graphics, amdgpu.list the kernel-driver repository (numbered 30.30.x)."""
    base = base_url.rstrip("/")
    return {
        ROCM_LIST: (f"{base}/rocm/apt/{release_folder(release)}", f"{base}/graphics/{release_folder(release)}/ubuntu"),
        AMDGPU_LIST: (f"{base}/amdgpu/{release_folder(driver_release)}/ubuntu",),
    }


@dataclass(frozen=True)
class RepositoryCheck:
    problems: tuple[str, ...]  # what is wrong, per file
    rewrites: dict[str, str]  # list file -> the content it must get

    @property
    def ok(self) -> bool:
        return not self.problems


def check_repositories(
    current: dict[str, str], base_url: str, release: str, driver_release: str, codename: str
) -> RepositoryCheck:
    """Compare the list files (path -> text; absent files missing) with what this release needs for this codename.

    A file is rewritten whole when its entries are not exactly the wanted ones: AMD's 7.2.1 quick start had users fix
    lists that named the wrong release, so a list is never trusted because the installer deb wrote it. The options of
    the file's first entry (its signed-by keyring) are kept, else those of the other list, else DEFAULT_OPTIONS —
    less any option that would switch apt's signature check off (INSECURE_OPTIONS): an entry with one is wrong too.
    """
    problems, rewrites = [], {}
    parsed = {path: parse_list_entries(text) for path, text in current.items()}
    any_options = next((e.options for entries in parsed.values() for e in entries if e.options), DEFAULT_OPTIONS)
    for path, urls in wanted_repositories(base_url, release, driver_release, codename).items():
        entries = parsed.get(path, ())
        have = sorted((e.url, e.suite) for e in entries)
        want = sorted((u, codename) for u in urls)
        unchecked = sorted({word for e in entries for word in insecure_options(e.options)})
        if have == want and all(e.components.split()[:1] == ["main"] for e in entries) and not unchecked:
            continue
        if path not in current:
            problems.append(f"{path} is missing")
        else:
            wrong = [f"{u} {s}" for u, s in have if (u, s) not in want]
            lacking = [f"{u} {s}" for u, s in want if (u, s) not in have]
            detail = (
                "; ".join(
                    part
                    for part in (
                        f"unexpected {', '.join(wrong)}" if wrong else "",
                        f"lacks {', '.join(lacking)}" if lacking else "",
                        f"{' '.join(unchecked)} switches off apt's signature check" if unchecked else "",
                    )
                    if part
                )
                or "entries without the main component"
            )
            problems.append(f"{path}: {detail}")
        options = secure_options(entries[0].options if entries and entries[0].options else any_options)
        lines = [
            f"# Written by rocm-fleet for ROCm {release} on {codename} (the list amdgpu-install wrote did not match)."
        ]
        lines += [AptEntry(options, url, codename, "main").line() for url in urls]
        rewrites[path] = "\n".join(lines) + "\n"
    return RepositoryCheck(problems=tuple(problems), rewrites=rewrites)


def parse_list_files(lines: list[str]) -> dict[str, str]:
    """`==> PATH` headers followed by that file's lines (see roles/rocm/facts.py)."""
    files: dict[str, list[str]] = {}
    current = None
    for line in lines:
        if line.startswith("==> ") and line.endswith(".list"):
            current = line[4:]
            files[current] = []
        elif current is not None:
            files[current].append(line)
    return {path: "\n".join(body) + ("\n" if body else "") for path, body in files.items()}


# --- render/video -----------------------------------------------------------------------------------------------------

GPU_GROUPS = ("render", "video")


@dataclass(frozen=True)
class Accounts:
    groups: frozenset[str]  # which of the asked groups exist
    memberships: dict[str, frozenset[str] | None]  # user -> all their groups (None: no such user)


def parse_accounts(lines: list[str]) -> Accounts:
    """Lines `group NAME` for each existing group and `user NAME: GROUP…` / `user NAME: ?` (see facts.py)."""
    groups, memberships = set(), {}
    for line in lines:
        if line.startswith("group "):
            groups.add(line.split()[1])
        elif line.startswith("user "):
            name, _, rest = line[5:].partition(":")
            words = rest.split()
            memberships[name.strip()] = None if words == ["?"] else frozenset(words)
    return Accounts(groups=frozenset(groups), memberships=memberships)
