"""Real Debian roots with real distro ROCm packages installed by apt, for the strays tests — built once, cached.

    image("bookworm", ("slurm-wlm-rsmi-plugin", "librocsparse0"))  -> a cached root, never changed after it is built
    overlay(image_root, tmp_path)                                  -> a writable overlay of it for one test

A root is a `debootstrap --variant=minbase` of the suite, then `apt-get install` of the packages inside it (so apt
pulls the distro ROCm libraries in through dependencies exactly as on a workstation). The cache key is the recipe, so
changing the package list builds a new root. Maintainer scripts cannot start daemons (policy-rc.d answers 101).
Needs root and deb.debian.org; the tests that use it are marked slow and root.

localfleet's base root is Debian 12 with SSH for whole-fleet runs; these are smaller, per-suite (trixie included), and
hold the packages under test. Mounts go through localfleet's mount/release helpers, which also clean up after a
killed run.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

from localfleet.base import CHROOT_ENV, MIRROR, POLICY_RC_D
from localfleet.mounts import MS_NODEV, MS_NOEXEC, MS_NOSUID, mount
from localfleet.release import release_tree

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".cache" / "debian-roots"
BASE_PACKAGES = ("python3",)  # the verifier runs with the host's python3
RECIPE_VERSION = 1
STAMP = ".debian-root.json"


def _run(argv: list[str], doing: str, log: Path | None = None) -> None:
    if log is None:
        done = subprocess.run(argv, capture_output=True, text=True, env=CHROOT_ENV)
        output = done.stdout + done.stderr
    else:
        with open(log, "a") as out:
            done = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, text=True, env=CHROOT_ENV)
        output = log.read_text()
    if done.returncode != 0:
        tail = " | ".join(output.strip().splitlines()[-3:])
        raise RuntimeError(f"{doing} failed (exit {done.returncode}): {tail}")


def chroot_run(root: Path, *argv: str, doing: str, log: Path | None = None) -> None:
    """Run a command inside `root` with /proc mounted (apt and dpkg want it); unmounted again in every case."""
    mount("proc", root / "proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    try:
        _run(["chroot", str(root), *argv], doing, log)
    finally:
        release_tree(root)


def _recipe(suite: str, packages: tuple[str, ...]) -> dict:
    return {
        "suite": suite,
        "mirror": MIRROR,
        "base": list(BASE_PACKAGES),
        "packages": list(packages),
        "version": RECIPE_VERSION,
    }


def image(suite: str, packages: tuple[str, ...] = ()) -> Path:
    """The cached root of `suite` with `packages` installed by apt (built on first use; other processes wait)."""
    recipe = _recipe(suite, packages)
    key = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:12]
    CACHE.mkdir(parents=True, exist_ok=True)
    target = CACHE / f"{suite}-{key}"
    with open(CACHE / f"{suite}-{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / STAMP).is_file():
            return target
        building = CACHE / f".build-{suite}-{key}-{os.getpid()}"
        log = CACHE / f"{suite}-{key}.log"
        log.write_text("")
        try:
            _run(
                [
                    "debootstrap",
                    "--variant=minbase",
                    f"--include={','.join(BASE_PACKAGES)}",
                    f"--cache-dir={_debs(suite)}",
                    suite,
                    str(building),
                    MIRROR,
                ],
                f"debootstrap {suite} into {building} (see {log})",
                log,
            )
            (building / "usr/sbin/policy-rc.d").write_text(POLICY_RC_D)
            (building / "usr/sbin/policy-rc.d").chmod(0o755)
            chroot_run(building, "apt-get", "update", "-q", doing=f"apt-get update in {building}", log=log)
            if packages:
                chroot_run(
                    building,
                    "apt-get",
                    "install",
                    "-y",
                    "-q",
                    *packages,
                    doing=f"apt-get install {' '.join(packages)} in {building} (see {log})",
                    log=log,
                )
            chroot_run(building, "apt-get", "clean", doing=f"apt-get clean in {building}", log=log)
            (building / STAMP).write_text(json.dumps(recipe, indent=2) + "\n")
            if target.exists():
                shutil.rmtree(target)
            building.rename(target)
        except BaseException:
            if building.exists():
                release_tree(building)
            shutil.rmtree(building, ignore_errors=True)
            raise
    return target


def _debs(suite: str) -> Path:
    # debootstrap's package cache, per suite, so rebuilding a root (a new recipe) downloads nothing it already has.
    path = CACHE / "debs" / suite
    path.mkdir(parents=True, exist_ok=True)
    return path


def overlay(root: Path, workdir: Path) -> Path:
    """A writable view of a cached root: an overlay mount whose lower layer is the (never changed) image, so a test
    may install and purge packages in it without copying gigabytes. Release it with localfleet's release_tree(workdir),
    which also unmounts whatever was mounted inside it."""
    upper, work, merged = workdir / "upper", workdir / "work", workdir / "merged"
    for directory in (upper, work, merged):
        directory.mkdir(parents=True)
    mount("overlay", merged, "overlay", 0, f"lowerdir={root},upperdir={upper},workdir={work}")
    return merged
