"""MOCK at the one boundary that cannot exist here: a torch ROCm build that sees a Ryzen desktop's two AMD GPUs.

Like ../torch_reports_hip (HIP 7.2, a gfx1100 discrete GPU), plus the Ryzen 7000's integrated GPU (gfx1036, the
Raphael iGPU) enumerated as device 1, as the ROCm runtime does unless it is disabled in the BIOS. torch's device
properties say which one is integrated (`is_integrated`), as a ROCm build's do. Everything after that is real.
"""

import types

try:
    import torch
except ImportError:
    torch = None

if torch is not None:
    _DEVICES = [
        types.SimpleNamespace(
            name="stand-in Radeon RX 7900 XT (no GPU here)",
            gcnArchName="gfx1100",
            total_memory=20 * 2**30,
            is_integrated=0,
        ),
        types.SimpleNamespace(
            name="stand-in AMD Radeon Graphics (Raphael iGPU, no GPU here)",
            gcnArchName="gfx1036",
            total_memory=2 * 2**30,
            is_integrated=1,
        ),
    ]
    torch.version.hip = "7.2.53211-standin"
    torch.cuda.is_available = lambda: True
    torch.cuda.device_count = lambda: len(_DEVICES)
    torch.cuda.get_device_capability = lambda *args, **kwargs: (11, 0)
    torch.cuda.get_device_properties = lambda index: _DEVICES[index]
    torch._C._cuda_getCurrentRawStream = lambda *args: 0
