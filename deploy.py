"""The whole deploy: every stage in order, each the same task file that runs alone (pyinfra INVENTORY tasks/X.py).

    pyinfra inventory deploy.py          (the fleet that the top-level `inventory` names; or inventories/<fleet>.py)

A host that a stage stops (one line says why) runs nothing after it; the other hosts go on.
"""

from pathlib import Path

from pyinfra import local

from roles.settings import require_valid_inventory
from roles.stages import read_ahead_for_stages

STAGES = (
    "preflight",  # 1: supported OS, GPU, disk, accounts — changes nothing
    "colliding_packages",  # 2: distro packages that would block amdgpu-install
    "rocm",  # 3: ROCm 7.2.4 through amdgpu-install, /opt/rocm, render/video
    "venv",  # 4: the torch + bitsandbytes venv (or from the wheelhouse)
    "strays",  # 5: distro ROCm packages: report or remove
    "apt_hook",  # before verify, which stops a failing host: every provisioned host gets the dpkg-run re-check
    "boot_check",  # likewise: the once-per-boot re-check (the next kernel takes effect only at the next boot)
    "verify",  # 6: the verifier on the host: linkage, versions, NF4; reports/<host>.json
)

require_valid_inventory()  # before any stage: bad inventory data refuses the whole run, on every host
read_ahead_for_stages(STAGES)  # what every stage below asks each host, in one command per host
tasks = Path(__file__).resolve().parent / "tasks"
for stage in STAGES:
    local.include(str(tasks / f"{stage}.py"))
