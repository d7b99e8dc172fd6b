"""The mixed-precision quality verdict (benchmarks/precision_quality.py): a bf16 run is
judged against its own seed's float32 run and the float32 seed-to-seed spread."""

import pytest

from benchmarks.precision_quality import verdict


@pytest.mark.parametrize("bf16, expected", [
    ({0: 101.0, 1: 101.5}, "within seed noise"),    # ratios 1.01, 0.995 inside the 1.02 spread
    ({0: 104.0, 1: 99.0}, "outside seed noise"),    # 1.04 beyond it
    ({0: 97.0, 1: 99.0}, "outside seed noise"),     # 0.97 below 1 / 1.02: better is noticed too
])
def test_a_pair_outside_the_float32_seed_spread_is_flagged(bf16, expected):
    result = verdict({0: 100.0, 1: 102.0}, bf16)
    assert result["float32_spread"] == pytest.approx(1.02)
    assert result["verdict"] == expected
    assert result["ratios"][0] == pytest.approx(bf16[0] / 100.0)


def test_one_seed_gives_no_verdict():
    assert verdict({0: 100.0}, {0: 100.5})["verdict"] == "needs 2 seeds"
    assert verdict({0: 100.0}, {})["verdict"] == "no pair yet"
