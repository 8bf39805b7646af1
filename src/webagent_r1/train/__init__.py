"""Training: behaviour cloning, the RL loop, checkpoints, distributed setup."""
