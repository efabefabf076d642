"""Request bodies (pydantic): OpenAI completions and chat, SGLang `/generate`, and `/tokenize`.

Defaults follow the API each body imitates (OpenAI: temperature 1, completions max_tokens 16; chat
max_tokens = what the context leaves; SGLang: max_new_tokens 128). Unknown fields are ignored, as
clients send many we do not use; fields we cannot honour (n > 1, logprobs) are refused.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Stop = str | list[str] | None


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore")


# What torch.Generator.manual_seed accepts; beyond it the model loop would fail (found by fuzzing).
SEED_MAX = 2**64 - 1


class _Sampling(_Body):
    # allow_inf_nan=False: Python's JSON parser accepts NaN and Infinity, which no sampler can use.
    temperature: float = Field(1.0, ge=0.0, allow_inf_nan=False)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    top_k: int = Field(0, ge=-1, description="0 or -1: no top-k cut")
    seed: int | None = Field(None, ge=0, le=SEED_MAX)
    stop: Stop = None
    ignore_eos: bool = False
    n: int = Field(1, ge=1, le=1, description="one choice per request")
    logprobs: None = Field(None, description="not supported")


class StreamOptions(_Body):
    include_usage: bool = False


class CompletionRequest(_Sampling):
    model: str | None = None
    prompt: str | list[int] | list[str] | list[list[int]]
    max_tokens: int | None = Field(16, ge=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    echo: Literal[False] = False
    user: str | None = None


class TextPart(_Body):
    type: Literal["text"]
    text: str


class ChatMessage(_Body):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[TextPart] | None = None
    name: str | None = None


class ChatCompletionRequest(_Sampling):
    model: str | None = None
    messages: list[ChatMessage] = Field(min_length=1)
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    logprobs: bool | None = None  # type: ignore[assignment]  # chat sends a bool; only False is served
    stream: bool = False
    stream_options: StreamOptions | None = None
    user: str | None = None


class GenerateSamplingParams(_Body):
    max_new_tokens: int = Field(128, ge=1)
    temperature: float = Field(1.0, ge=0.0, allow_inf_nan=False)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    top_k: int = Field(-1, ge=-1)
    stop: Stop = None
    ignore_eos: bool = False
    seed: int | None = Field(None, ge=0, le=SEED_MAX)
    sampling_seed: int | None = Field(None, ge=0, le=SEED_MAX)  # SGLang's name for the seed


class GenerateRequest(_Body):
    text: str | None = None
    input_ids: list[int] | None = None
    sampling_params: GenerateSamplingParams = Field(default_factory=GenerateSamplingParams)
    stream: bool = False
    rid: str | None = None


class TokenizeRequest(_Body):
    model: str | None = None
    prompt: str | None = None
    text: str | None = None  # SGLang's name for the prompt
    messages: list[ChatMessage] | None = None  # tokenized through the chat template
    add_special_tokens: bool = True
