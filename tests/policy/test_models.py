"""Model registry (offline) and the default model generating for a real prompt."""

from __future__ import annotations

import pytest

from webagent_r1.policy.models import ModelNotFoundError, resolve_model


def test_unknown_local_folder_is_a_clear_error(tmp_path) -> None:
    with pytest.raises(ModelNotFoundError, match="does not exist"):
        resolve_model(str(tmp_path / "missing-model"))


def test_folder_without_config_is_rejected(tmp_path) -> None:
    with pytest.raises(ModelNotFoundError, match="config.json"):
        resolve_model(str(tmp_path))


def test_hub_id_passes_through() -> None:
    assert resolve_model("someorg/some-model") == "someorg/some-model"


def test_unprepared_bundled_model_says_what_to_run(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("WEBAGENT_R1_HOME", str(tmp_path))
    with pytest.raises(ModelNotFoundError, match="webagent-r1 model prepare"):
        resolve_model("smollm2-135m-instruct", prepare=False)


@pytest.mark.model
def test_default_model_generates_offline(monkeypatch) -> None:
    # No hub: everything must come from the bundled GGUF / cached conversion.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    from webagent_r1.agent.context import build_messages
    from webagent_r1.config import AgentConfig, ModelConfig
    from webagent_r1.policy.base import SamplingParams
    from webagent_r1.policy.hf import HFEngine
    from webagent_r1.rollout.collect import chat_ids

    engine = HFEngine.from_config(ModelConfig())
    tok = engine.tokenizer
    page = 'URL: http://127.0.0.1/\n[1] link "Mugs"\n[2] textbox "Search"\n[3] button "Go"'
    msgs = build_messages("Find the cheapest red mug.", [], page, AgentConfig())
    ids = chat_ids(tok, msgs)
    greedy = SamplingParams(temperature=0.0, max_new_tokens=24)
    [a, b] = engine.generate_sync([ids, ids], greedy)
    assert 0 < len(a.token_ids) <= 24
    assert a.token_ids == b.token_ids  # greedy is deterministic across the batch
    assert len(a.logprobs) == len(a.token_ids)
    assert all(lp <= 0.0 for lp in a.logprobs)
    assert a.text == tok.decode(a.token_ids, skip_special_tokens=True)
    assert a.text.strip()
    # Batched and single generation agree (left padding is handled).
    [c] = engine.generate_sync([ids[5:]], greedy)
    [d, _] = engine.generate_sync([ids[5:], ids], greedy)
    assert c.token_ids == d.token_ids
