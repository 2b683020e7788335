"""The facts every stage may read from a Debian or Ubuntu host: which OS it is, which ROCm it has, the installed
versions of named packages, what apt would remove with them, and who can write the directories leading to the venv.
Each a command and a call to a pure parser in this package (os_support.py, installed_rocm.py, packages.py,
path_access.py)."""

from __future__ import annotations

import shlex

from pyinfra.api import FactBase

from roles.debian.installed_rocm import RocmInstallation, parse_installation
from roles.debian.kernel import FIRMWARE_PACKAGE, HostKernels, parse_host_kernels
from roles.debian.os_support import OsRelease, parse_os_release
from roles.debian.packages import InstalledPackage, parse_apt_removal, parse_dpkg_query
from roles.debian.path_access import PathAccess, ancestors, parse_path_access


class OsReleaseFile(FactBase):
    """/etc/os-release (or /usr/lib/os-release), parsed."""

    def command(self) -> str:
        return "cat /etc/os-release 2>/dev/null || cat /usr/lib/os-release 2>/dev/null || true"

    def process(self, output) -> OsRelease:
        return parse_os_release(output)

    @staticmethod
    def default() -> OsRelease:
        return OsRelease(id="", version_id="", codename="", pretty_name="")


class InstalledRocm(FactBase):
    """Every ROCm tree under /opt with its .info/version, where /opt/rocm points, and dpkg's rocm-core/rocm packages
    (single-version names and the multi-version ones such as rocm-core7.2.4)."""

    def command(self) -> str:
        return (
            'for d in /opt/rocm-*; do [ -d "$d" ] || continue; '
            'echo "tree $d $(head -n 1 "$d/.info/version" 2>/dev/null)"; done; '
            'echo "opt-rocm $(readlink -e /opt/rocm 2>/dev/null)"; '
            "dpkg-query -W -f='pkg ${Package} ${Version} ${db:Status-Abbrev}\\n' "
            "'rocm-core*' rocm 'rocm[0-9]*' 2>/dev/null || true"
        )

    def process(self, output) -> RocmInstallation:
        return parse_installation(output)

    @staticmethod
    def default() -> RocmInstallation:
        return RocmInstallation(trees=(), opt_rocm="", packages=())


class PackageVersions(FactBase):
    """The named packages whose files are on disk: name -> InstalledPackage. Unknown names are simply absent."""

    default = dict

    def command(self, packages) -> str:
        names = " ".join(shlex.quote(p) for p in packages)
        # dpkg-query exits 1 when a name is unknown to dpkg: that is "absent", not an error.
        return f"dpkg-query -W -f='${{Package}}\\t${{Version}}\\t${{db:Status-Abbrev}}\\n' {names} 2>/dev/null || true"

    def process(self, output) -> dict[str, InstalledPackage]:
        return parse_dpkg_query(output)


class AptRemovalSimulation(FactBase):
    """(name, version) of every package `apt-get remove` of the named packages would remove (simulated: -s)."""

    default = tuple

    def command(self, packages) -> str:
        names = " ".join(shlex.quote(p) for p in packages)
        return f"LC_ALL=C apt-get -s remove {names} 2>/dev/null || true"

    def process(self, output) -> tuple[tuple[str, str], ...]:
        return parse_apt_removal(output)


# Where a kernel keeps amdgpu.ko (verify/system/kernel.py's MODULE_DIRS), and where kmod reads modprobe.d files.
_AMDGPU_GLOBS = " ".join(
    f'"$d"/{sub}/amdgpu.ko*' for sub in ("kernel/drivers/gpu/drm/amd/amdgpu", "updates/dkms", "updates", "extra")
)
_MODPROBE_D = "/etc/modprobe.d /run/modprobe.d /usr/local/lib/modprobe.d /usr/lib/modprobe.d /lib/modprobe.d"


class KernelDriver(FactBase):
    """The kernel side of the GPU (roles/debian/kernel.py): the running kernel, every /lib/modules/<release> and its
    amdgpu.ko, /boot/vmlinuz-*, amdgpu loaded, /dev/kfd, /run/reboot-required, /proc/cmdline, modprobe.d lines about
    amdgpu, dpkg's linux-* packages, and which headers and modules-extra packages (and firmware-amd-graphics) apt
    has for the running kernel and the newest installed one — of those dpkg has not installed.

    `apt_candidates=False`: without that last part (HostKernels.available stays empty). Only the ROCm stage installs
    those packages; where it does not run (rocm_install: skip), nothing needs apt's answer, which was 75 of the fact's
    100 ms in a local fleet host (three `apt-cache pkgnames`, one per name dpkg has not installed).
    """

    def command(self, apt_candidates: bool = True) -> str:
        return self._kernel_side() + (self._apt_candidates() if apt_candidates else "true")

    @staticmethod
    def _kernel_side() -> str:
        return (
            'r=$(uname -r); echo "running $r"; '
            'for d in /lib/modules/*; do [ -d "$d" ] || continue; '
            f"m=$(ls -1 {_AMDGPU_GLOBS} 2>/dev/null | head -n 1); "
            'if [ -z "$m" ] && grep -q \'/amdgpu\\.ko$\' "$d/modules.builtin" 2>/dev/null; then '
            'm="$d/modules.builtin"; fi; '
            'echo "modules ${d##*/} $m"; done; '
            'for f in /boot/vmlinuz-*; do [ -e "$f" ] && echo "image ${f#/boot/vmlinuz-}"; done; '
            "if [ -d /sys/module/amdgpu ]; then echo 'loaded yes'; else echo 'loaded no'; fi; "
            "if [ -c /dev/kfd ]; then echo 'kfd yes'; else echo 'kfd no'; fi; "
            "if [ -e /run/reboot-required ]; then echo 'reboot-required yes'; else echo 'reboot-required no'; fi; "
            'echo "cmdline $(cat /proc/cmdline 2>/dev/null)"; '
            f'for dir in {_MODPROBE_D}; do for f in "$dir"/*.conf; do [ -f "$f" ] || continue; '
            "grep -n -E '^[[:space:]]*(blacklist|install)[[:space:]]+amdgpu' \"$f\" 2>/dev/null | "
            'sed "s|^|modprobe $f:|"; done; done; '
            "d=$(dpkg-query -W -f='pkg ${Package}\\t${Version}\\t${db:Status-Abbrev}\\t${Depends}\\n' 'linux-*' "
            f"{FIRMWARE_PACKAGE} 2>/dev/null); "
            '[ -n "$d" ] && printf \'%s\\n\' "$d"; '
        )

    @staticmethod
    def _apt_candidates() -> str:
        return (
            "n=$(ls -1 /boot 2>/dev/null | sed -n 's/^vmlinuz-//p' | sort -V | tail -n 1); "
            "p=; for k in $(printf '%s\\n' \"$r\" $n | sort -u); do "
            'p="$p linux-headers-$k linux-modules-extra-$k"; done; '
            # Whether apt has a name matters only while dpkg has not installed it (HostKernels.driver_packages_wanted),
            # so only those are asked — on a provisioned host often none. "Installed" as parse_dpkg_query_lines says:
            # the status abbreviation, stripped, starts with ii or hi.
            "i=$(printf '%s\\n' \"$d\" | awk -F '\\t' '{ s = $3; gsub(/^[[:space:]]+|[[:space:]]+$/, \"\", s); "
            's = substr(s, 1, 2); if (s == "ii" || s == "hi") print substr($1, 5) }\'); '
            f"q=; for x in $p {FIRMWARE_PACKAGE}; do "
            'printf \'%s\\n\' "$i" | grep -qxF -e "$x" || q="$q $x"; done; '
            # Only names apt knows go on: for a name it does not know (Debian never has linux-modules-extra-*),
            # `apt-cache policy` reads the name as a regular expression ('.' in every release) and matches it against
            # every package name — 0.19 s of the fact's 0.22 s in a fleet host. `pkgnames PREFIX` compares prefixes
            # only (0.02 s); a name it lists exactly is one apt knows, and only those are asked below.
            'k=; for x in $q; do apt-cache pkgnames "$x" 2>/dev/null | grep -qxF -e "$x" && k="$k $x"; done; '
            # `apt-cache policy`, not `show`: the same lookup of each name (apt's cacheset) and the same candidate (the
            # policy's), without show's record reading, which cost several times more CPU (in a local fleet host: the
            # fact 1.07 s → 0.30 s). One call for all names: each start loads apt's cache. A name apt has is one whose
            # candidate is not "(none)"; a heading is the package's full name ("name:" or "name:arch:"). LC_ALL=C:
            # the field names untranslated.
            'if [ -n "$k" ]; then LC_ALL=C apt-cache policy $k 2>/dev/null | awk '
            '\'/^[^ ]/ { n = $0; sub(/:.*/, "", n) } /^  Candidate: / && $2 != "(none)" { print "available " n }\' '
            "| sort -u; fi; true"
        )

    def process(self, output) -> HostKernels:
        return parse_host_kernels(list(output))

    @staticmethod
    def default() -> HostKernels:
        return parse_host_kernels([])


class VenvPathAccess(FactBase):
    """Who can write the directories leading to the venv at `path` (see path_access.venv_path_problem): every existing
    ancestor of the path as written and of its resolved form, `stat`ed without following it, the owner's uid, and
    the accounts in each group involved. Shell and coreutils only: it runs in preflight, before python3 may exist."""

    def command(self, path: str, owner: str) -> str:
        written = " ".join(shlex.quote(directory) for directory in ancestors(path))
        return (
            f"p={shlex.quote(path)}; "
            f"printf 'owner %s\\n' \"$(id -u -- {shlex.quote(owner)} 2>/dev/null)\"; "
            'r=$(realpath -m -- "$(dirname -- "$p")"); printf \'resolved %s\\n\' "$r"; '
            f"dirs=$({{ for d in {written}; do printf '%s\\n' \"$d\"; done; d=$r; printf '%s\\n' \"$d\"; "
            'while [ "$d" != / ]; do d=$(dirname -- "$d"); printf \'%s\\n\' "$d"; done; } | sort -u | '
            'while IFS= read -r d; do if [ -e "$d" ] || [ -L "$d" ]; then '
            "stat -c 'dir %u %g %f %U %G %n' -- \"$d\"; fi; done); "
            'printf \'%s\\n\' "$dirs"; for g in $(printf \'%s\\n\' "$dirs" | cut -d" " -f3 | sort -u); do '
            'getent group "$g" | sed "s/^/group /"; '
            'getent passwd | awk -F: -v g="$g" \'$4 == g {print "primary " g " " $1}\'; done'
        )

    def default(self) -> PathAccess:  # no output at all (e.g. a @fake host): nothing known, nothing refused
        return PathAccess(owner_uid=None, entries=())

    def process(self, output) -> PathAccess:
        return parse_path_access(list(output))
