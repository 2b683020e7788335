"""A STAND-IN system ROCm 7.2.4 tree for a local test workstation: small gcc-built libraries with the real SONAMEs
under /opt/rocm-7.2.4/lib, marked as a stand-in (/opt/rocm-7.2.4/STANDIN), linked the way bitsandbytes' ROCm library
needs them. No AMD package can be installed here (repo.radeon.com is out of reach, there is no GPU), so this is what
lets the static linkage check of a real host pass; the libraries contain no ROCm code and nothing ever runs them.

    install_standin_rocm(host.root)

Deliberately not written: /opt/rocm-7.2.4/.info/version and rocm-core in dpkg's database — the host has no ROCm
release, and the version check keeps saying so.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from tests.support.elfbuild import ElfBuilder

RELEASE = "7.2.4"
MARKER = "STANDIN"
# SONAME -> the SONAMEs it needs, as in ROCm 7.2 (libbitsandbytes_rocm72.so NEEDs libhipblas.so.3, libhipblaslt.so.1).
LIBRARIES = {
    "libhsa-runtime64.so.1": (),
    "libamdhip64.so.7": ("libhsa-runtime64.so.1",),
    "libhipblaslt.so.1": ("libamdhip64.so.7",),
    "libhipblas.so.3": ("libamdhip64.so.7", "libhipblaslt.so.1"),
}


def install_standin_rocm(root: Path, release: str = RELEASE) -> Path:
    """Write the stand-in tree into the filesystem `root` (a host's root directory); returns its lib directory
    inside `root`. /opt/rocm -> /etc/alternatives/rocm -> /opt/rocm-RELEASE, absolute links as amdgpu-install makes."""
    root = Path(root)
    top = root / f"opt/rocm-{release}"
    lib = top / "lib"
    lib.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="standin-rocm-") as scratch:
        build = ElfBuilder(Path(scratch))
        for soname, needed in LIBRARIES.items():
            # RUNPATH $ORIGIN: each library finds its siblings in its own directory, as ROCm's own libraries do.
            built = build.lib(f"lib/{soname}", soname=soname, needed=needed, runpath="$ORIGIN")
            shutil.copy2(built, lib / soname)
    (top / MARKER).write_text(
        f"STAND-IN for ROCm {release}: gcc-built libraries with ROCm's SONAMEs and no ROCm code, written by the "
        "rocm-fleet tests (tests/support/standin_rocm_tree.py). Not an AMD installation.\n"
    )
    alternatives = root / "etc/alternatives"
    alternatives.mkdir(parents=True, exist_ok=True)
    links = ((alternatives / "rocm", f"/opt/rocm-{release}"), (root / "opt/rocm", "/etc/alternatives/rocm"))
    for link, target in links:
        if link.is_symlink() or link.exists():
            link.unlink()
        os.symlink(target, link)
    return lib
