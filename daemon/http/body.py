"""The pydantic models of a chat-completions request body (request.py checks
it with them). Strict: no coercion; keys that change nothing inside a part of
the body (a message's ``name``) are ignored, the body's own unknown keys are
refused by request.py with their names."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ChatBody", "ChatMessage", "OtherPart", "TextPart", "ToolCall", "ToolSpec"]

#: what a function's name may be (OpenAI's rule)
FUNCTION_NAME = r"^[a-zA-Z0-9_-]{1,64}$"


class _Loose(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")


class TextPart(_Loose):
    type: Literal["text"]
    text: str


class OtherPart(_Loose):
    """Image, audio and file parts: recognised, and refused with the reason."""

    type: Literal["image_url", "input_audio", "file", "refusal"]


Part = Annotated[TextPart | OtherPart, Field(discriminator="type")]


class FunctionCall(_Loose):
    name: Annotated[str, Field(pattern=FUNCTION_NAME)]
    arguments: str


class ToolCall(_Loose):
    """A call of the client's tool, as a client sends it back in the history."""

    id: Annotated[str, Field(min_length=1, max_length=200)]
    type: Literal["function"] = "function"
    function: FunctionCall


class ChatMessage(_Loose):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[Part] | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: Annotated[str, Field(min_length=1, max_length=200)] | None = None


class FunctionSpec(_Loose):
    name: Annotated[str, Field(pattern=FUNCTION_NAME)]
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class ToolSpec(_Loose):
    """One of the client's own tools, offered to the model beside tether's."""

    type: Literal["function"]
    function: FunctionSpec


class NamedFunction(_Loose):
    name: Annotated[str, Field(pattern=FUNCTION_NAME)]


class NamedChoice(_Loose):
    type: Literal["function"]
    function: NamedFunction


class JsonSchema(_Loose):
    name: Annotated[str, Field(pattern=FUNCTION_NAME)]
    description: str | None = None
    schema_: Annotated[dict[str, Any] | None, Field(alias="schema")] = None
    strict: bool | None = None


class ResponseFormat(_Loose):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchema | None = None


class StreamOptions(_Loose):
    include_usage: bool | None = None
    include_obfuscation: bool | None = None


class ChatBody(BaseModel):
    """The fields a chat completion is made of; the rest are ignored or
    refused names, checked by request.py before this model sees the body."""

    model_config = ConfigDict(strict=True, extra="ignore")

    model: Annotated[str, Field(min_length=1)]
    messages: Annotated[list[ChatMessage], Field(min_length=1)]
    stream: bool | None = None
    stream_options: StreamOptions | None = None
    n: Literal[1] | None = None
    tools: list[ToolSpec] | None = None
    tool_choice: Literal["none", "auto", "required"] | NamedChoice | None = None
    response_format: ResponseFormat | None = None


# -- /v1/responses ------------------------------------------------------------


class InputPart(_Loose):
    """A part of an input message: text (``input_text``, or ``output_text`` in an
    earlier assistant message); the others are refused with the reason."""

    type: Literal["input_text", "output_text", "input_image", "input_file", "input_audio",
                  "refusal"]
    text: str | None = None


class InputMessage(_Loose):
    type: Literal["message"] | None = None
    role: Literal["system", "developer", "user", "assistant"]
    content: str | list[InputPart]


class TextFormat(_Loose):
    type: Literal["text", "json_object", "json_schema"]
    name: Annotated[str, Field(pattern=FUNCTION_NAME)] | None = None
    description: str | None = None
    schema_: Annotated[dict[str, Any] | None, Field(alias="schema")] = None
    strict: bool | None = None


class TextConfig(_Loose):
    format: TextFormat | None = None


class ResponsesBody(BaseModel):
    """The fields a response is made of (OpenAI's Responses API); the rest are
    ignored or refused names, checked by responses.py first."""

    model_config = ConfigDict(strict=True, extra="ignore")

    model: Annotated[str, Field(min_length=1)]
    input: str | Annotated[list[InputMessage], Field(min_length=1)]
    instructions: str | None = None
    previous_response_id: Annotated[str, Field(min_length=1, max_length=200)] | None = None
    stream: bool | None = None
    background: bool | None = None
    store: bool | None = None
    text: TextConfig | None = None
    tools: Annotated[list[Any], Field(max_length=0)] | None = None
