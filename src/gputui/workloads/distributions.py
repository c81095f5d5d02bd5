"""Token-length distributions: fixed, uniform, normal, lognormal (clamped) and empirical.

Contract: a distribution is a frozen pydantic model (a scenario's `input`/`output` table, or a
`--input-dist` flag) with `kind` as its tag. Samples are integers clamped to `[min, max]`.
`LengthStream` draws request k's length deterministically from (seed, stream, k): lengths come in
chunks of `CHUNK` from `numpy.random.default_rng([seed, stream, chunk])`, so the same seed gives the
same lengths whatever order requests are asked for in, and `value()` costs an array lookup.
Lognormal is given by the mean and standard deviation of the lengths themselves (not of their log),
because that is how people describe traffic; `normal`/`lognormal` default to `max = mean + 6 std`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Final, Literal

import numpy as np
import numpy.typing as npt
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    NonNegativeFloat,
    PositiveFloat,
    PositiveInt,
    ValidationError,
    model_validator,
)

from gputui.errors import UsageError
from gputui.jsontypes import JsonObject

IntArray = npt.NDArray[np.int64]
CHUNK: Final = 1024
"""Lengths drawn per generator: request k's length is element k % CHUNK of chunk k // CHUNK."""


class _Dist(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    def bounds(self) -> tuple[int, int]:
        """The smallest and largest length this distribution can give."""
        raise NotImplementedError

    def raw(self, rng: np.random.Generator, size: int) -> npt.NDArray[np.float64]:
        """Unclamped draws."""
        raise NotImplementedError

    def sample(self, rng: np.random.Generator, size: int) -> IntArray:
        """`size` lengths, rounded and clamped to `bounds()`."""
        lo, hi = self.bounds()
        return np.clip(np.rint(self.raw(rng, size)), lo, hi).astype(np.int64)

    def nominal(self) -> float:
        """The central length (for headers and for `workload.input_tokens`)."""
        raise NotImplementedError

    def params(self) -> JsonObject:
        """The parameters, for the snapshot."""
        return self.model_dump(mode="json")

    def describe(self) -> str:
        """e.g. `normal 1024±256 [64..4096]`."""
        lo, hi = self.bounds()
        return f"{self.kind_name()}{self._shape()} [{lo}..{hi}]"

    def kind_name(self) -> str:
        """The `kind` tag."""
        return str(getattr(self, "kind", "?"))

    def _shape(self) -> str:
        return ""


class FixedDist(_Dist):
    """Every request gets `tokens`."""

    kind: Literal["fixed"] = "fixed"
    tokens: PositiveInt

    def bounds(self) -> tuple[int, int]:
        return self.tokens, self.tokens

    def raw(self, rng: np.random.Generator, size: int) -> npt.NDArray[np.float64]:  # noqa: ARG002
        return np.full(size, float(self.tokens))

    def nominal(self) -> float:
        return float(self.tokens)

    def describe(self) -> str:
        return f"fixed {self.tokens}"


class UniformDist(_Dist):
    """Integers from `min` to `max`, both included, equally likely."""

    kind: Literal["uniform"] = "uniform"
    min: PositiveInt
    max: PositiveInt

    @model_validator(mode="after")
    def _ordered(self) -> UniformDist:
        if self.min > self.max:
            raise ValueError(f"expected min <= max, got min={self.min} max={self.max}")
        return self

    def bounds(self) -> tuple[int, int]:
        return self.min, self.max

    def raw(self, rng: np.random.Generator, size: int) -> npt.NDArray[np.float64]:
        return rng.integers(self.min, self.max + 1, size=size).astype(np.float64)

    def nominal(self) -> float:
        return (self.min + self.max) / 2


class _Shaped(_Dist):
    """A distribution given by mean and std, clamped to [min, max]."""

    mean: PositiveFloat
    std: NonNegativeFloat
    min: PositiveInt = 1
    max: PositiveInt | None = None
    """Default: mean + 6 std (rounded up)."""

    @model_validator(mode="after")
    def _ordered(self) -> _Shaped:
        lo, hi = self.bounds()
        if lo > hi:
            raise ValueError(f"expected min <= max, got min={lo} max={hi}")
        return self

    def bounds(self) -> tuple[int, int]:
        hi = self.max if self.max is not None else math.ceil(self.mean + 6 * self.std)
        return self.min, hi

    def nominal(self) -> float:
        return float(self.mean)

    def _shape(self) -> str:
        return f" {self.mean:g}±{self.std:g}"


class NormalDist(_Shaped):
    """Normal lengths, rounded and clamped."""

    kind: Literal["normal"] = "normal"

    def raw(self, rng: np.random.Generator, size: int) -> npt.NDArray[np.float64]:
        return rng.normal(self.mean, self.std, size=size)


class LognormalDist(_Shaped):
    """Lognormal lengths with this mean and std (of the lengths, not of their log), clamped."""

    kind: Literal["lognormal"] = "lognormal"
    std: PositiveFloat

    def raw(self, rng: np.random.Generator, size: int) -> npt.NDArray[np.float64]:
        sigma2 = math.log1p((self.std / self.mean) ** 2)
        mu = math.log(self.mean) - sigma2 / 2
        return rng.lognormal(mu, math.sqrt(sigma2), size=size)


class EmpiricalDist(_Dist):
    """Lengths drawn (with replacement) from a dataset's measured lengths."""

    kind: Literal["empirical"] = "empirical"
    dataset: str
    """A ShareGPT JSON or JSONL file; relative paths are from the scenario file's folder."""
    format: Literal["auto", "sharegpt", "jsonl"] = "auto"
    min: PositiveInt | None = None
    max: PositiveInt | None = None
    values: tuple[PositiveInt, ...] = ()
    """The dataset's lengths, filled in when the workload is prepared (never in a scenario)."""

    def bounds(self) -> tuple[int, int]:
        data_lo = min(self.values) if self.values else 1
        data_hi = max(self.values) if self.values else 1
        lo = self.min if self.min is not None else data_lo
        hi = self.max if self.max is not None else data_hi
        return lo, max(lo, hi)

    def raw(self, rng: np.random.Generator, size: int) -> npt.NDArray[np.float64]:
        if not self.values:
            raise ValueError("empirical distribution used before its dataset was read")
        return rng.choice(np.asarray(self.values, dtype=np.float64), size=size)

    def nominal(self) -> float:
        return float(np.mean(self.values)) if self.values else 0.0

    def params(self) -> JsonObject:
        out: JsonObject = self.model_dump(mode="json", exclude={"values"})
        if self.values:
            values = np.asarray(self.values)
            out.update(n=len(values), mean=float(values.mean()), p50=float(np.median(values)))
        return out

    def describe(self) -> str:
        lo, hi = self.bounds()
        known = f"{len(self.values)} lengths " if self.values else ""
        return f"empirical {Path(self.dataset).name} {known}[{lo}..{hi}]"


def _int_as_fixed(value: object) -> object:
    """`input = 1024` in a scenario means `{kind = "fixed", tokens = 1024}`."""
    if isinstance(value, int) and not isinstance(value, bool):
        return {"kind": "fixed", "tokens": value}
    return value


LengthDist = Annotated[
    FixedDist | UniformDist | NormalDist | LognormalDist | EmpiricalDist,
    Field(discriminator="kind"),
    BeforeValidator(_int_as_fixed),
]
DIST_KINDS: Final = frozenset({"fixed", "uniform", "normal", "lognormal", "empirical"})


class _Holder(BaseModel):
    dist: LengthDist


_POSITIONAL: Final = {
    "fixed": ("tokens",),
    "uniform": ("min", "max"),
    "normal": ("mean", "std", "min", "max"),
    "lognormal": ("mean", "std", "min", "max"),
}


def parse_dist(text: str, flag: str) -> LengthDist:
    """A distribution from a flag (raises UsageError naming the flag).

    Forms: `1024`, `uniform:128,2048`, `normal:mean=1024,std=256,max=4096`, `lognormal:1024,512`,
    `empirical:FILE`.
    """
    kind, _, rest = text.strip().partition(":")
    kind = kind.strip().lower()
    fields: dict[str, str | int]
    if kind.isdigit() and not rest:
        fields = {"kind": "fixed", "tokens": int(kind)}
    elif kind == "empirical":
        if not rest:
            raise UsageError(f"{flag}: empirical needs a dataset file, e.g. empirical:data.jsonl")
        fields = {"kind": "empirical", "dataset": rest}
    elif kind in _POSITIONAL:
        fields = {"kind": kind}
        names = _POSITIONAL[kind]
        for i, part in enumerate(p.strip() for p in rest.split(",") if p.strip()):
            key, eq, value = part.partition("=")
            if not eq:
                if i >= len(names):
                    raise UsageError(f"{flag}: too many values for {kind}: {text!r}")
                key, value = names[i], part
            fields[key.strip()] = value.strip()
    else:
        raise UsageError(
            f"{flag}: expected N or KIND:PARAMS with KIND one of {', '.join(sorted(DIST_KINDS))}, "
            f"got {text!r}"
        )
    try:
        return _Holder.model_validate({"dist": fields}).dist
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(p) for p in error["loc"][2:]) or kind
        message = str(error["msg"]).removeprefix("Value error, ")
        raise UsageError(f"{flag}: {where}: {message} (in {text!r})") from None


class LengthStream:
    """Request k's length from one distribution, the same for the same (seed, stream, k)."""

    def __init__(self, dist: LengthDist, seed: int, stream: int) -> None:
        self._dist = dist
        self._seed = seed
        self._stream = stream
        self._chunk = -1
        self._values: list[int] = []

    def value(self, request_id: int) -> int:
        """The length of request `request_id` (a lookup, except once per CHUNK requests)."""
        chunk, index = divmod(request_id, CHUNK)
        if chunk != self._chunk:
            rng = np.random.default_rng([self._seed % (1 << 64), self._stream, chunk])
            self._values = self._dist.sample(rng, CHUNK).tolist()
            self._chunk = chunk
        return self._values[index]
