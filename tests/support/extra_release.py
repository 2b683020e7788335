"""A release file for one test: `with extra_release("7.2.5", "70205", …) as data:` writes
verify/stack/releases/7.2.5.json (a copy of 7.2.4's with `changes`), and removes it afterwards, also when the test
fails. Release files are found by listing that directory, so this is exactly what adding a release is."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.support.venvs import REPO
from verify.stack.rocm_release import RELEASES_DIR, forget

RELEASES = REPO / "verify" / "stack" / RELEASES_DIR


@contextmanager
def extra_release(release: str, build: str, **changes: Any) -> Iterator[dict[str, Any]]:
    data = json.loads((RELEASES / "7.2.4.json").read_text())
    data.update(release=release, build=build, **changes)
    path = RELEASES / f"{release}.json"
    assert not path.exists(), f"{path} is a real release file: pick another release for the test"
    path.write_text(json.dumps(data, indent=1))
    forget()
    try:
        yield data
    finally:
        path.unlink(missing_ok=True)
        forget()
