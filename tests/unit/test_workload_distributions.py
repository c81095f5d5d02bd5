"""Length distributions: seeded, clamped, with the moments they were asked for."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from gputui.errors import UsageError
from gputui.workloads.distributions import (
    CHUNK,
    EmpiricalDist,
    FixedDist,
    LengthStream,
    LognormalDist,
    NormalDist,
    UniformDist,
    parse_dist,
)


def draw(dist: object, seed: int = 1, n: int = 40_000) -> np.ndarray:
    assert hasattr(dist, "sample")
    return dist.sample(np.random.default_rng(seed), n)  # type: ignore[no-any-return]


def test_fixed_is_fixed() -> None:
    assert set(draw(FixedDist(tokens=1024)).tolist()) == {1024}


def test_uniform_covers_both_ends_evenly() -> None:
    values = draw(UniformDist(min=128, max=131))
    assert set(values.tolist()) == {128, 129, 130, 131}
    counts = np.bincount(values - 128)
    assert counts.min() > 0.23 * len(values)


def test_normal_moments_and_clamp() -> None:
    wide = draw(NormalDist(mean=1024, std=256, min=1, max=10_000))
    assert wide.mean() == pytest.approx(1024, rel=0.01)
    assert wide.std() == pytest.approx(256, rel=0.02)
    narrow = draw(NormalDist(mean=1024, std=256, min=900, max=1100))
    assert narrow.min() == 900
    assert narrow.max() == 1100


def test_lognormal_has_the_mean_and_std_of_the_lengths() -> None:
    values = draw(LognormalDist(mean=1024, std=512, min=1, max=100_000), n=200_000)
    assert values.mean() == pytest.approx(1024, rel=0.02)
    assert values.std() == pytest.approx(512, rel=0.05)
    assert np.median(values) < values.mean()  # right-skewed
    clamped = draw(LognormalDist(mean=1024, std=1024, min=64, max=2048))
    assert clamped.min() >= 64
    assert clamped.max() == 2048


def test_default_upper_clamp_is_six_sigma() -> None:
    assert NormalDist(mean=100, std=10).bounds() == (1, 160)


def test_empirical_draws_only_dataset_values() -> None:
    dist = EmpiricalDist(dataset="d.jsonl", values=(10, 20, 30))
    values = draw(dist)
    assert set(values.tolist()) == {10, 20, 30}
    assert dist.params()["n"] == 3
    assert "values" not in dist.params()
    clamped = EmpiricalDist(dataset="d.jsonl", values=(10, 20, 30), max=25)
    assert set(draw(clamped).tolist()) == {10, 20, 25}


def test_same_seed_same_lengths_different_seed_different() -> None:
    dist = LognormalDist(mean=512, std=256)
    assert np.array_equal(draw(dist, seed=7), draw(dist, seed=7))
    assert not np.array_equal(draw(dist, seed=7), draw(dist, seed=8))


def test_stream_is_deterministic_in_seed_and_request_id() -> None:
    dist = NormalDist(mean=500, std=100)
    ids = [0, 5, CHUNK - 1, CHUNK, 3 * CHUNK + 17, 1]
    forward = [LengthStream(dist, 3, 1).value(i) for i in ids]
    one = LengthStream(dist, 3, 1)
    shuffled = {i: one.value(i) for i in reversed(ids)}
    assert forward == [shuffled[i] for i in ids]
    other_stream = [LengthStream(dist, 3, 2).value(i) for i in ids]
    assert forward != other_stream


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1024", FixedDist(tokens=1024)),
        ("fixed:64", FixedDist(tokens=64)),
        ("uniform:128,2048", UniformDist(min=128, max=2048)),
        ("normal:mean=1024,std=256,max=4096", NormalDist(mean=1024, std=256, max=4096)),
        ("lognormal:1024,512,64,8192", LognormalDist(mean=1024, std=512, min=64, max=8192)),
        ("empirical:data/x.jsonl", EmpiricalDist(dataset="data/x.jsonl")),
    ],
)
def test_parse_dist(text: str, expected: object) -> None:
    assert parse_dist(text, "--input-dist") == expected


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("gauss:1,2", "expected N or KIND:PARAMS"),
        ("uniform:10,5", "min <= max"),
        ("normal:mean=x,std=1", "mean"),
        ("lognormal:100,0", "std"),
        ("fixed:1,2", "too many values"),
        ("empirical:", "needs a dataset file"),
        ("normal:mean=10,std=1,shape=3", "shape"),
    ],
)
def test_parse_dist_errors_name_the_flag(text: str, fragment: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_dist(text, "--input-dist")
    message = str(info.value)
    assert message.startswith("--input-dist: ")
    assert fragment in message
    assert "\n" not in message


def test_models_reject_bad_parameters() -> None:
    with pytest.raises(ValidationError):
        UniformDist(min=10, max=5)
    with pytest.raises(ValidationError):
        NormalDist(mean=-1, std=1)
    with pytest.raises(ValidationError):
        NormalDist(mean=10, std=1, min=50, max=20)
