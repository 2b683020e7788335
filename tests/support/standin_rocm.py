"""A filesystem image of a workstation, for `verify check --root IMAGE`: a venv whose torch and bitsandbytes are
STAND-INS for the torch ROCm wheel (which cannot exist here), and optionally a stand-in ROCm 7.2.4 under /opt.

Every library is a real ELF file built with gcc (tests/support/elfbuild.py) carrying the names that matter to the
loader: the SONAMEs, NEEDED entries, DT_RPATH $ORIGIN of torch's bundled ROCm copies and the RUNPATH
/opt/rocm/lib:/opt/rocm-7.2.4/lib of libbitsandbytes_rocm72.so. They contain no ROCm code. The image's libc is a
copy of this machine's, so the stand-in `python` (a gcc-built program) resolves like a real one.

    image = StandinImage(tmp_path / "img")
    image.torch(bundled_sonames="upstream")     # torch/lib copies keep SONAMEs libhipblas.so.3 …; "bare": libhipblas.so
    image.bitsandbytes()
    image.system_rocm()                         # /opt/rocm-7.2.4 (+ /opt/rocm symlink, .info/version, dpkg rocm-core)
    image.distro_library("librocm_smi64.so.1", package="librocm-smi64-1", version="5.7.0-1")
"""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.support.elfbuild import ElfBuilder

VENV = "/opt/rocm-fleet/venv"
SITE = f"{VENV}/lib/python3.11/site-packages"
MULTIARCH = "lib/x86_64-linux-gnu"


class StandinImage:
    def __init__(self, root: Path):
        self.root = Path(root)
        self.build = ElfBuilder(self.root)
        self._dpkg: list[str] = [
            "Package: libc6\nStatus: install ok installed\nArchitecture: amd64\nVersion: 2.36-9+deb12u10\n"
            "Maintainer: GNU Libc Maintainers <debian-glibc@lists.debian.org>\n"
        ]
        self._base()

    def path(self, image_path: str) -> Path:
        return self.root / image_path.lstrip("/")

    def write(self, image_path: str, text: str) -> Path:
        target = self.path(image_path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        return target

    def _base(self) -> None:
        for real in ("/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2"):
            target = self.path(real)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(Path(real).resolve(), target)
        self.write("/etc/os-release", 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm) — stand-in image"\n')
        self.write(f"{VENV}/pyvenv.cfg", "home = /usr/bin\nversion = 3.11.2\n")
        self.build.exe(f"{VENV.lstrip('/')}/bin/python")
        self._write_dpkg()

    def torch(
        self,
        *,
        bundled_sonames: str = "upstream",
        version: str = "2.13.0+rocm7.2",
        hip: str | None = "7.2.53211-standin",
    ) -> None:
        """torch/_C → libtorch_python → libtorch_hip → bundled HIP/hipBLAS/hipBLASLt copies, all RPATH $ORIGIN."""
        lib = f"{SITE.lstrip('/')}/torch/lib"
        upstream = bundled_sonames == "upstream"
        self.build.lib(
            f"{lib}/libhsa-runtime64.so",
            soname="libhsa-runtime64.so.1" if upstream else "libhsa-runtime64.so",
            rpath="$ORIGIN",
        )
        self.build.lib(
            f"{lib}/libamdhip64.so",
            soname="libamdhip64.so.7" if upstream else "libamdhip64.so",
            needed=["libhsa-runtime64.so"],
            rpath="$ORIGIN",
        )
        self.build.lib(
            f"{lib}/libhipblaslt.so",
            soname="libhipblaslt.so.1" if upstream else "libhipblaslt.so",
            needed=["libamdhip64.so"],
            rpath="$ORIGIN",
        )
        self.build.lib(
            f"{lib}/libhipblas.so",
            soname="libhipblas.so.3" if upstream else "libhipblas.so",
            needed=["libamdhip64.so", "libhipblaslt.so"],
            rpath="$ORIGIN",
        )
        self.build.lib(
            f"{lib}/libtorch_hip.so",
            soname="libtorch_hip.so",
            needed=["libamdhip64.so", "libhipblas.so", "libhipblaslt.so"],
            rpath="$ORIGIN",
        )
        self.build.lib(
            f"{lib}/libtorch_python.so", soname="libtorch_python.so", needed=["libtorch_hip.so"], rpath="$ORIGIN"
        )
        self.build.lib(
            f"{lib}/libtorch_global_deps.so",
            soname="libtorch_global_deps.so",
            needed=["libamdhip64.so"],
            rpath="$ORIGIN",
        )
        self.build.lib(
            f"{SITE.lstrip('/')}/torch/_C.cpython-311-x86_64-linux-gnu.so",
            needed=["libtorch_python.so"],
            runpath="$ORIGIN:$ORIGIN/lib",
        )
        self.write(f"{SITE}/torch/version.py", f"__version__ = {version!r}\nhip = {hip!r}\ncuda = None\n")
        self.write(
            f"{SITE}/torch-{version}.dist-info/METADATA", f"Metadata-Version: 2.4\nName: torch\nVersion: {version}\n\n"
        )

    def bitsandbytes(self, version: str = "0.50.1") -> None:
        """The bitsandbytes layout with a stand-in libbitsandbytes_rocm72.so linked like the real one."""
        package = f"{SITE.lstrip('/')}/bitsandbytes"
        self.build.lib(
            f"{package}/libbitsandbytes_rocm72.so",
            soname="libbitsandbytes_rocm72.so",
            needed=["libhipblas.so.3", "libhipblaslt.so.1"],
            runpath="/opt/rocm/lib:/opt/rocm-7.2.4/lib",
        )
        self.write(f"{SITE}/bitsandbytes/__init__.py", "")
        self.write(
            f"{SITE}/bitsandbytes-{version}.dist-info/METADATA",
            f"Metadata-Version: 2.1\nName: bitsandbytes\nVersion: {version}\n\n",
        )

    def system_rocm(self, release: str = "7.2.4", build: str = "70204", *, needed_by_hipblas=()) -> None:
        """/opt/rocm-RELEASE/lib with hipBLAS, hipBLASLt and HIP, /opt/rocm -> /etc/alternatives/rocm -> it (absolute
        links, as on a real host), its ld.so.conf.d drop-in, .info/version and rocm-core in dpkg's status."""
        lib = f"opt/rocm-{release}/lib"
        self.build.lib(f"{lib}/libamdhip64.so.7", soname="libamdhip64.so.7")
        self.build.lib(f"{lib}/libhipblaslt.so.1", soname="libhipblaslt.so.1", needed=["libamdhip64.so.7"])
        self.build.lib(
            f"{lib}/libhipblas.so.3",
            soname="libhipblas.so.3",
            needed=["libamdhip64.so.7", "libhipblaslt.so.1", *needed_by_hipblas],
        )
        self.write(f"/opt/rocm-{release}/.info/version", f"{release}-93\n")
        # rocm-opencl's drop-in (10-rocm-opencl.conf, as AMD's package installs it) puts every ROCm library into the
        # loader's default search; the image has no ld.so.cache, so the analyser reads ld.so.conf as ldconfig would.
        self.write("/etc/ld.so.conf", "include /etc/ld.so.conf.d/*.conf\n")
        self.write("/etc/ld.so.conf.d/10-rocm-opencl.conf", f"/opt/rocm-{release}/lib\n")
        self.path("/etc/alternatives").mkdir(parents=True, exist_ok=True)
        self.path("/etc/alternatives/rocm").symlink_to(f"/opt/rocm-{release}")
        self.path("/opt/rocm").symlink_to("/etc/alternatives/rocm")
        self._dpkg.append(
            f"Package: rocm-core\nStatus: install ok installed\nArchitecture: amd64\n"
            f"Version: {release}.{build}-93~22.04\nMaintainer: ROCm Dev Support <rocm-dev.support@amd.com>\n"
        )
        self._write_dpkg()

    def distro_library(self, soname: str, *, package: str, version: str, source: str) -> str:
        """A distro-archive ROCm library in /usr/lib/x86_64-linux-gnu, owned by `package` in dpkg's database."""
        path = f"/usr/{MULTIARCH}/{soname}"
        self.build.lib(path.lstrip("/"), soname=soname)
        self._dpkg.append(
            f"Package: {package}\nStatus: install ok installed\nArchitecture: amd64\nSource: {source}\n"
            f"Version: {version}\nMaintainer: Debian ROCm Team <debian-ai@lists.debian.org>\n"
        )
        self.write(f"/var/lib/dpkg/info/{package}:amd64.list", f"/usr/{MULTIARCH}\n{path}\n")
        self._write_dpkg()
        return path

    def _write_dpkg(self) -> None:
        self.write("/var/lib/dpkg/status", "\n".join(self._dpkg))
