"""roles/venv/wheelhouse.py: the controller downloads, with the real pip, every wheel a host's venv needs — for the
host's Python and glibc, not the controller's — once; an incomplete, outdated or changed set is never taken for
complete, and the set carries every wheel's sha256 for pip's hash-checking mode on the host."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from packaging import tags
from packaging.utils import parse_wheel_filename

from roles.venv import wheelhouse
from roles.venv.model import HostPython, wheel_platforms
from roles.venv.wheelhouse import REQUIREMENTS, STAMP, WheelhouseError, prepare_wheelhouse, requirements_text

DEBIAN12 = HostPython("3.11.2", "2.36", "x86_64")
TORCH_SPEC, TORCH_INDEX = "torch==2.13.0", "https://pypi.org/simple"  # the local fleet's CPU stand-in
OTHERS = ["bitsandbytes==0.50.1"]


def _recipe():
    return wheelhouse._recipe(DEBIAN12, TORCH_SPEC, TORCH_INDEX, OTHERS)


def _fake_set(directory: Path, files: dict[str, bytes], recipe: dict) -> None:
    directory.mkdir(parents=True)
    for name, content in files.items():
        (directory / name).write_bytes(content)
    stamp = {
        "recipe": recipe,
        "files": {
            name: {"size": len(content), "sha256": hashlib.sha256(content).hexdigest()}
            for name, content in files.items()
        },
    }
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


def test_a_wheel_changed_since_its_download_is_downloaded_again(tmp_path, monkeypatch):
    """Issue 9, High 3: the stamp compared sizes only, so a wheel rewritten with the same size (another local account,
    a disk error) was taken for complete, uploaded and installed. Now its sha256 is checked once per controller
    process, and a changed set is downloaded again. (pip download is replaced by a writer of fixed files here.)"""
    downloads = []

    def fake_download(dest, target, requirements, extra):
        downloads.append(list(requirements))
        for name in ("torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl", "bitsandbytes-0.50.1-py3-none-any.whl"):
            if name.split("-")[0] in " ".join(requirements):
                (dest / name).write_bytes(b"the real wheel " + name.encode())

    monkeypatch.setattr(wheelhouse, "_pip_download", fake_download)
    directory = prepare_wheelhouse(tmp_path, DEBIAN12, TORCH_SPEC, TORCH_INDEX, OTHERS)
    assert len(downloads) == 2
    wheel = directory / "bitsandbytes-0.50.1-py3-none-any.whl"
    wheel.write_bytes(wheel.read_bytes().replace(b"real", b"evil"))  # the same size
    wheelhouse._verified.clear()  # as in the next controller process
    directory = prepare_wheelhouse(tmp_path, DEBIAN12, TORCH_SPEC, TORCH_INDEX, OTHERS)
    assert len(downloads) == 4, "a wheel changed since its download was taken for complete"
    assert wheel.read_bytes().startswith(b"the real wheel")


def _counting_hashes(monkeypatch) -> list[str]:
    hashed = []
    real = wheelhouse.sha256_of

    def counted(path):
        hashed.append(path.name)
        return real(path)

    monkeypatch.setattr(wheelhouse, "sha256_of", counted)
    return hashed


def test_a_later_run_takes_the_recorded_hashes_of_unchanged_wheels_and_hashes_a_changed_one(tmp_path, monkeypatch):
    """The torch ROCm wheel is gigabytes: each controller process hashed the whole set again before every run. Now
    a file's sha256 is taken from .hashed.json while its size, inode, mtime and ctime are those recorded; a rewrite of
    the same size changes the ctime, so it is hashed — and found changed."""
    monkeypatch.setattr(wheelhouse, "_SETTLED_NS", 0)  # files written just now count as settled
    recipe = _recipe()
    _fake_set(tmp_path / "a", {"x-1-py3-none-any.whl": b"12345", "y-1-py3-none-any.whl": b"abc"}, recipe)
    hashed = _counting_hashes(monkeypatch)
    wheelhouse._verified.clear()
    assert wheelhouse._complete(tmp_path / "a", recipe)
    assert sorted(hashed) == ["x-1-py3-none-any.whl", "y-1-py3-none-any.whl"]
    wheelhouse._verified.clear()  # the next controller process
    assert wheelhouse._complete(tmp_path / "a", recipe)
    assert len(hashed) == 2, "unchanged wheels were hashed again"
    (tmp_path / "a" / "x-1-py3-none-any.whl").write_bytes(b"54321")  # the same size, another content
    wheelhouse._verified.clear()
    assert not wheelhouse._complete(tmp_path / "a", recipe)
    assert hashed[2:] == ["x-1-py3-none-any.whl"]


def test_a_wheel_changed_in_the_last_seconds_is_hashed_each_time_not_recorded(tmp_path, monkeypatch):
    """Timestamps advance in clock ticks: a write in the same tick as the record would leave them as recorded."""
    recipe = _recipe()
    _fake_set(tmp_path / "a", {"x-1-py3-none-any.whl": b"12345"}, recipe)
    hashed = _counting_hashes(monkeypatch)
    for _ in range(2):
        wheelhouse._verified.clear()
        assert wheelhouse._complete(tmp_path / "a", recipe)
    assert hashed == ["x-1-py3-none-any.whl"] * 2
    assert not (tmp_path / "a" / wheelhouse.HASHED).exists()


def test_requirements_list_every_wheel_with_its_sha256(tmp_path):
    recipe = _recipe()
    wheels = {"torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl": b"t", "Jinja2-3.1.6-py3-none-any.whl": b"j"}
    _fake_set(tmp_path / "a", wheels, recipe)
    wheelhouse._verified.clear()
    assert wheelhouse._complete(tmp_path / "a", recipe)
    sha = {name: hashlib.sha256(content).hexdigest() for name, content in wheels.items()}
    expected = (
        f"jinja2==3.1.6 --hash=sha256:{sha['Jinja2-3.1.6-py3-none-any.whl']}\n"
        f"torch==2.13.0+cpu --hash=sha256:{sha['torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl']}\n"
    )
    assert (tmp_path / "a" / REQUIREMENTS).read_text() == expected
    files = wheelhouse.wheelhouse_files(tmp_path / "a")
    assert files == {**sha, REQUIREMENTS: hashlib.sha256(expected.encode()).hexdigest()}


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
        tags.compatible_tags((3, 11), "cp311", platforms=wheel_platforms("2.36", "x86_64"))
    )
    for name in wheels.values():
        assert parse_wheel_filename(name)[3] & accepted, f"{name} does not install on CPython 3.11 / glibc 2.36"
    stamp = json.loads((directory / STAMP).read_text())
    assert sorted(stamp["files"]) == sorted(wheels.values())
    for name, entry in stamp["files"].items():
        assert entry == {
            "size": (directory / name).stat().st_size,
            "sha256": hashlib.sha256((directory / name).read_bytes()).hexdigest(),
        }
    assert (directory / REQUIREMENTS).read_text() == requirements_text(stamp["files"])


@pytest.mark.slow
def test_real_wheelhouse_with_the_model_check_holds_transformers_and_its_dependencies_hashed():
    """verify_model synthetic (the default): Transformers and accelerate at their pins, and what they need, join the
    set — for the host's Python, each wheel in requirements.txt with its sha256, like torch and bitsandbytes."""
    from roles import pins
    from roles.venv.model import model_check_requirements
    from tests.support.venvs import REPO

    # Its own directory: the local fleet's set (verify_model off) keeps its recipe, so neither downloads the other's.
    others = [*OTHERS, *model_check_requirements("synthetic")]
    base = REPO / ".cache" / "wheelhouse-model-check"
    directory = prepare_wheelhouse(base, DEBIAN12, TORCH_SPEC, TORCH_INDEX, others)
    wheels = {
        str(parse_wheel_filename(path.name)[0]): str(parse_wheel_filename(path.name)[1])
        for path in directory.glob("*.whl")
    }
    assert wheels["transformers"] == pins.TRANSFORMERS_VERSION and wheels["accelerate"] == pins.ACCELERATE_VERSION
    assert {"huggingface-hub", "tokenizers", "safetensors", "torch", "bitsandbytes"} <= set(wheels)
    required = {line.split("==")[0]: line for line in (directory / REQUIREMENTS).read_text().splitlines()}
    assert set(required) == set(wheels)
    assert all(" --hash=sha256:" in line for line in required.values())


@pytest.mark.slow
def test_pip_installs_the_set_in_hash_checking_mode_and_refuses_a_changed_wheel(tmp_path):
    """The command the venv stage runs on a host (roles/venv/operations.py), against the real set: pip installs every
    wheel with --require-hashes; a wheel changed after its download is refused."""
    from localfleet.layout import Layout
    from roles.venv.operations import PIP

    directory = prepare_wheelhouse(Layout.default().wheelhouse, DEBIAN12, TORCH_SPEC, TORCH_INDEX, OTHERS)
    small = {
        name
        for name in json.loads((directory / STAMP).read_text())["files"]
        if parse_wheel_filename(name)[0] in ("packaging", "filelock")
    }
    assert len(small) == 2
    house = tmp_path / "house"
    house.mkdir()
    for name in small:
        (house / name).write_bytes((directory / name).read_bytes())
    lines = [
        line
        for line in (directory / REQUIREMENTS).read_text().splitlines()
        if line.split("==")[0] in ("packaging", "filelock")
    ]
    (house / REQUIREMENTS).write_text("\n".join(lines) + "\n")
    subprocess.run([sys.executable, "-m", "venv", str(tmp_path / "v")], check=True)
    install = (
        f"{tmp_path}/v/bin/python {PIP} --no-index --find-links {house} --require-hashes -r {house / REQUIREMENTS}"
    )
    done = subprocess.run(["sh", "-c", install], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    subprocess.run([f"{tmp_path}/v/bin/python", "-m", "pip", "uninstall", "-y", "-q", "filelock"], check=True)
    wheel = house / next(name for name in small if name.startswith("filelock"))
    data = bytearray(wheel.read_bytes())
    data[len(data) // 2] ^= 0xFF
    wheel.write_bytes(bytes(data))
    done = subprocess.run(["sh", "-c", install], capture_output=True, text=True)
    assert done.returncode != 0 and "THESE PACKAGES DO NOT MATCH THE HASHES" in done.stderr, done.stderr
