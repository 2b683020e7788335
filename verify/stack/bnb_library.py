"""Which native library bitsandbytes 0.50.1 will load — its `cextension.py` selection rules, without importing it.

Rules (read from the 0.50.1 wheel's cextension.py / cuda_specs.py):
- only when torch reports a GPU (`torch.cuda.is_available()` and a device): otherwise it loads
  `libbitsandbytes_cpu.so`; the static check assumes the GPU case, since that is what the host is for;
- `torch.version.hip` set → prefix `rocm`, override variable `BNB_ROCM_VERSION`; the runtime version is the first two
  dot-separated numbers of `torch.version.hip` ("7.2.53211-…" → (7, 2), file tag "72");
- the override must be digits (else RuntimeError) and names the file with no fallback;
- otherwise among the packaged `libbitsandbytes_rocm<digits>.so` (ROCm tags split as one digit major, the rest minor:
  "714" → 7.14): exact match; else the highest lower one of the same major; else the lowest higher one of the same
  major (both with a warning); else the exact, non-existent name (bitsandbytes then fails "No compatible … binary").
  A chosen file that does not exist is the caller's finding (`BnbChoice.path.exists()`).
- when torch is not a ROCm build at all, this verifier uses the library for the *expected* release (its release
  file's `bitsandbytes_library`), so the linkage of what the host should run is still checked (the torch build is
  failed by its own check).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from verify.stack.rocm_release import RocmRelease

SUFFIX = ".so"


@dataclass(frozen=True)
class BnbChoice:
    path: Path  # may not exist: bitsandbytes then fails with "No compatible ROCm binary found at PATH"
    rule: str  # how it was chosen, one line
    warning: str | None = None  # what bitsandbytes itself would warn about
    error: str | None = None  # what bitsandbytes itself would raise instead of loading anything

    @property
    def name(self) -> str:
        return self.path.name


def hip_version_tuple(hip: str | None) -> tuple[int, int] | None:
    """bitsandbytes' get_cuda_version_tuple() for a HIP version string; None when it cannot be read."""
    if not hip:
        return None
    parts = hip.split(".")
    try:
        return (int(parts[0]), int(parts[1])) if len(parts) >= 2 else None
    except ValueError:
        return None


def release_tag(release: str) -> str:
    """'7.2.4' → '72', the tag bitsandbytes names its library for that ROCm release with (release files name the
    library itself; a test holds them to this rule)."""
    major, minor = release.split(".")[:2]
    return f"{int(major)}{int(minor)}"


def packaged_rocm_libraries(package_dir: Path) -> dict[tuple[int, int], Path]:
    found: dict[tuple[int, int], Path] = {}
    for lib in sorted(package_dir.glob(f"libbitsandbytes_rocm*{SUFFIX}")):
        match = re.search(r"rocm(\d+)", lib.name)
        if not match:
            continue
        digits = match.group(1)
        try:
            found[(int(digits[:1]), int(digits[1:]))] = lib
        except ValueError:
            continue
    return found


def select_bnb_library(
    package_dir: Path, torch_hip: str | None, environ: Mapping[str, str], expected: RocmRelease
) -> BnbChoice:
    """The library bitsandbytes would load from `package_dir` (the installed bitsandbytes/ directory)."""
    if not torch_hip:
        return BnbChoice(
            package_dir / expected.bitsandbytes_library,
            f"torch is not a ROCm build: checking the library for ROCm {expected.release} instead",
        )
    override = environ.get("BNB_ROCM_VERSION")
    if override is not None:
        path = package_dir / f"libbitsandbytes_rocm{override}{SUFFIX}"
        if not override.isdigit():
            return BnbChoice(
                path,
                f"BNB_ROCM_VERSION={override!r}",
                error=f"BNB_ROCM_VERSION={override!r}: value must be digits only — unset it or set e.g. 72",
            )
        return BnbChoice(path, f"BNB_ROCM_VERSION={override} overrides the selection (no fallback)")

    runtime = hip_version_tuple(torch_hip)
    if runtime is None:
        return BnbChoice(
            package_dir / f"libbitsandbytes_rocm{SUFFIX}",
            f"torch.version.hip {torch_hip!r} has no major.minor",
            error=(
                f"torch.version.hip {torch_hip!r} is unreadable: bitsandbytes finds no GPU specs and loads its CPU "
                "library"
            ),
        )
    exact_name = f"libbitsandbytes_rocm{runtime[0]}{runtime[1]}{SUFFIX}"
    available = packaged_rocm_libraries(package_dir)
    if runtime in available:
        return BnbChoice(available[runtime], f"exact match for torch.version.hip {torch_hip}")
    lower = [v for v in available if v[0] == runtime[0] and v < runtime]
    higher = [v for v in available if v[0] == runtime[0] and v > runtime]
    if lower or higher:
        picked = max(lower) if lower else min(higher)
        warning = (
            f"no bitsandbytes build for ROCm {runtime[0]}.{runtime[1]}: it loads the ROCm {picked[0]}.{picked[1]} "
            "build instead"
        )
        return BnbChoice(available[picked], f"nearest same-major build for torch.version.hip {torch_hip}", warning)
    # bitsandbytes returns the missing exact name; loading it then fails with "No compatible ROCm binary found".
    return BnbChoice(
        package_dir / exact_name, f"no packaged ROCm {runtime[0]}.x build for torch.version.hip {torch_hip}"
    )
