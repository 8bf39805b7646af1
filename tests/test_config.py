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


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("env.max_turns=nan", r"env.max_turns must be an integer, got 'nan' \(e.g. env.max_turns="),
        ("env.max_turns=inf", "env.max_turns must be an integer, got 'inf'"),
        ("env.max_turns=1e400", "env.max_turns must be an integer, got '1e400'"),
        ("env.max_turns=.nan", "env.max_turns must be an integer, got nan"),
        ("env.max_turns=" + "9" * 30, "env.max_turns=9+ is out of range"),
        ("env.max_turns=" + "9" * 5000, "env.max_turns=.9+... is out of range"),
        ("seed=nan", "seed must be an integer, got 'nan'"),
        ("seed=-.inf", "seed must be an integer"),
        ("rl.lr=inf", r"rl.lr must be a finite number, got 'inf' \(e.g. rl.lr=2e-05\)"),
        ("rl.lr=.inf", "rl.lr must be a finite number"),
        ("rl.lr=nan", "rl.lr must be a finite number"),
        ("rl.lr=1e400", "rl.lr must be a finite number, got '1e400'"),
        ("rl.lr=true", "rl.lr must be a number, got True"),
        ("bc.lr=inf", "bc.lr must be a finite number"),
        ("rl.beta=inf", "rl.beta must be a finite number"),
        ("rollout.temperature=inf", "rollout.temperature must be a finite number"),
        ("rollout.top_p=nan", "rollout.top_p must be a finite number"),
        ("train.adam_betas=[0.9, .nan]", "train.adam_betas must be a finite number"),
    ],
)
def test_non_finite_and_out_of_range_numbers_are_refused(override: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as e:
        load_config(None, [override])
    assert "\n" not in str(e.value)


def test_a_config_built_in_code_is_checked_for_finite_numbers() -> None:
    import dataclasses

    from webagent_r1.config import RLConfig

    with pytest.raises(ConfigError, match="rl.lr must be a finite number"):
        Config(rl=RLConfig(lr=float("inf")))
    with pytest.raises(ConfigError, match="rl.beta must be a finite number"):
        dataclasses.replace(Config(), rl=RLConfig(beta=float("inf")))
    with pytest.raises(ConfigError, match="seed=.* is out of range"):
        Config(seed=2**70)


def test_duplicate_yaml_keys_are_refused_with_key_and_line(tmp_path) -> None:
    p = tmp_path / "r.yaml"
    p.write_text("seed: 1\nrl:\n  lr: 1.0e-5\n  steps: 3\n  lr: 1.0e-3\n")
    with pytest.raises(ConfigError, match=rf"^{p}:5: key 'lr' is given twice \(first on line 3\)"):
        load_config(p)
    p.write_text("rl:\n  lr: 1.0e-5\nrl:\n  steps: 3\n")
    with pytest.raises(ConfigError, match=rf"^{p}:3: key 'rl' is given twice"):
        load_config(p)
    # a YAML merge key is not a duplicate
    p.write_text("rl: &base\n  lr: 1.0e-5\nbc:\n  <<: {lr: 1.0e-3}\n  steps: 3\n")
    assert load_config(p).bc.lr == 1e-3


def test_config_files_that_are_not_utf8_or_nest_too_deep_are_one_line_errors(tmp_path) -> None:
    p = tmp_path / "r.yaml"
    p.write_bytes("seed: 4\nrun_dir: caf\u00e9\n".encode("utf-16"))
    assert load_config(p).run_dir == "caf\u00e9"  # a byte-order mark says UTF-16
    p.write_bytes("seed: 4\nrun_dir: caf\u00e9\n".encode("latin-1"))
    with pytest.raises(ConfigError, match="r.yaml:2: not UTF-8 text"):
        load_config(p)
    p.write_text("seed: " + "[" * 50_000 + "]" * 50_000 + "\n")
    with pytest.raises(ConfigError, match="nests too deeply"):
        load_config(p)
    p.write_text("seed: " + "9" * 5000 + "\n")
    with pytest.raises(ConfigError, match="unreadable value"):
        load_config(p)
    p.write_text("rl:\n  lr: [1,\n")
    with pytest.raises(ConfigError, match="not valid YAML") as e:
        load_config(p)
    assert "\n" not in str(e.value)


def test_no_generated_override_or_recipe_raises_anything_but_config_error(tmp_path) -> None:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from webagent_r1.config import to_dict

    def leaves(d: dict, prefix: str = "") -> list[str]:
        return [
            k
            for key, v in d.items()
            for k in (leaves(v, f"{prefix}{key}.") if isinstance(v, dict) else [prefix + key])
        ]

    keys = leaves(to_dict(Config()))
    values = st.one_of(
        st.sampled_from(["nan", "inf", "-inf", "1e400", ".nan", "[/red]", "true", "null", "[", ""]),
        st.text(max_size=10),
        st.integers(min_value=-(2**80), max_value=2**80).map(str),
        st.floats().map(repr),
    )

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(st.tuples(st.sampled_from(keys), values), max_size=3))
    def check(pairs: list[tuple[str, str]]) -> None:
        try:
            load_config(None, [f"{k}={v}" for k, v in pairs])
        except ConfigError as e:
            assert "\n" not in str(e)

    check()


def test_a_bad_value_of_a_recipe_names_its_file_and_line(tmp_path) -> None:
    p = tmp_path / "r.yaml"
    p.write_text("seed: 1\nrl:\n  steps: 3\n  lr: .inf\nenv:\n  max_turns: 0\n")
    with pytest.raises(ConfigError, match=rf"^{p}:4: rl.lr must be a finite number, got inf"):
        load_config(p)
    with pytest.raises(ConfigError, match=rf"^{p}:6: env.max_turns must be >= 1"):
        load_config(p, ["rl.lr=1e-5"])
    # a value given on the command line is named by the override, not by the file
    with pytest.raises(ConfigError, match="^env.max_turns must be an integer, got 'nan'"):
        load_config(p, ["rl.lr=1e-5", "env.max_turns=nan"])
    p.write_text("rl:\n  steps: 3\n  lrr: 1\n")
    with pytest.raises(ConfigError, match=rf"^{p}:3: unknown config key 'rl.lrr'"):
        load_config(p)
