"""The whole deploy: every stage in order, each the same task file that runs alone (pyinfra INVENTORY tasks/X.py).

    pyinfra inventory deploy.py          (the fleet that the top-level `inventory` names; or inventories/<fleet>.py)

`STAGES` is the stage list, once: each stage's name (its task file, tasks/<name>.py, which runs that deploy and nothing
else — tests/test_stages.py) and its deploy. A host that a stage stops (one line says why) runs nothing after it; the
other hosts go on.
"""

from pathlib import Path

from pyinfra import local

from roles.apt_hook.deploy import apt_hook
from roles.boot_check.deploy import boot_check
from roles.colliding_packages.deploy import colliding_packages
from roles.preflight.deploy import preflight
from roles.rocm.deploy import rocm_stage
from roles.settings import require_valid_inventory
from roles.stage import read_ahead_for_stages
from roles.strays.deploy import strays
from roles.venv.deploy import venv
from roles.verification.deploy import verify

STAGES = {
    "preflight": preflight,  # 1: supported OS, GPU, disk, accounts — changes nothing
    "colliding_packages": colliding_packages,  # 2: distro packages that would block amdgpu-install
    "rocm": rocm_stage,  # 3: ROCm 7.2.4 through amdgpu-install, /opt/rocm, render/video
    "venv": venv,  # 4: the torch + bitsandbytes venv (or from the wheelhouse)
    "strays": strays,  # 5: distro ROCm packages: report or remove
    # 6 and 7 before verify, which stops a failing host: every provisioned host gets the re-check after each dpkg run
    # and the once-per-boot re-check (the next kernel takes effect only at the next boot).
    "apt_hook": apt_hook,  # 6: dpkg's post-invoke and apt's DPkg::Post-Invoke run the static check
    "boot_check": boot_check,  # 7: rocm-fleet-boot-check.service, the full check once per boot
    "verify": verify,  # 8: the verifier on the host: linkage, versions, NF4; reports/<host>.json
}

require_valid_inventory()  # before any stage: bad inventory data refuses the whole run, on every host
read_ahead_for_stages(STAGES.values())  # what every stage below asks each host, in one command per host
tasks = Path(__file__).resolve().parent / "tasks"
for stage in STAGES:  # each stage runs as its task file, so the whole deploy and a stage alone run the same code
    local.include(str(tasks / f"{stage}.py"))
