"""roles/venv/wheelhouse.py: the controller downloads, with the real pip, every wheel a host's venv needs — for the
host's Python and glibc, not the controller's — once; an incomplete or outdated set is never taken for complete."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from packaging import tags
from packaging.utils import parse_wheel_filename

from roles.venv import wheelhouse
from roles.venv.model import HostPython, wheel_platforms
from roles.venv.wheelhouse import STAMP, WheelhouseError, prepare_wheelhouse

DEBIAN12 = HostPython("3.11.2", "2.36", "x86_64")
TORCH_SPEC, TORCH_INDEX = "torch==2.13.0", "https://pypi.org/simple"  # the local fleet's CPU stand-in
OTHERS = ["bitsandbytes==0.50.1"]


def _recipe():
    return wheelhouse._recipe(DEBIAN12, TORCH_SPEC, TORCH_INDEX, OTHERS)


def _fake_set(directory: Path, files: dict[str, bytes], recipe: dict) -> None:
    directory.mkdir(parents=True)
    for name, content in files.items():
        (directory / name).write_bytes(content)
    stamp = {"recipe": recipe, "files": {name: len(content) for name, content in files.items()}}
    (directory / STAMP).write_text(json.dumps(stamp))


def test_complete_only_with_a_matching_stamp_and_every_file(tmp_path):
    recipe = _recipe()
    _fake_set(tmp_path / "a", {"x-1-py3-none-any.whl": b"12345"}, recipe)
    assert wheelhouse._complete(tmp_path / "a", recipe)
    assert not wheelhouse._complete(tmp_path / "a", {**recipe, "torch": "torch==2.13.0+rocm7.2"})
    (tmp_path / "a" / "x-1-py3-none-any.whl").write_bytes(b"123")  # cut short
    assert not wheelhouse._complete(tmp_path / "a", recipe)
    (tmp_path / "a" / "x-1-py3-none-any.whl").unlink()
    assert not wheelhouse._complete(tmp_path / "a", recipe)
    assert not wheelhouse._complete(tmp_path / "missing", recipe)


def test_a_complete_set_is_not_downloaded_again(tmp_path, monkeypatch):
    _fake_set(tmp_path / DEBIAN12.tag, {"x-1-py3-none-any.whl": b"1"}, _recipe())

    def no_download(*_args, **_kwargs):
        raise AssertionError("pip download ran for a complete wheelhouse")

    monkeypatch.setattr(wheelhouse, "_pip_download", no_download)
    assert prepare_wheelhouse(tmp_path, DEBIAN12, TORCH_SPEC, TORCH_INDEX, OTHERS) == tmp_path / DEBIAN12.tag


def test_a_failed_download_leaves_nothing_that_looks_complete(tmp_path):
    with pytest.raises(WheelhouseError) as raised:
        prepare_wheelhouse(tmp_path, DEBIAN12, "torch==0.0.1", TORCH_INDEX, OTHERS)
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(f"wheelhouse {tmp_path}: pip download torch==0.0.1 for Python 3.11 (x86_64, glibc 2.36)")
    assert sorted(path.name for path in tmp_path.iterdir()) == [f".{DEBIAN12.tag}.lock"]


@pytest.mark.slow
def test_real_wheelhouse_for_debian12():
    from localfleet.layout import Layout

    # The local fleet's wheelhouse: the real fleet tests use the same set, so it is downloaded once for both.
    base = Layout.default().wheelhouse
    directory = prepare_wheelhouse(base, DEBIAN12, TORCH_SPEC, TORCH_INDEX, OTHERS)
    wheels = {parse_wheel_filename(path.name)[0]: path.name for path in directory.glob("*.whl")}
    assert wheels["torch"].startswith("torch-2.13.0+cpu-cp311-")  # from this machine's disk (pip's find-links)
    assert wheels["bitsandbytes"].startswith("bitsandbytes-0.50.1-")
    assert {"numpy", "packaging", "filelock", "sympy"} <= set(wheels)
    # Every wheel installs on the host: its tags meet CPython 3.11 on glibc 2.36 x86_64 (not merely this controller).
    accepted = set(tags.cpython_tags((3, 11), platforms=wheel_platforms("2.36", "x86_64"))) | set(
        tags.compatible_tags((3, 11), "cp311", platforms=wheel_platforms("2.36", "x86_64")))
    for name in wheels.values():
        assert parse_wheel_filename(name)[3] & accepted, f"{name} does not install on CPython 3.11 / glibc 2.36"
    stamp = json.loads((directory / STAMP).read_text())
    assert sorted(stamp["files"]) == sorted(wheels.values())
