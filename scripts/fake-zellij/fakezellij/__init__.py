"""Fake Zellij CLI + server used as a test double (see ../README.md)."""
