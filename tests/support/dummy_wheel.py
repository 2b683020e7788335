"""A minimal valid wheel that pip installs (`rocm_fleet_dummy` 1.0), for tests of the wheelhouse servers."""

from __future__ import annotations

import zipfile
from pathlib import Path

WHEEL = "rocm_fleet_dummy-1.0-py3-none-any.whl"


def dummy_wheel(path: Path, payload: bytes = b"x = 1\n") -> bytes:
    """Write the wheel at `path` with `payload` as its module; returns its bytes."""
    files = {
        "rocm_fleet_dummy/__init__.py": payload,
        "rocm_fleet_dummy-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: rocm-fleet-dummy\nVersion: 1.0\n",
        "rocm_fleet_dummy-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        b"Tag: py3-none-any\n",
    }
    record = "".join(f"{name},,\n" for name in files) + "rocm_fleet_dummy-1.0.dist-info/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
        archive.writestr("rocm_fleet_dummy-1.0.dist-info/RECORD", record)
    return path.read_bytes()
