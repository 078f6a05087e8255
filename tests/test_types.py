"""The shared contracts: an optimizer config is checked once, where it is built, by every layer."""

from __future__ import annotations

import math

import pytest

from graphstore.types import OptimizerConfig


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"kind": "sgd", "lr": 0.1}, "unknown optimizer kind 'sgd'"),
        ({"kind": "adagrad", "lr": 0.0}, "lr must be a finite number > 0, got 0.0"),
        ({"kind": "adagrad", "lr": -1.0}, "lr must be a finite number > 0"),
        ({"kind": "adagrad", "lr": math.nan}, "lr must be finite, got nan"),
        ({"kind": "adagrad", "lr": "0.1"}, "lr must be a number"),
        ({"kind": "adagrad", "lr": True}, "lr must be a number"),
        ({"kind": "adam", "lr": 0.1, "beta1": 1.0}, r"beta1 \(betas\[0\]\) must be in \[0, 1\), got 1.0"),
        ({"kind": "adam", "lr": 0.1, "beta2": -0.1}, "beta2 \\(betas\\[1\\]\\) must be in"),
        ({"kind": "adagrad", "lr": 0.1, "eps": -1}, "eps must be a finite number >= 0"),
        ({"kind": "adagrad", "lr": 0.1, "eps": math.inf}, "eps must be finite"),
    ],
)
def test_optimizer_config_rejects_bad_values_naming_the_field(kwargs, match):
    with pytest.raises(ValueError, match=match):
        OptimizerConfig(**kwargs)


def test_optimizer_config_accepts_the_documented_ranges():
    config = OptimizerConfig(kind="adam", lr=1e-3, eps=0.0, beta1=0.0, beta2=0.999)
    assert (config.kind, config.lr, config.eps, config.beta1) == ("adam", 1e-3, 0.0, 0.0)
