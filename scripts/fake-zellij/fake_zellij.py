"""Entry point of the fake `zellij` (test double; not the real Zellij)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fakezellij.cli import main

if __name__ == "__main__":
    main(sys.argv[1:])
