"""What a bundle's meta.json says of the machine: versions, device name and properties, date."""

from __future__ import annotations

import os


def describe_environment(torch) -> dict:
    """Versions, device name and properties, date."""
    import datetime
    import platform

    env = {"torch_version": torch.__version__, "cuda_version": torch.version.cuda,
           "hip_version": getattr(torch.version, "hip", None), "python_version": platform.python_version(),
           "platform": platform.platform(), "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
           "devices": []}
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            env["devices"].append({k: str(getattr(p, k)) if k == "uuid" else getattr(p, k) for k in (  # _CUuuid
                "name", "major", "minor", "total_memory", "multi_processor_count", "L2_cache_size",
                "max_threads_per_multi_processor", "warp_size", "gcnArchName", "uuid") if hasattr(p, k)})
        env["device_name"] = env["devices"][0]["name"]
    else:
        env["device_name"] = f"CPU ({platform.processor() or platform.machine()}, {os.cpu_count()} cores)"
    return env
