"""RolloutConfig: defaults, overrides, and errors that say how to fix them."""

from __future__ import annotations

import pytest

from webagent_r1.config import Config, ConfigError, load_config
from webagent_r1.rollout.collect import ROLLOUT_MODES, sampling_params


def test_defaults_and_overrides() -> None:
    cfg = Config()
    assert cfg.rollout.mode in ROLLOUT_MODES and cfg.rollout.group_size >= 2
    cfg = load_config(None, ["rollout.mode=lockstep", "rollout.group_size=8", "rollout.top_p=0.9"])
    assert cfg.rollout.mode == "lockstep" and cfg.rollout.group_size == 8
    p = sampling_params(cfg.rollout, seed=4)
    assert (p.temperature, p.top_p, p.max_new_tokens, p.seed) == (1.0, 0.9, 256, 4)


def test_config_modes_match_the_rollout() -> None:
    for mode in ROLLOUT_MODES:
        assert load_config(None, [f"rollout.mode={mode}"]).rollout.mode == mode


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("rollout.mode=sync", "rollout.mode must be 'async' or 'lockstep'"),
        ("rollout.group_size=0", "rollout.group_size must be >= 1"),
        ("rollout.max_concurrent_episodes=0", "max_concurrent_episodes must be >= 1"),
        ("rollout.max_env_retries=-1", "max_env_retries must be >= 0"),
        ("rollout.temperature=-1", "temperature must be >= 0"),
        ("rollout.top_p=0", r"top_p must be in \(0, 1\]"),
        ("rollout.batch_wait_ms=-5", "batch_wait_ms must be >= 0"),
        ("rollout.group_sise=3", "did you mean 'group_size'"),
    ],
)
def test_bad_values(override: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(None, [override])
