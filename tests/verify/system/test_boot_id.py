"""verify/system/boot_id.py: the running boot's id, read from the kernel's own file."""

from __future__ import annotations

import re
from pathlib import Path

from verify.system.boot_id import BOOT_ID, boot_id


def test_the_running_boots_id_is_the_kernels_and_none_where_there_is_none(tmp_path):
    running = boot_id()
    assert running == Path(BOOT_ID).read_text().strip()
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", running)
    assert boot_id(str(tmp_path / "no-proc")) is None
    (tmp_path / "empty").write_text("\n")
    assert boot_id(str(tmp_path / "empty")) is None
