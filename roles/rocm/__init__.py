"""Stage 3, ROCm: AMD's installer deb, its apt repositories, `amdgpu-install --usecase=rocm --no-dkms`, /opt/rocm,
and the render/video groups of the workstation users."""
