"""Benchmark deploy file (not a stage): the venv stage's push of a wheel set, alone — the same operation
(`roles.uploads.checked_files` over SFTP through a private staging directory, sha256 checked on the host) with the
same arguments, for the set in $ROCM_FLEET_BENCH_SET, into $ROCM_FLEET_BENCH_DEST on each host.
Used by bench/wheelhouse_distribution.py."""

import os
from pathlib import Path

from roles.uploads import Upload, checked_files
from roles.venv.wheelhouse import wheelhouse_files

local = Path(os.environ["ROCM_FLEET_BENCH_SET"])
checked_files(
    name=f"Wheelhouse {local.name}",
    directory=os.environ["ROCM_FLEET_BENCH_DEST"],
    delete=True,
    uploads=[Upload(name, sha256, str(local / name)) for name, sha256 in sorted(wheelhouse_files(local).items())],
)
