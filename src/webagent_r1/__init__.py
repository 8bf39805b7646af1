"""webagent-r1: train web agents with end-to-end multi-turn RL."""

__version__ = "0.1.0"
