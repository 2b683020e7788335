"""Every pin of the stack, in one place. Inventory data may override each one (see roles/settings.py and README).

Nothing here is computed from the network; values that follow from others are derived by the code that needs them
(e.g. the amdgpu-install file name from ROCM_RELEASE and ROCM_BUILD). What a ROCm release *is* (its build number,
driver repository, torch index, the packages that collide with it …) is data, one file per release in
verify/stack/releases/: the pins of the release below are read from its file.
"""

from verify.report.metrics import DEFAULT_DIR as METRICS_DEFAULT_DIR
from verify.stack.rocm_release import rocm_release

# --- ROCm (AMD's apt repositories) -----------------------------------------------------------------------------------
ROCM_RELEASE = "7.2.4"
_RELEASE = rocm_release(ROCM_RELEASE)
# AMD's numeric build of a release: major*10000 + minor*100 + patch (7.2.4 -> 70204). Kept explicit (in the release
# file) because it is part of the installer file name and the package versions, and a typo in the release must not
# silently move it.
ROCM_BUILD = _RELEASE.build
# The Debian revision of the amdgpu-install package itself (amdgpu-install_7.2.4.70204-1_all.deb).
AMDGPU_INSTALL_REVISION = _RELEASE.amdgpu_install_revision
# Optional sha256 of the installer deb, per Ubuntu codename. Unknown here (repo.radeon.com is out of reach from where
# this was written): set it in inventory data once checked, and the download is verified against it.
AMDGPU_INSTALL_SHA256: dict[str, str] = {}
# The kernel-driver ("amdgpu") repository release that ships with ROCm 7.2.4 (amdgpu.list), and the graphics repo.
AMDGPU_DRIVER_RELEASE = _RELEASE.amdgpu_driver_release
REPO_RADEON_BASE_URL = "https://repo.radeon.com"
AMDGPU_INSTALL_USECASE = "rocm"

# --- Python stack --------------------------------------------------------------------------------------------------
TORCH_INDEX_URL = _RELEASE.torch_index_url
TORCH_SPEC = _RELEASE.torch_spec
BITSANDBYTES_VERSION = "0.50.1"
# The model check (verify/checks/model_probe.py) loads a causal LM in 4-bit NF4 through Hugging Face Transformers.
# 5.24.0 is the newest release on PyPI when this was pinned; measured with torch 2.13.0 (CPU) and bitsandbytes 0.50.1 it
# gives bit-identical results to 5.23.0 (the release first tried), with the same requirements (huggingface-hub
# >=1.31,<3; tokenizers >=0.23.1,<0.24; safetensors >=0.8). Its 4-bit loader refuses to run without accelerate
# (>=1.1.0), so accelerate is pinned with it. Their own dependencies are resolved by pip (pyyaml, regex, tqdm, typer,
# …).
TRANSFORMERS_VERSION = "5.24.0"
ACCELERATE_VERSION = "1.15.0"

# --- Host layout and safety margins ---------------------------------------------------------------------------------
VENV_PATH = "/opt/rocm-fleet/venv"
VENV_OWNER = "root"
# Where the controller keeps the amdgpu-install deb on each host: a stable path, so a second run finds it (pyinfra's
# apt.deb(src=URL) downloads to a fresh temporary name and reinstalls every time).
INSTALLER_CACHE_DIR = "/var/cache/rocm-fleet"
# Free disk needed before anything is installed, in GB (10^9 bytes), on each filesystem that will receive ROCm (/opt)
# or the venv. Estimates, not measurements (no AMD host was at hand when this was written):
#   ROCm 7.2.4 `--usecase=rocm` under /opt/rocm-7.2.4 (compilers, rocBLAS/hipBLASLt/MIOpen kernel databases) ~25 GB,
#   plus the downloaded debs in /var/cache/apt/archives (kept by apt)                                           ~ 5 GB;
#   the torch rocm7.2 venv (torch/lib bundles its own ROCm, ~4 GB wheel unpacked to ~12 GB) plus pip's cache   ~ 20 GB.
ROCM_DISK_GB = 30
VENV_DISK_GB = 20
MIN_FREE_DISK_GB = ROCM_DISK_GB + VENV_DISK_GB
# Where the verifier, the apt hook and the boot check write rocm_fleet.prom for node_exporter's textfile collector:
# the directory Debian's prometheus-node-exporter reads (its --collector.textfile.directory default).
NODE_EXPORTER_TEXTFILE_DIR = METRICS_DEFAULT_DIR
# How long apt/dpkg wait for another package run (unattended-upgrades, a user's apt) to release the dpkg lock.
DPKG_LOCK_TIMEOUT = 300
# How old a host's newest full result (the verification's, the boot check's) may be before the status calls it stale:
# a week, so that a fleet re-verified weekly (or rebooted: the boot check) never shows it.
MAX_RESULT_AGE = 7 * 24 * 3600
