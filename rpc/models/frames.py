"""The schema of the JSON-RPC frames around requests and replies: a request, a result,
an error and its ``data`` (for ``tether schema``; the owner builds its frames as plain
dicts in framing.py and never pays for these)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ErrorData", "ErrorObject", "FieldProblem", "JsonRpcError", "JsonRpcRequest",
           "JsonRpcResult"]


class FieldProblem(BaseModel):
    """One problem ``invalid_params`` found: the dotted path, a message, a type tag."""

    model_config = ConfigDict(extra="forbid", strict=True)

    loc: str
    msg: str
    type: str


class ErrorData(BaseModel):
    """An error's ``data``: ``reason`` and ``detail`` always; the rest by reason."""

    model_config = ConfigDict(extra="allow", strict=True)

    reason: str
    detail: str
    fields: list[FieldProblem] | None = Field(
        default=None, description="invalid_params: every problem found (always sent with it)")
    admission_id: str | None = Field(
        default=None, description="admission_conflict: the admission the input id belongs to")
    admission_ids: list[str] | None = Field(
        default=None, description="unknown_outcome and friends: the admissions concerned")
    limit: int | None = Field(default=None, description="overloaded, invalid_request: the bound")
    storage_reason: str | None = Field(
        default=None, description="storage_unavailable: full, locked, readonly, io, constraint")
    error_id: str | None = Field(
        default=None, description="internal_error: the id to find in the owner's log")
    session_id: str | None = Field(default=None, description="not_found: the session asked for")
    method: str | None = Field(default=None, description="method_not_found: the name asked for")
    last_seq: int | None = Field(
        default=None, description="invalid_params for after_seq: the session's last seq")
    problem: str | None = Field(
        default=None, description="parse_error: lone_surrogate when the text was not Unicode")


class ErrorObject(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    code: int
    message: str
    data: ErrorData


RequestId = str | int | None


class JsonRpcRequest(BaseModel):
    """A request a client sends (a notification has no ``id``)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    jsonrpc: Literal["2.0"]
    id: str | int | None = None
    method: str
    params: dict[str, Any] | None = None


class JsonRpcResult(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    jsonrpc: Literal["2.0"]
    id: RequestId
    result: dict[str, Any]


class JsonRpcError(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    jsonrpc: Literal["2.0"]
    id: RequestId
    error: ErrorObject
