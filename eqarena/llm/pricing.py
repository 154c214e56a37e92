"""Judge prices (USD per million tokens) from eqarena/llm/prices.toml, overridable by a user file."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from eqarena.exceptions import EqarenaError

DEFAULT_PRICES_FILE = Path(__file__).resolve().parent / "prices.toml"


class PriceError(EqarenaError, ValueError):
    """A price file is malformed; the message names the file and the entry."""


@dataclass(frozen=True)
class Price:
    """USD per million input / output tokens; the batch API bills `batch_discount` of that."""

    input_per_mtok: float
    output_per_mtok: float
    batch_discount: float = 0.5

    def cost(self, tokens_in: float, tokens_out: float, *, batch: bool = False) -> float:
        usd = (tokens_in * self.input_per_mtok + tokens_out * self.output_per_mtok) / 1e6
        return usd * self.batch_discount if batch else usd


@dataclass(frozen=True)
class PriceTable:
    """{provider: {model pattern: (input, output)}} plus the batch discount."""

    entries: dict[str, dict[str, tuple[float, float]]]
    batch_discount: float = 0.5

    def lookup(self, provider: str, model: str) -> Price | None:
        """Exact model, else the longest listed name `model` starts with, else "*"; None when unlisted."""
        table = self.entries.get(provider, {})
        if model in table:
            found = table[model]
        else:
            prefixes = [name for name in table if name != "*" and model.startswith(name)]
            if prefixes:
                found = table[max(prefixes, key=len)]
            elif "*" in table:
                found = table["*"]
            else:
                return None
        return Price(found[0], found[1], self.batch_discount)


def _read(path: Path) -> tuple[dict[str, dict[str, tuple[float, float]]], float | None]:
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise PriceError(f"price file {path} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise PriceError(f"{path}: {exc}") from None
    discount = data.pop("batch_discount", None)
    if discount is not None and not (isinstance(discount, (int, float)) and 0 < discount <= 1):
        raise PriceError(f"{path}: batch_discount must be a number in (0, 1], got {discount!r}")
    entries: dict[str, dict[str, tuple[float, float]]] = {}
    for provider, models in data.items():
        if not isinstance(models, dict):
            raise PriceError(f'{path}: {provider!r} must be a table of models, e.g. [{provider}."MODEL"]')
        for model, price in models.items():
            where = f'{path}: [{provider}."{model}"]'
            if not isinstance(price, dict) or set(price) != {"input", "output"}:
                raise PriceError(f"{where} needs exactly `input` and `output` (USD per million tokens)")
            values = (price["input"], price["output"])
            if not all(isinstance(v, (int, float)) and v >= 0 for v in values):
                raise PriceError(f"{where}: input and output must be non-negative numbers, got {values}")
            entries.setdefault(provider, {})[model] = (float(values[0]), float(values[1]))
    return entries, discount


def load_prices(override: str | Path | None = None) -> PriceTable:
    """The shipped price table, with the entries (and batch_discount) of `override` winning."""
    entries, discount = _read(DEFAULT_PRICES_FILE)
    if override is not None:
        extra, extra_discount = _read(Path(override))
        for provider, models in extra.items():
            entries.setdefault(provider, {}).update(models)
        discount = extra_discount if extra_discount is not None else discount
    return PriceTable(entries, discount if discount is not None else 0.5)


def run_price(provider: str, model: str, prices: str | Path | None, max_cost: float | None) -> Price | None:
    """The price of `provider:model` (shipped table, `prices` overriding); PriceError when `max_cost` caps
    a run whose model has no price."""
    price = load_prices(prices).lookup(provider, model)
    if max_cost is not None and price is None:
        raise PriceError(
            f"--max-cost: no price for {provider}:{model}; give one with --prices FILE "
            f'([{provider}."{model}"] input = ..., output = ... in USD per million tokens)'
        )
    return price


def estimate_tokens(text: str) -> int:
    """Rough token count of English text or code (about four characters per token)."""
    return (len(text) + 3) // 4


def estimate_message_tokens(messages: list[dict[str, str]]) -> int:
    """Rough prompt tokens of a chat request: the text plus a few tokens of framing per message."""
    return sum(estimate_tokens(m["content"]) + 4 for m in messages) + 3
