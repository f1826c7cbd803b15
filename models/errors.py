"""The few exceptions model backends raise. Everything else is a bug."""

from __future__ import annotations


class ModelError(Exception):
    """A model request failed (bad response, backend error). Base of all model errors."""


class ModelTimeout(ModelError):
    """The request did not finish within `ModelParams.timeout_s`."""


class ModelUnavailable(ModelError):
    """The backend cannot serve right now (not reachable, not loaded, assets missing)."""


class ModelOverloaded(ModelUnavailable):
    """Too many requests are waiting; retry later."""


class ModelAssetError(ModelUnavailable):
    """Model files are missing or do not match what is expected."""


class PromptTooLong(ModelError):
    """The prompt does not fit the model's context budget; it was refused before reading it."""
