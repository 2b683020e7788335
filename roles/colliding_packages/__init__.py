"""Stage 2, colliding packages: distro packages that share a name with an AMD ROCm package and carry a version that
sorts above AMD's, so apt cannot replace them and amdgpu-install fails with unmet dependencies."""
