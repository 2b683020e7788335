"""What torch, bitsandbytes and ROCm are on disk, read from files without importing them: a venv's layout
(venv_layout), what `import torch` dlopens (torch_loads), which native library bitsandbytes picks (bnb_library),
ROCm library names (rocm_libraries) and the GPU architectures a build has kernels for (gpu_arch).
"""
