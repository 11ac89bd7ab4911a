"""Adapters that plug the environment into RL frameworks (verl); TRL uses ``vtb_agents.rollout``."""
