"""roles/preflight/deploy.reads: what preflight reads ahead of a host — here, which KernelDriver question it asks."""

from __future__ import annotations

from roles.debian.facts import KernelDriver
from roles.preflight import deploy as preflight
from roles.rocm import deploy as rocm
from roles.settings import check_data


def _kernel_asks(reads) -> list:
    return [ask.key() for ask in reads if ask.fact is KernelDriver]


def test_where_rocm_is_installed_preflight_asks_the_rocm_stages_kernel_question_so_one_read_serves_both():
    settings, _ = check_data("ws1", {"rocm_install": "install", "gpu_required": False})
    assert _kernel_asks(preflight.reads(settings)) == _kernel_asks(rocm.reads(settings)) == [("KernelDriver", ())]


def test_where_rocm_is_skipped_the_kernel_question_leaves_out_apt():
    """Nothing installs AMD's kernel packages there (the ROCm stage does not run), so apt is not asked about them."""
    settings, _ = check_data("ws1", {"rocm_install": "skip", "gpu_required": False})
    assert _kernel_asks(rocm.reads(settings)) == []
    assert _kernel_asks(preflight.reads(settings)) == [("KernelDriver", (("apt_candidates", False),))]
    assert "apt-cache" not in KernelDriver().command(apt_candidates=False)
    assert "apt-cache pkgnames" in KernelDriver().command()
