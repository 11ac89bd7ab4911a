"""Subcommands of the ``vtb`` CLI outside evaluation: ``info`` (load and summarize tasks), ``synth``."""
