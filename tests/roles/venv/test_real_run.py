"""tasks/venv.py for real, over SSH, on a local Debian 12 test workstation (localfleet), the way a real fleet runs it:
pyinfra logs in as the admin account with sudo, and the host installs from the wheelhouse the controller prepared —
offline: pip on that host cannot reach PyPI, and python3-venv is missing until the stage installs it. A second run
changes nothing (pyinfra's own --json results).

The runs are the session's venv image (tests/support/venv_image.py): the suite's one fresh torch install over SSH in
push mode, made exactly so, then lent to the hosts of other tests — judged here as the stage's own test. A venv owned
by a workstation user (every entry alice's) is proven in tests/tasks/test_root_never_runs_the_owners_code.py, and by
test_pull_real_run.py and test_relay_real_run.py here, which import torch and bitsandbytes in it."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.root]

VENV = "/opt/rocm-fleet/venv"
SITE = f"{VENV}/lib/python3.11/site-packages"
SET = "cp311-manylinux_2_36_x86_64"
OPERATIONS = ["Venv | python3-venv", f"Venv | Wheelhouse {SET}", f"Venv | venv {VENV}"]


def test_venv_from_the_wheelhouse_offline_then_no_change(venv_image):
    assert not venv_image.pypi_reachable, "the image host reached PyPI: its install would not prove an offline one"

    made = venv_image.made
    assert made.returncode == 0, made.explain()
    assert all(name in made.changed_operations for name in OPERATIONS), made.explain()
    packages = [name for name in made.changed_operations if name.startswith("Venv | torch==2.13.0")]
    assert len(packages) == 1, made.explain()
    # The venv works: torch and bitsandbytes import in it (run in the image host before it was released).
    assert venv_image.imported.split() == ["2.13.0+cpu", "0.50.1"], venv_image.import_errors
    site = venv_image.plain(SITE)
    assert (site / "torch-2.13.0+cpu.dist-info").is_dir() and (site / "bitsandbytes-0.50.1.dist-info").is_dir()

    again = venv_image.again
    assert again.returncode == 0 and again.changed_operations == [], again.explain()
