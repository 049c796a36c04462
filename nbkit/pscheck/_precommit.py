#!/usr/bin/env python3
"""pre-commit entry point that needs no installation (``language: script`` in .pre-commit-hooks.yaml).

pscheck's static mode is standard-library only, so the hook runs it straight from pre-commit's
clone of this repository instead of pip-installing nbkit (whose dependencies include torch).
"""

import os
import sys

if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    from nbkit.pscheck.cli import main

    sys.exit(main())
