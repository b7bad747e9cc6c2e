"""One rule of ``ASSAY_MODEL_PRICES`` (``_model_prices``), validated by pydantic: imported only
when rules are given."""

from __future__ import annotations

import re
from decimal import Decimal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["PriceRule"]

_MILLION = Decimal(1_000_000)


class PriceRule(BaseModel):
    """One rule of ``ASSAY_MODEL_PRICES`` (prices in USD per million tokens)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str | None = None
    match: str | None = None
    provider: str | None = None
    price_as: str | None = None
    input: Decimal | None = Field(default=None, ge=0)
    output: Decimal | None = Field(default=None, ge=0)
    cache_read: Decimal | None = Field(default=None, ge=0)
    cache_write: Decimal | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _complete(self) -> PriceRule:
        if (self.model is None) == (self.match is None):
            raise ValueError("give exactly one of 'model' (a name) and 'match' (a regex)")
        if self.match is not None:
            try:
                re.compile(self.match)
            except re.error as exc:
                raise ValueError(f"'match' is not a regular expression: {exc}") from None
        prices = (self.input, self.output, self.cache_read, self.cache_write)
        if self.price_as is not None:
            if any(p is not None for p in prices):
                raise ValueError("give either 'price_as' or prices, not both")
        elif self.input is None or self.output is None:
            raise ValueError("give 'price_as' (another model's name) or both 'input' and "
                             "'output' (USD per million tokens)")
        return self

    def matches(self, provider: str | None, model: str) -> bool:
        if self.provider is not None and (provider or "").lower() != self.provider.lower():
            return False
        if self.model is not None:
            return model == self.model
        return re.search(self.match or "", model) is not None

    def cost(self, inp: int, out: int, read: int, written: int) -> tuple[float, float]:
        """(prompt cost, completion cost): cached reads and writes at their prices (the
        input price when none is given), the rest of the input at the input price."""
        assert self.input is not None and self.output is not None  # (validated)
        plain = max(inp - read - written, 0)
        prompt = (plain * self.input + read * (self.cache_read if self.cache_read is not None
                                                else self.input)
                  + written * (self.cache_write if self.cache_write is not None
                               else self.input))
        return float(prompt / _MILLION), float(out * self.output / _MILLION)
