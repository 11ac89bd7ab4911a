"""Rewards: rubric scores, judges, adaptive mode selection, process metrics, RL reward composition."""

from vtb_rewards.compose import EpisodeReward, RewardConfig, default_reward
from vtb_rewards.judge import Judge, make_judge
from vtb_rewards.mode import ConfusionMatrix, ModeLabelStore, ModeRewardConfig
from vtb_rewards.scoring import aggregate, score_rubrics, score_task

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
