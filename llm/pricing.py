"""Cost estimate for LLM calls (pre-labelling, the LLM judge, Batch API jobs).

List prices (USD per 1M tokens, paid tier, prompts <= 200k tokens) as published for the Gemini
API when this was written; they change, so every figure is only an estimate. The Batch API is
billed at half the interactive price (``batch=True``).
"""

from __future__ import annotations

__all__ = ["BATCH_DISCOUNT", "PRICES_PER_MTOK", "estimate_cost_usd", "labeller_prices"]

PRICES_PER_MTOK: dict[str, tuple[float, float]] = {
    "gemini-2.5-pro": (1.25, 10.00),
    "gemini-2.5-flash": (0.30, 2.50),
    "gemini-2.5-flash-lite": (0.10, 0.40),
    "gemini-2.0-flash": (0.10, 0.40),
    "gemini-2.0-flash-lite": (0.075, 0.30),
}

# Batch jobs cost half the interactive list price, in exchange for an answer within 24 hours.
BATCH_DISCOUNT = 0.5


def estimate_cost_usd(
    model: str,
    input_tokens: int,
    output_tokens: int,
    *,
    batch: bool = False,
    prices: tuple[float, float] | None = None,
) -> float:
    """Estimated cost; 0.0 for models not in the table (e.g. the heuristic, a model on the
    team's own server). ``prices`` (USD per 1M input, output tokens) replaces the table, for
    a server whose prices the settings give (FAILLAB_OPENAI_PRICE_PER_MTOK)."""
    name = model.removeprefix("models/")
    price = prices if prices is not None else PRICES_PER_MTOK.get(name)
    if price is None:
        # Versioned names ("gemini-2.5-pro-preview-05-06") fall back to their family's price.
        matches = [k for k in PRICES_PER_MTOK if name.startswith(k)]
        if not matches:
            return 0.0
        price = PRICES_PER_MTOK[max(matches, key=len)]
    cost = (input_tokens * price[0] + output_tokens * price[1]) / 1_000_000
    return cost * BATCH_DISCOUNT if batch else cost


def labeller_prices(labeller: object) -> tuple[float, float] | None:
    """The prices a labeller (or LLM client) was configured with, else None (the table)."""
    prices = getattr(labeller, "price_per_mtok", None)
    return prices if isinstance(prices, tuple) else None
