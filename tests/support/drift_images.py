"""Real reports for the drift and apt-hook tests: the real verifier on stand-in workstation images, before and after
the kind of change a dpkg run makes.

    ws = Workstation.provisioned(tmp_path / "ws")      # torch + bitsandbytes + ROCm 7.2.4 (with librocm_smi64.so.1)
    before = verify_report(ws.root)                   # `python -m verify check --root ws --json` (static checks)
    ws.distro_rocm_smi("bookworm")                    # what `apt-get install slurm-wlm-rsmi-plugin` brings
    after = verify_report(ws.root)

The libraries are STAND-INS (tests/support/standin_rocm.py: gcc-built ELF files with ROCm's real SONAMEs, NEEDED
entries and RPATH/RUNPATH), because neither the torch ROCm wheel nor ROCm itself can be installed here. The dpkg data
of the distro packages is REAL: the status paragraphs and apt's auto-installed marks of Debian 12
(slurm-wlm-rsmi-plugin) and Debian 13 (libucx0) roots, kept in tests/verify/debian/data/strays/ (extract.py there
regenerates them).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.support.standin_rocm import MULTIARCH, StandinImage
from tests.support.verify_runs import run_check_root
from verify.report.report import Report

REPO = Path(__file__).resolve().parents[2]
REAL_DPKG = REPO / "tests" / "verify" / "debian" / "data" / "strays"
ROCM_SMI = "librocm_smi64.so.1"


def real_paragraphs(suite: str) -> list[str]:
    """The real dpkg status paragraphs of a Debian root with distro ROCm packages (dpkg's own left out: the image has
    its own native architecture)."""
    text = (REAL_DPKG / f"{suite}.status").read_text()
    return [p.strip("\n") + "\n" for p in text.split("\n\n") if p.strip() and not p.startswith("Package: dpkg\n")]


class Workstation(StandinImage):
    """A stand-in workstation whose dpkg database also takes real paragraphs."""

    @classmethod
    def provisioned(cls, root: Path) -> Workstation:
        """torch (bundled copies with bare names) + bitsandbytes + ROCm 7.2.4 whose hipBLAS needs librocm_smi64.so.1,
        which ROCm ships too: the process loads it from /opt/rocm-7.2.4/lib."""
        workstation = cls(root)
        workstation.torch(bundled_sonames="bare")
        workstation.bitsandbytes()
        workstation.system_rocm(needed_by_hipblas=[ROCM_SMI])
        workstation.build.lib(f"opt/rocm-7.2.4/lib/{ROCM_SMI}", soname=ROCM_SMI)
        return workstation

    def add_dpkg(self, paragraphs: list[str], extended_states: str = "") -> None:
        self._dpkg.extend(paragraphs)
        self._write_dpkg()
        if extended_states:
            states = self.path("/var/lib/apt/extended_states")
            old = states.read_text() if states.exists() else ""
            self.write("/var/lib/apt/extended_states", old + extended_states.strip("\n") + "\n\n")

    def remove_dpkg(self, package: str) -> None:
        self._dpkg = [p for p in self._dpkg if not p.startswith(f"Package: {package}\n")]
        self._write_dpkg()
        self.path(f"/var/lib/dpkg/info/{package}:amd64.list").unlink(missing_ok=True)

    def distro_rocm_smi(self, version: str = "5.2.3-2") -> str:
        """What `apt-get install slurm-wlm-rsmi-plugin` did on a real Debian 12 root (its real status paragraphs and
        auto-installed marks), with ROCm's own librocm_smi64.so.1 gone — a dpkg run replaced it — so the process now
        finds the distro one. `version` rewrites librocm-smi64-1's version (an upgrade)."""
        self.path(f"/opt/rocm-7.2.4/lib/{ROCM_SMI}").unlink(missing_ok=True)
        path = f"/usr/{MULTIARCH}/{ROCM_SMI}"
        self.build.lib(path.lstrip("/"), soname=ROCM_SMI)
        self.write("/var/lib/dpkg/info/librocm-smi64-1:amd64.list", f"/usr/{MULTIARCH}\n{path}\n")
        paragraphs = [
            p.replace("Version: 5.2.3-2\n", f"Version: {version}\n", 1)
            if p.startswith("Package: librocm-smi64-1\n")
            else p
            for p in real_paragraphs("bookworm")
        ]
        self.add_dpkg(paragraphs, (REAL_DPKG / "bookworm.extended_states").read_text())
        return path

    def restore_rocm_smi(self) -> None:
        """The reverse: the distro packages purged, ROCm's copy back."""
        for paragraph in real_paragraphs("bookworm"):
            self.remove_dpkg(paragraph.split("\n", 1)[0].split(": ", 1)[1])
        self.path(f"/usr/{MULTIARCH}/{ROCM_SMI}").unlink(missing_ok=True)
        self.path("/var/lib/apt/extended_states").unlink(missing_ok=True)
        self.build.lib(f"opt/rocm-7.2.4/lib/{ROCM_SMI}", soname=ROCM_SMI)

    def distro_ucx(self) -> None:
        """What `apt-get install libucx0` did on a real Debian 13 root: HIP 5.7 and its runtime pulled in (real status
        paragraphs; no library files)."""
        self.add_dpkg(real_paragraphs("trixie"), (REAL_DPKG / "trixie.extended_states").read_text())

    def remove_system_rocm(self) -> None:
        shutil.rmtree(self.path("/opt/rocm-7.2.4"))
        self.path("/opt/rocm").unlink()
        self.path("/etc/ld.so.conf.d/10-rocm-opencl.conf").unlink()
        self.remove_dpkg("rocm-core")


def verify_report(root: Path, venv: str = "/opt/rocm-fleet/venv") -> Report:
    """The report of the real verifier on the image: `python -m verify check --root ROOT --json` (static checks),
    read back as every reader reads it."""
    return Report.from_json(run_check_root(root, venv=venv)[0])
