"""What this machine has for the workbook: ``nbkit doctor`` and notebook 00 read the same report.

The device, which extras are installed and each part's packages (version found, or the one-line
fix), the local model files, the server binaries and the ``python3`` kernel.
"""

from __future__ import annotations

import shutil
import sys
from importlib import metadata
from importlib.util import find_spec

from nbkit.device import device_report
from nbkit.extras import install_line, problems, requirements, status
from nbkit.model_files import model_files_status, smollm2_dir


def doctor_report(build_cache: bool = False) -> dict:
    """Environment, device, which extras are present and each part's packages, local model files,
    server binaries, the kernel."""
    report: dict = {
        "device": device_report(),
        "extras": status(),
        "packages": {},
        "models": {},
        "binaries": {},
        "kernel": {},
    }
    # Each part's packages (nbkit's own requirements, by extra), with the version found or the fix.
    for part, reqs in requirements().items():
        if part not in report["extras"]:
            continue
        report["packages"][part] = {}
        for req in reqs:
            problem = problems([req])
            report["packages"][part][req.name] = (
                {"ok": True, "version": metadata.version(req.name)}
                if not problem
                else {"ok": False, "why": problem[0], "fix": report["extras"][part]["fix"]}
            )
    if build_cache:
        smollm2_dir()
    report["models"] = model_files_status()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    report["binaries"]["chromium"] = (
        {"ok": True, "path": chromium}
        if chromium
        else {
            "ok": False,
            "optional": True,
            "why": "only the browser test tier needs it",
            "fix": "apt-get install chromium",
        }
    )
    try:
        ok = find_spec("llama_cpp") is not None and find_spec("llama_cpp.server") is not None
    except (ImportError, ValueError):
        ok = False
    report["binaries"]["llama_cpp.server"] = (
        {"ok": True, "how": f"{sys.executable} -m llama_cpp.server"}
        if ok
        else {"ok": False, "fix": "pip install 'llama-cpp-python[server]' (builds ~15 min on 2 cores)"}
    )
    try:
        from jupyter_client.kernelspec import KernelSpecManager  # heavy (zmq, traitlets): only here

        specs = KernelSpecManager().find_kernel_specs()
        report["kernel"]["python3"] = {
            "ok": "python3" in specs,
            "path": specs.get("python3"),
            "fix": None if "python3" in specs else f"{sys.executable} -m ipykernel install --sys-prefix",
        }
    except ImportError:
        report["kernel"]["python3"] = {"ok": False, "fix": f"{install_line()} (it brings ipykernel)"}
    return report
