"""Adapters that plug the environment into RL trainers: ``verl`` (+ ``verl_rows``), ``trl``, ``verifiers_env``.

They sit above agents/ and rewards/ (they import the policy-side rollout code); nothing in the env
core imports them, and each needs its framework installed (see docs/training.md)."""
