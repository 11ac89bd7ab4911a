"""Subcommands of the ``vtb`` CLI that have no other natural home."""
