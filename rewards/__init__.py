"""Rewards: rubric scores, judges, adaptive mode selection, process metrics, RL reward composition."""

from rewards.compose import EpisodeReward, RewardConfig, default_reward
from rewards.judge import Judge, make_judge
from rewards.mode import ConfusionMatrix, ModeLabelStore, ModeRewardConfig
from rewards.scoring import aggregate, score_rubrics, score_task

__all__ = [
    "ConfusionMatrix",
    "EpisodeReward",
    "Judge",
    "ModeLabelStore",
    "ModeRewardConfig",
    "RewardConfig",
    "aggregate",
    "default_reward",
    "make_judge",
    "score_rubrics",
    "score_task",
]
