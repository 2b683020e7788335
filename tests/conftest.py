"""Top-level test configuration. Shared helpers live in tests/support/."""

import os
import sys

import pytest


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item):
    # Importing pyinfra_cli runs gevent's monkey.patch_all(): every later test in this process would then run its
    # threads as greenlets, and one thread blocked in flock() freezes the whole suite. Load pyinfra's CLI code in a
    # child process instead (tests/support/pyinfra_plan.py, tests/inventory/test_example.py show how).
    if "pyinfra_cli" in sys.modules:
        pytest.fail(
            f"{item.nodeid} imported pyinfra_cli into the pytest process (gevent patches it): "
            "run that code in a subprocess",
            pytrace=False,
        )


@pytest.fixture(scope="session")
def venv_image():
    """A venv the real venv stage made on a local-fleet host, for other hosts to borrow (tests/support/venv_image.py);
    made when a test first asks for it, torn down at the end of the session (after every fleet that borrowed it)."""
    if os.geteuid() != 0:
        pytest.skip("needs root: a local fleet (containers, mounts, sshd)")
    from tests.support.venv_image import venv_image as made

    with made() as image:
        yield image
