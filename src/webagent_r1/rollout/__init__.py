"""Rollouts: collecting episodes (``collect``), env pools (``pool``, ``ray_pool``) and
trajectory files (``trajectories``)."""
