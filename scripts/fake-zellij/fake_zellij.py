"""Entry point of the fake `zellij` (test double; not the real Zellij)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
if sys.flags.no_site:  # the launcher ran the venv's python with -S: its packages (ckdl) all the same
    sys.path.append(os.path.join(os.path.dirname(os.path.dirname(sys.executable)), "lib",
                                 f"python{sys.version_info[0]}.{sys.version_info[1]}", "site-packages"))

from fakezellij.cli import main

if __name__ == "__main__":
    main(sys.argv[1:])
