"""Rewards: rubric scores, judges, adaptive mode selection, process metrics, RL reward composition."""
