"""Another version of deqlab in the same process, for same-process A/B benchmarks."""

from __future__ import annotations

import importlib
import sys
from types import ModuleType


def load_deqlab(src: str) -> ModuleType:
    """The deqlab package under ``src`` (a folder holding deqlab/, e.g. another commit's
    ``src``), imported beside ours: the loaded deqlab modules are set aside, the other tree
    is imported and renamed to ``deqlab_before*``, and the set-aside ones come back."""
    ours = {k: sys.modules.pop(k) for k in list(sys.modules) if k.split(".")[0] == "deqlab"}
    sys.path.insert(0, src)
    try:
        before = importlib.import_module("deqlab")
        if not before.__file__.startswith(src):
            raise SystemExit(f"--baseline-src {src}: no deqlab package there")
    finally:
        sys.path.remove(src)
        for k in [k for k in sys.modules if k.split(".")[0] == "deqlab"]:
            sys.modules["deqlab_before" + k[len("deqlab") :]] = sys.modules.pop(k)
        sys.modules.update(ours)
    return before
