"""A stand-in for repo.radeon.com, served over HTTP on loopback, so the ROCm stage can run for real on a test host.

repo.radeon.com is out of reach here and no AMD package may be downloaded, so everything below is a labelled
stand-in with AMD's layout, names and version strings:

    amdgpu-install/7.2.4/ubuntu/jammy/amdgpu-install_7.2.4.70204-1_all.deb
        /usr/bin/amdgpu-install: a script that installs the `rocm` meta package with apt-get (--rocmrelease=R: `rocmR`)
            and records its arguments in /var/log/amdgpu-install-standin.args
        /etc/apt/preferences.d/repo-radeon-pin-600: AMD's pin (Package: *, Pin: release o=repo.radeon.com, 600)
        /etc/apt/sources.list.d/rocm.list and amdgpu.list, deliberately naming the wrong ROCm release (7.2.1), as
            AMD's own 7.2.1 quick start had users fix by hand
    rocm/apt/7.2.4 jammy main: rocm-core 7.2.4.70204-93~22.04 (/opt/rocm-7.2.4/.info/version; registers /opt/rocm
        with update-alternatives as AMD's does) and rocm 7.2.4.70204-93~22.04 (depends on it); the multi-version
        pair rocm-core7.2.4 and rocm7.2.4 (same content) that `--rocmrelease=7.2.4` installs
        and AMD's rocminfo, hipcc, rocm-cmake, rocm-device-libs (empty stand-ins with AMD's 7.2.4 version strings,
        which sort below Debian's: only AMD's pin makes them apt's candidates)
    graphics/7.2.4/ubuntu, amdgpu/30.30.4/ubuntu jammy main: empty repositories
Every Release file says `Origin: repo.radeon.com`, as AMD's do: that is what AMD's pin matches.

The repositories are signed (InRelease) with a throw-away key made for the mirror, which the stand-in installer deb
ships as /etc/apt/keyrings/rocm.gpg and names in its lists' signed-by, as AMD's deb does with AMD's key: apt checks
every stand-in package as it checks AMD's. `Signer` also makes the key of someone who took a mirror over.
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import hashlib
import http.server
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

CODENAME = "jammy"  # what Debian 12 takes
ROCM_VERSION = "7.2.4.70204-93~22.04"
INSTALLER_VERSION = "7.2.4.70204-1"
KEYRING = "/etc/apt/keyrings/rocm.gpg"
OPTIONS = f"[arch=amd64 signed-by={KEYRING}]"
ORIGIN = "repo.radeon.com"
PIN_FILE = "/etc/apt/preferences.d/repo-radeon-pin-600"
# The names the distributions share with AMD, with AMD's component versions for 7.2.4 (verify/stack/releases/).
SHARED_NAMES = {"rocminfo": "1.0.0", "hipcc": "1.1.1", "rocm-cmake": "0.14.0", "rocm-device-libs": "1.0.0"}

AMDGPU_INSTALL_SCRIPT = """#!/bin/sh
# STAND-IN for AMD's amdgpu-install (tests only): installs the rocm use case from the configured repositories.
set -e
release=""
for argument in "$@"; do
    case "$argument" in
        --rocmrelease=*) release="${argument#--rocmrelease=}" ;;
        -y|--usecase=rocm|--no-dkms) ;;
        *) echo "amdgpu-install stand-in: unexpected argument $argument" >&2; exit 2 ;;
    esac
done
echo "$*" > /var/log/amdgpu-install-standin.args
# What the apt-get below sees of the dpkg lock timeout (the deploy passes it through APT_CONFIG).
apt-config dump DPkg::Lock::Timeout >> /var/log/amdgpu-install-standin.args
apt-get install -y "rocm$release"
"""

ROCM_CORE_POSTINST = """#!/bin/sh
set -e
if [ "$1" = configure ]; then
    update-alternatives --install /opt/rocm rocm /opt/rocm-{release} {build}
fi
"""
ROCM_CORE_PRERM = """#!/bin/sh
set -e
if [ "$1" = remove ]; then
    update-alternatives --remove rocm /opt/rocm-{release}
fi
"""


def rocm_core_scripts(release: str, build: str) -> dict[str, str]:
    """rocm-core's maintainer scripts: register /opt/rocm-RELEASE as the `rocm` alternative (priority: the build)."""
    return {
        "postinst": ROCM_CORE_POSTINST.format(release=release, build=build),
        "prerm": ROCM_CORE_PRERM.format(release=release),
    }


class Signer:
    """A throw-away OpenPGP signing key in a private gpg home (tests only), used as a context manager: gpg's agent
    is stopped and the home deleted when the block ends."""

    def __init__(self, name: str):
        self.name = name
        self.home = Path(tempfile.mkdtemp(prefix="rocm-fleet-gpg-"))  # short: gpg's socket paths are limited

    def _gpg(self, *argv: str, output: bool = False) -> bytes:
        done = subprocess.run(
            ["gpg", "--batch", "--quiet", "--pinentry-mode", "loopback", "--passphrase", "", *argv],
            capture_output=True,
            env={**os.environ, "GNUPGHOME": str(self.home)},
        )
        if done.returncode != 0:
            raise RuntimeError(f"gpg {' '.join(argv)}: {done.stderr.decode(errors='replace').strip()}")
        return done.stdout

    def __enter__(self) -> Signer:
        self._gpg("--quick-gen-key", f"{self.name} (rocm-fleet tests only)", "ed25519", "sign", "never")
        return self

    def __exit__(self, *exc) -> None:
        subprocess.run(
            ["gpgconf", "--kill", "all"], capture_output=True, env={**os.environ, "GNUPGHOME": str(self.home)}
        )
        shutil.rmtree(self.home, ignore_errors=True)

    def keyring(self) -> bytes:
        """The public key as a binary keyring, the form apt's signed-by takes in a .gpg file."""
        return self._gpg("--export")

    def sign(self, release: Path) -> None:
        """InRelease next to `release`: the Release file, clear-signed (what apt fetches first)."""
        self._gpg("--yes", "--clearsign", "--output", str(release.with_name("InRelease")), str(release))


def build_deb(
    workdir: Path,
    control: dict[str, str],
    files: dict[str, str | bytes] | None = None,
    scripts: dict[str, str] | None = None,
) -> Path:
    """A .deb with this control paragraph, these files (text or bytes; mode 0644, or 0755 under /usr/bin) and
    maintainer scripts (0755), built by dpkg-deb."""
    fields = {
        "Architecture": "amd64",
        "Maintainer": "rocm-fleet tests <tests@example.org>",
        "Description": "STAND-IN for an AMD package (tests only)",
        **control,
    }
    tree = workdir / f"tree-{fields['Package']}"
    (tree / "DEBIAN").mkdir(parents=True)
    (tree / "DEBIAN/control").write_text("".join(f"{key}: {value}\n" for key, value in fields.items()))
    for name, text in (scripts or {}).items():
        script = tree / "DEBIAN" / name
        script.write_text(text)
        script.chmod(0o755)
    for path, text in (files or {}).items():
        target = tree / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            target.write_bytes(text)
        else:
            target.write_text(text)
        target.chmod(0o755 if path.startswith("/usr/bin/") else 0o644)
    deb = workdir / f"{fields['Package']}_{fields['Version']}_{fields['Architecture']}.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "--build", str(tree), str(deb)], check=True, capture_output=True)
    return deb


def repository(top: Path, debs: list[Path], signer: Signer) -> None:
    """An apt repository at `top` (dists/jammy/main/binary-amd64 and pool/), indexes written as dpkg-scanpackages
    does, with a Release file that lists them, signed by `signer` (InRelease)."""
    pool = top / "pool"
    pool.mkdir(parents=True, exist_ok=True)
    for deb in debs:
        (pool / deb.name).write_bytes(deb.read_bytes())
    packages = subprocess.run(
        ["dpkg-scanpackages", "--multiversion", "pool"], cwd=top, capture_output=True, text=True, check=True
    ).stdout
    binary = top / "dists" / CODENAME / "main" / "binary-amd64"
    binary.mkdir(parents=True, exist_ok=True)
    (binary / "Packages").write_text(packages)
    (binary / "Packages.gz").write_bytes(gzip.compress(packages.encode(), mtime=0))
    lines = [
        f"Origin: {ORIGIN}",
        f"Label: {ORIGIN}",
        f"Suite: {CODENAME}",
        f"Codename: {CODENAME}",
        "Date: Mon, 01 Jan 2024 00:00:00 UTC",
        "Components: main",
        "Architectures: amd64",
        "SHA256:",
    ]
    for index in ("main/binary-amd64/Packages", "main/binary-amd64/Packages.gz"):
        data = (top / "dists" / CODENAME / index).read_bytes()
        lines.append(f" {hashlib.sha256(data).hexdigest()} {len(data)} {index}")
    (top / "dists" / CODENAME / "Release").write_text("\n".join(lines) + "\n")
    signer.sign(top / "dists" / CODENAME / "Release")


def build_mirror(root: Path, base_url: str) -> str:
    """Fill `root` (served at `base_url`: the installer's lists name it) with the stand-in repositories; return the
    sha256 of the installer deb."""
    debs = root.parent / f"{root.name}-debs"
    debs.mkdir(parents=True)
    with Signer("stand-in for AMD's repository key") as signer:
        return _build_mirror(root, base_url, debs, signer)


def _build_mirror(root: Path, base_url: str, debs: Path, signer: Signer) -> str:
    wrong = "7.2.1"  # the lists the installer writes name the wrong release, to be fixed by the deploy
    installer = build_deb(
        debs,
        {"Package": "amdgpu-install", "Version": INSTALLER_VERSION, "Architecture": "all"},
        {
            "/usr/bin/amdgpu-install": AMDGPU_INSTALL_SCRIPT,
            KEYRING: signer.keyring(),
            "/etc/apt/sources.list.d/rocm.list": (
                f"deb {OPTIONS} {base_url}/rocm/apt/{wrong} {CODENAME} main\n"
                f"deb {OPTIONS} {base_url}/graphics/{wrong}/ubuntu {CODENAME} main\n"
            ),
            "/etc/apt/sources.list.d/amdgpu.list": f"deb {OPTIONS} {base_url}/amdgpu/30.30.4/ubuntu {CODENAME} main\n",
            PIN_FILE: f"Package: *\nPin: release o={ORIGIN}\nPin-Priority: 600\n",
        },
    )
    rocm = []
    for suffix in ("", "7.2.4"):  # single-version names, and the multi-version ones
        rocm.append(
            build_deb(
                debs,
                {"Package": f"rocm-core{suffix}", "Version": ROCM_VERSION},
                {"/opt/rocm-7.2.4/.info/version": "7.2.4-93\n"},
                rocm_core_scripts("7.2.4", "70204"),
            )
        )
        rocm.append(
            build_deb(
                debs,
                {
                    "Package": f"rocm{suffix}",
                    "Version": ROCM_VERSION,
                    "Depends": f"rocm-core{suffix} (= {ROCM_VERSION})",
                },
            )
        )
    for name, component in SHARED_NAMES.items():
        rocm.append(build_deb(debs, {"Package": name, "Version": f"{component}.70204-93~22.04"}))
    folder = root / "amdgpu-install" / "7.2.4" / "ubuntu" / CODENAME
    folder.mkdir(parents=True)
    (folder / installer.name).write_bytes(installer.read_bytes())
    repository(root / "rocm" / "apt" / "7.2.4", rocm, signer)
    repository(root / "graphics" / "7.2.4" / "ubuntu", [], signer)
    repository(root / "amdgpu" / "30.30.4" / "ubuntu", [], signer)
    return hashlib.sha256(installer.read_bytes()).hexdigest()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@contextlib.contextmanager
def serving(root: Path) -> Iterator[str]:
    """Serve `root` over HTTP on a free loopback port; yields the base URL. The server stops when the block ends."""
    handler = functools.partial(_QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
