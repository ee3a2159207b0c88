"""Record the capture environment. python3 captures/h200/env.py --out DIR -> DIR/env.json"""
import argparse
import datetime
import json
import os
import platform
import subprocess

import torch


def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=30).stdout.strip()
    except Exception as ex:
        return f"ERROR {ex!r}"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    env = {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
    }
    try:
        import triton
        env["triton"] = triton.__version__
    except Exception as ex:
        env["triton"] = f"unavailable: {ex!r}"
    if torch.cuda.is_available():
        env["device_count"] = torch.cuda.device_count()
        env["device_name"] = torch.cuda.get_device_name(0)
        env["capability"] = list(torch.cuda.get_device_capability(0))
        pr = torch.cuda.get_device_properties(0)
        props = {}
        for k in dir(pr):
            if k.startswith("_"):
                continue
            try:
                v = getattr(pr, k)
            except Exception:
                continue
            if callable(v):
                continue
            props[k] = v if isinstance(v, (int, float, str, bool, type(None))) else str(v)
        env["device_properties"] = props
    env["nvidia_smi_query"] = sh("nvidia-smi --query-gpu=name,driver_version,vbios_version,memory.total,"
                                 "clocks.max.sm,clocks.max.mem,power.limit,pstate --format=csv")
    env["nvidia_smi"] = sh("nvidia-smi")
    env["nvcc"] = sh("nvcc --version | tail -2")
    env["kernel"] = sh("uname -r")
    with open(os.path.join(args.out, "env.json"), "w") as f:
        json.dump(env, f, indent=1)
    print(json.dumps({k: v for k, v in env.items() if k not in ("nvidia_smi", "device_properties")}, indent=1))
    print(json.dumps(env.get("device_properties"), indent=1))


if __name__ == "__main__":
    main()
