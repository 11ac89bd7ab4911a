"""vtb-gym's application layer: evaluation runs, judging, reports and the ``vtb`` command.

It sits on top of the environment core (``vtb_env``), the rewards (``vtb_rewards``) and the
agents (``vtb_agents``); nothing below imports it (see docs/architecture.md).
"""
