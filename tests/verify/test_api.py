"""verify/api.py: every name of the contract resolves to the verifier's own object, and importing the module costs
nothing until a name is used (each pyinfra run compiles what it imports from source: a task pays only for what it
uses)."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

import verify.api as api
from tests.support.venvs import REPO


def test_every_public_name_is_the_object_of_the_module_it_comes_from():
    assert sorted(api.__all__) == sorted({*api._WHERE, "PACKAGE_DIR", "KEPT_READER_SOURCES"})
    for name, (module, attribute) in api._WHERE.items():
        found = importlib.import_module(module)
        assert getattr(api, name) is (found if attribute is None else getattr(found, attribute)), name
    assert [name for name, _ in api.KEPT_READER_SOURCES] == ["verify.safe_read", "verify.report.kept_files"]
    assert api.KEPT_READER_SOURCES[1][1] == (REPO / "verify/report/kept_files.py").read_text(encoding="utf-8")


def test_a_name_it_does_not_have_is_an_attribute_error():
    with pytest.raises(AttributeError, match="nothing_like_this"):
        api.nothing_like_this  # noqa: B018


def test_importing_it_loads_no_module_of_the_verifier_until_a_name_is_used():
    probe = (
        "import json, sys; import verify.api as api; before = sorted(m for m in sys.modules if "
        "m.startswith('verify')); api.rocm_release; print(json.dumps([before, sorted(m for m in sys.modules "
        "if m.startswith(('verify', 'elftools')))]))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    before, after = json.loads(done.stdout)
    assert before == ["verify", "verify.api"]
    assert after == ["verify", "verify.api", "verify.stack", "verify.stack.rocm_release"]
