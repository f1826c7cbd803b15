"""The orders a product search can rank in: by relevance, by interactions, or by price."""

from __future__ import annotations

from typing import Literal

SortOrder = Literal["relevance", "popularity", "cheapest", "priciest"]
PRICE_ORDER = {"cheapest": "ASC", "priciest": "DESC"}  # the SQL direction of each price sort
