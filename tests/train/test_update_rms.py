"""``update_rms``: the size of AdamW's last step, recomputed from its moments, against the change
the step really made to the weights."""

from __future__ import annotations

import pytest
import torch

from webagent_r1.train.dist import Dist, update_rms


def _measured(params: list[torch.nn.Parameter], before: list[torch.Tensor]) -> float:
    sq = sum(float((p.detach() - b).pow(2).sum()) for p, b in zip(params, before, strict=True))
    n = sum(p.numel() for p in params)
    return (sq / n) ** 0.5


@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
def test_update_rms_is_the_rms_change_of_the_weights(weight_decay: float) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Linear(16, 3))
    params = list(model.parameters())
    opt = torch.optim.AdamW(params, lr=1e-3, betas=(0.9, 0.99), weight_decay=weight_decay)
    for step in range(4):
        for p in params:
            p.grad = torch.randn_like(p) * (10.0**-step)  # gradients of shrinking size
        before = [p.detach().clone() for p in params]
        opt.step()
        got = update_rms(opt, Dist())
        assert got == pytest.approx(_measured(params, before), rel=1e-3), step
        if step == 0:  # the first step is lr times the gradient's sign on every weight
            assert got == pytest.approx(1e-3, rel=1e-3 + weight_decay * 1e-2)


def test_update_rms_skips_parameters_never_stepped_and_other_optimizers() -> None:
    a, b = torch.nn.Parameter(torch.zeros(4)), torch.nn.Parameter(torch.zeros(100))
    opt = torch.optim.AdamW([a, b], lr=0.5, weight_decay=0.0)
    assert update_rms(opt, Dist()) == 0.0  # no step yet
    a.grad = torch.tensor([1.0, -2.0, 3.0, -4.0])
    opt.step()  # b has no gradient: AdamW leaves it, and so does the RMS
    assert update_rms(opt, Dist()) == pytest.approx(0.5, rel=1e-6)
    sgd = torch.optim.SGD([a], lr=0.1)
    a.grad = torch.ones(4)
    sgd.step()
    assert update_rms(sgd, Dist()) == 0.0
