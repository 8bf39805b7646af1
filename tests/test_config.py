"""Config loading: YAML, overrides, unknown keys, validation messages."""

from __future__ import annotations

import pytest

from webagent_r1.config import Config, ConfigError, apply_overrides, load_config


def test_defaults_are_valid() -> None:
    cfg = Config()
    assert cfg.env.max_turns == 15
    assert cfg.model.name == "smollm2-135m-instruct"


def test_yaml_then_overrides(tmp_path) -> None:
    p = tmp_path / "r.yaml"
    p.write_text("seed: 3\nenv:\n  max_turns: 7\nobservation:\n  format: html\n")
    cfg = load_config(p, ["env.max_turns=9", "agent.thinking=false", "env.allow_origins=a,b"])
    assert cfg.seed == 3
    assert cfg.env.max_turns == 9  # the override wins over the file
    assert cfg.observation.format == "html"
    assert cfg.agent.thinking is False
    assert cfg.env.allow_origins == ["a", "b"]


def test_unknown_key_names_closest() -> None:
    with pytest.raises(ConfigError, match="did you mean 'max_turns'"):
        load_config(None, ["env.max_turn=3"])
    with pytest.raises(ConfigError, match="did you mean 'observation'"):
        load_config(None, ["obsrvation.format=html"])


def test_bad_values_say_how_to_fix() -> None:
    with pytest.raises(ConfigError, match="observation.format must be 'html' or 'compact'"):
        load_config(None, ["observation.format=xml"])
    with pytest.raises(ConfigError, match="env.max_turns must be an integer"):
        load_config(None, ["env.max_turns=many"])
    with pytest.raises(ConfigError, match="env.max_turns must be >= 1"):
        load_config(None, ["env.max_turns=0"])
    with pytest.raises(ConfigError, match="true or false"):
        load_config(None, ["agent.thinking=maybe"])
    with pytest.raises(ConfigError, match="section.key=value"):
        load_config(None, ["max_turns"])
    with pytest.raises(ConfigError, match="bc.demo_concurrency must be >= 1"):
        load_config(None, ["bc.demo_concurrency=0"])
    with pytest.raises(ConfigError, match="rl.eval_samples must be >= 1"):
        load_config(None, ["rl.eval_samples=0"])
    with pytest.raises(ConfigError, match="rl.eval_temperature must be > 0"):
        load_config(None, ["rl.eval_samples=4", "rl.eval_temperature=0"])


def test_missing_and_malformed_files(tmp_path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("env: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)
    listy = tmp_path / "list.yaml"
    listy.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_config(listy)


def test_apply_overrides_does_not_mutate_input() -> None:
    data = {"env": {"max_turns": 3}}
    out = apply_overrides(data, ["env.max_turns=4"])
    assert data["env"]["max_turns"] == 3
    assert out["env"]["max_turns"] == 4


def test_recipes_in_configs_load() -> None:
    from pathlib import Path

    recipes = sorted((Path(__file__).parents[1] / "configs").glob("*.yaml"))
    for r in recipes:
        first = r.read_text().splitlines()[0]
        assert first.startswith("#"), f"{r.name} must start with a comment showing its command"
        load_config(r)


def test_tasks_filters_and_time_budget() -> None:
    cfg = load_config(
        None, ["tasks.difficulty=1-2,3-5", "tasks.sites=map", "rl.time_budget_min=50"]
    )
    assert cfg.tasks.difficulty == ["1-2", "3-5"] and cfg.tasks.sites == ["map"]
    assert cfg.rl.time_budget_min == 50
    with pytest.raises(ConfigError, match="tasks.difficulty"):
        load_config(None, ["tasks.difficulty=easy"])
    with pytest.raises(ConfigError, match="time_budget_min"):
        load_config(None, ["rl.time_budget_min=-1"])
