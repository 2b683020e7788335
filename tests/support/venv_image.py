"""One venv made by the real venv stage, lent to the local-fleet hosts of tests that need a provisioned venv but do
not test how it is made (the apt hook, the verification, day-2 drift, the whole deploy's verdicts) — so that the
suite runs pip over the torch wheelhouse once, not once per host (each run byte-compiles torch, sympy and networkx:
about 25 s of CPU).

    with venv_image() as image:          # tests/conftest.py: the session's `venv_image` fixture
        image.lend(fleet.host("ws1"))    # before the host's first deploy

The image is made as a deploy makes it: `pyinfra INVENTORY tasks/venv.py` over SSH into a local Debian 12 workstation
(the test fleet's defaults: venv_path /opt/rocm-fleet/venv, owned by root, from the pushed wheelhouse), on a host that
lacks python3-venv and cannot reach PyPI; the stage is run twice, and both runs are kept on the image (`made`,
`again`) for tests/roles/venv/test_real_run.py, the stage's own test of a fresh host, to judge — so the suite installs
torch over SSH once for both. The fixture itself checks only that the stage really installed the venv. That host is
then released (its sshd stopped, its root unmounted) and its own layer kept as it is until the session ends.

A borrowing host gets the image's venv and its wheelhouse copy (/var/cache/rocm-fleet/wheelhouse, with the upload's
sha256 record) as overlay mounts: the image is the read-only lower layer, and whatever the host changes (a planted
file, a replaced library, pip) lands in an upper layer of its own, inside its fleet's directory — so the fleet's
teardown unmounts and deletes it, and no host sees another's changes. Its venv stage then finds everything in place
and changes nothing, as on a host provisioned before.

How a fresh host gets its venv is proven where the stage is the subject: the image itself (above), bin/demo's test
(tests/e2e/test_demo.py, three fresh hosts), tests/roles/venv/ and tests/tasks/test_root_never_runs_the_owners_code.py
(a venv owned by a workstation user).
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from localfleet.base import overlay_or_copy, own_layer
from localfleet.release import release_tree
from roles.pins import VENV_PATH
from roles.venv.deploy import REMOTE_WHEELHOUSE
from tests.support.chroot_hosts import PyinfraRun
from tests.support.fleet_deploy import deploy

LENT = (VENV_PATH, REMOTE_WHEELHOUSE)


@dataclass(frozen=True)
class VenvImage:
    root: Path  # the image host's root (released: nothing runs or is mounted in it while the session lasts)
    made: PyinfraRun  # the venv stage's first run on that host: it made the venv
    again: PyinfraRun  # the stage run once more right after
    pypi_reachable: bool  # whether that host could reach PyPI before the first run (it must not: offline install)
    imported: str  # what `import torch, bitsandbytes` printed on stdout in the made venv: their versions
    import_errors: str  # and the tail of its stderr (bitsandbytes warns there on a CPU), to explain a failure

    def lend(self, host) -> None:
        """Mount the image's venv and wheelhouse copy into `host` (a FleetHost that has neither), each as an overlay
        whose writable layer lies in the host's fleet directory (released and deleted with the fleet). Where that
        directory cannot hold an overlay's writable layer (as localfleet's overlay_base finds: a cache on overlayfs,
        e.g. a container's root), they are copied in instead, and go with the host's root."""
        for path in LENT:
            _make_parents_like(self.files(), host.root, Path(path).parent)
            target = host.root / path.lstrip("/")
            target.mkdir()
            layer = host.root.parent / "lent" / path.strip("/").replace("/", "_")
            overlay_or_copy(self.plain(path), target, layer / "upper", layer / "work")

    def files(self) -> Path:
        """Where the image host's files lie as plain files: its own layer (all the stage made is there; nothing lent
        comes from the base), or its root where localfleet copied the base. Never through an overlay's mount: an
        overlay whose lower layer is another overlay makes /proc/PID/maps name the files it maps with paths of the
        wrong mount (seen on Linux 6.18), and the verifier's runtime.maps check compares those with its prediction."""
        layer = own_layer(self.root)
        return layer if layer.is_dir() else self.root

    def plain(self, path: str) -> Path:
        found = self.files() / path.lstrip("/")
        assert found.is_dir(), f"the venv image has no {path} ({found})"
        return found


def _same_owner_and_mode(model: Path, path: Path) -> None:
    info = model.lstat()
    os.chown(path, info.st_uid, info.st_gid)
    path.chmod(stat.S_IMODE(info.st_mode))


def _make_parents_like(image_root: Path, host_root: Path, directory: Path) -> None:
    """Create `directory` (absolute, inside the roots) and its missing parents in `host_root` as the image has them."""
    missing = []
    while not (host_root / str(directory).lstrip("/")).exists():
        missing.append(directory)
        directory = directory.parent
    for made in reversed(missing):
        path = host_root / str(made).lstrip("/")
        path.mkdir()
        _same_owner_and_mode(image_root / str(made).lstrip("/"), path)


@contextlib.contextmanager
def venv_image() -> Iterator[VenvImage]:
    """A one-host fleet whose venv the real venv stage made (checked), then released — its sshd stopped, its root
    unmounted, so its own layer is plain files that nothing runs in or writes to — until the block ends; torn down
    then, also after a failure.

    A chroot host, not a booted one: a booted host's systemd and journald would go on running and writing in the layer
    lent to other hosts, its overlay still mounted in its own namespace after the release, and nspawn's lock of the
    root (named by the overlay's device) would be left behind by the teardown."""
    from localfleet.fleet import Fleet

    with Fleet.up(n=1, login="admin", boot=False) as fleet:
        host = fleet.host("ws1")
        # A workstation without python3-venv (the stage installs it) and without PyPI (pip installs offline).
        host.run(["apt-get", "purge", "-y", "-q", "python3-venv", "python3.11-venv"])
        pypi = host.run(
            ["python3", "-c", "import urllib.request; urllib.request.urlopen('https://pypi.org/simple/', timeout=10)"],
            check=False,
        )
        run = deploy(fleet.inventory, "tasks/venv.py")
        assert run.returncode == 0, run.explain()
        # The stage really made it here: the wheelhouse pushed, the venv created, torch and bitsandbytes installed.
        made = [
            name
            for name in run.changed_operations
            if name.startswith(("Venv | Wheelhouse ", "Venv | venv ", "Venv | torch=="))
        ]
        assert len(made) == 3, run.explain()
        again = deploy(fleet.inventory, "tasks/venv.py")
        # -B: the check writes no bytecode into the image, which the borrowers' hosts must find as the stage left it.
        imported = host.run(
            [
                f"{VENV_PATH}/bin/python",
                "-B",
                "-c",
                "import torch, bitsandbytes; print(torch.__version__, bitsandbytes.__version__)",
            ],
            check=False,
        )
        host.stop_sshd()  # from here on nothing reaches it: the lent layers stay as the stage left them
        # Its root's overlay too: a directory lent as another overlay's lower layer must not be any mount's upper
        # layer (the kernel warns of undefined behaviour when files are reached through both).
        release_tree(host.root)
        yield VenvImage(
            host.root,
            made=run,
            again=again,
            pypi_reachable=pypi.returncode == 0,
            imported=imported.stdout,
            import_errors=imported.stderr[-2000:],
        )
