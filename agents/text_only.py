"""TextOnlyAgent: any agent with no tools offered (the "no tools" ablation, and ``vtb label-modes``).

It hides the tool schemas from the wrapped agent, so the model answers from the images and text
alone. Pair it with an env whose tool registry is empty (ablation ``no_tools``) so a call the
model emits anyway is refused by the env rather than executed.
"""

from __future__ import annotations

from typing import Any, Sequence

from vtb_agents.base import Action, Agent, BaseAgent, CallRecord, Observation


class TextOnlyAgent(BaseAgent):
    def __init__(self, inner: Agent):
        super().__init__()
        self.inner = inner
        self.name = f"{inner.name}+no-tools"

    @staticmethod
    def without_tools(observation: Observation) -> dict[str, Any]:
        return {**observation, "tools": []}

    def act(self, observation: Observation) -> Action:
        return self.inner.act(self.without_tools(observation))

    def act_batch(self, observations: Sequence[Observation]) -> list[Action]:
        return self.inner.act_batch([self.without_tools(o) for o in observations])

    def set_episode_seed(self, seed: int | None) -> None:
        if hasattr(self.inner, "set_episode_seed"):
            self.inner.set_episode_seed(seed)

    def drain_records(self) -> list[CallRecord]:
        return self.inner.drain_records()

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "inner": self.inner.describe() if hasattr(self.inner, "describe") else self.inner.name,
        }

    def close(self) -> None:
        if hasattr(self.inner, "close"):
            self.inner.close()
