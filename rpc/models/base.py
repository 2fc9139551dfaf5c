"""The base of every wire model."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["Model"]


class Model(BaseModel):
    """Base of every wire model: unknown keys are rejected and nothing is coerced."""

    model_config = ConfigDict(extra="forbid", strict=True)
