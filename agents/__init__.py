"""Agents: policies that turn an environment observation into an action."""
