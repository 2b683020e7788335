"""MOCK at the one boundary that cannot exist here: a torch ROCm build with a visible AMD GPU.

Put this directory on PYTHONPATH of a process whose python has the *CPU* torch 2.13.0: at start-up it makes torch
report HIP 7.2 and one gfx1100 device, which is all bitsandbytes 0.50.1 looks at to pick `libbitsandbytes_rocm72.so`.
Everything after that is real: bitsandbytes' real selection code, a real ctypes dlopen of the real wheel's library by
the real loader, which fails because this machine has no /opt/rocm (libhipblas.so.3), and bitsandbytes' real
fallback to its mock library. A python without torch (the verifier's own) is left alone.
STANDIN_GFX_ARCH names another arch (e.g. gfx942, a CDNA3 Instinct), for what bitsandbytes' dispatch answers there.
"""

import os
import types

try:
    import torch
except ImportError:
    torch = None

if torch is not None:
    torch.version.hip = "7.2.53211-standin"
    torch.cuda.is_available = lambda: True
    torch.cuda.device_count = lambda: 1
    torch.cuda.get_device_capability = lambda *args, **kwargs: (11, 0)
    torch.cuda.get_device_properties = lambda index: types.SimpleNamespace(
        name="stand-in Radeon (no GPU here)",
        gcnArchName=os.environ.get("STANDIN_GFX_ARCH", "gfx1100"),
        total_memory=20 * 2**30,
    )
    # bitsandbytes' CUDA/ROCm backend module reads this at import; the CPU build has no such attribute.
    torch._C._cuda_getCurrentRawStream = lambda *args: 0
