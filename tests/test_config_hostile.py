"""Hostile recipes and overrides: YAML alias bombs, recursive aliases, huge values in error
messages, and a command-line key never blamed on a line of the file."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from webagent_r1.config import MAX_YAML_VALUES, ConfigError, load_config
from webagent_r1.inputs import show

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


def _bomb(levels: int) -> str:
    """The "billion laughs": each level an alias list of nine of the level below."""
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    names = "abcdefghij"
    for i in range(1, levels):
        lines.append(f"{names[i]}: &{names[i]} [" + ",".join([f"*{names[i - 1]}"] * 9) + "]")
    return "\n".join(lines) + f"\nrl:\n  lr: *{names[levels - 1]}\n"


def test_a_yaml_alias_bomb_is_refused_before_it_is_built(tmp_path: Path) -> None:
    """9 levels: 387 million values from a few hundred bytes (142 s and 4.3 GB before)."""
    path = tmp_path / "bomb.yaml"
    path.write_text(_bomb(9))
    assert path.stat().st_size < 400
    t0 = time.perf_counter()
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert time.perf_counter() - t0 < 5.0
    msg = str(e.value)
    assert msg.startswith(f"{path}:6: config file expands to more than {MAX_YAML_VALUES:,} ")
    assert "\n" not in msg


def test_a_small_expansion_and_merge_keys_still_load(tmp_path: Path) -> None:
    path = tmp_path / "ok.yaml"
    path.write_text(
        "base: &base {lr: 2.0e-5, steps: 3}\nrl:\n  <<: *base\n  beta: 0.0\nbc:\n  <<: *base\n"
    )
    with pytest.raises(ConfigError, match="unknown config key 'base'"):
        load_config(path)  # the anchor's own section is not a config key ...
    path.write_text("rl: &base {lr: 2.0e-5, steps: 3}\nbc:\n  <<: *base\n")
    cfg = load_config(path)  # ... but aliases and merge keys within the budget load
    assert cfg.rl.lr == cfg.bc.lr == 2e-5 and cfg.bc.steps == 3


def test_a_recursive_alias_is_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "loop.yaml"
    path.write_text("rl:\n  lr: &a [1, *a]\n")
    with pytest.raises(ConfigError, match=r"loop.yaml:2: config file has an alias inside"):
        load_config(path)


def test_show_cuts_a_value_before_writing_it_out() -> None:
    """A value of 9**9 shared leaves is quoted at once (``repr`` would write 2 GB first)."""
    value: object = ["lol"] * 9
    for _ in range(8):
        value = [value] * 9
    t0 = time.perf_counter()
    text = show(value)
    assert time.perf_counter() - t0 < 1.0 and len(text) <= 60 and text.startswith("[[[")
    assert show("x" * 10**7) == "'" + "x" * 56 + "..."
    assert show("yes") == "'yes'" and show([1, 2]) == "[1, 2]"


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("nosection.x=1", "unknown config key 'nosection'"),
        ("rl.lrr=1", "unknown config key 'rl.lrr'"),
        ("rl.lr=inf", "rl.lr must be a finite number"),
    ],
)
def test_a_command_line_key_is_not_blamed_on_a_line_of_the_file(
    override: str, message: str
) -> None:
    with pytest.raises(ConfigError) as e:
        load_config(CONFIGS / "r1-zero.yaml", [override])
    assert str(e.value).startswith(message), str(e.value)


def test_a_key_of_the_file_is_still_located(tmp_path: Path) -> None:
    path = tmp_path / "r.yaml"
    path.write_text("env:\n  max_turns: 4\nrl:\n  lrr: 1\n")
    with pytest.raises(ConfigError, match=r"r.yaml:4: unknown config key 'rl.lrr'"):
        load_config(path)
    path.write_text("env:\n  max_turns: 4\nrl:\n  lr: 1.0e-5\n")
    with pytest.raises(ConfigError, match=r"^unknown config key 'nosection'; did you mean"):
        load_config(path, ["nosection.x=1"])
    with pytest.raises(ConfigError, match=r"r.yaml:4: rl.lr must be a finite number"):
        load_config(path.write_text("rl:\n  steps: 2\n\n  lr: .nan\n") and path)
