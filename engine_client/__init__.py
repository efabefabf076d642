"""Spectator's client for inference servers: timed completions, /metrics normalisation, the probe, a CLI.

No Django here (DESIGN §2): `python -m engine_client probe URL` works on its own.
"""

from __future__ import annotations

from engine_client.canary import CANARY_TEXT, CANARY_VERSION
from engine_client.client import EngineClient
from engine_client.exceptions import (
    ConnectError,
    ConnectTimeout,
    DeadlineExceeded,
    EngineClientError,
    ProtocolError,
    ReadTimeout,
    StatusError,
    TimeoutError,
)
from engine_client.metrics import Snapshot, Window, parse_metrics, window
from engine_client.plan import ProbePlan
from engine_client.probe import run_probe
from engine_client.prompts import Prompt, PromptBuilder
from engine_client.report import Measurement, ProbeReport
from engine_client.responses import Completion, SpecFields, StreamChunk
from engine_client.sse import ServerSentEvent, SSEDecoder

__all__ = [
    "CANARY_TEXT",
    "CANARY_VERSION",
    "Completion",
    "ConnectError",
    "ConnectTimeout",
    "DeadlineExceeded",
    "EngineClient",
    "EngineClientError",
    "Measurement",
    "ProbePlan",
    "ProbeReport",
    "Prompt",
    "PromptBuilder",
    "ProtocolError",
    "ReadTimeout",
    "SSEDecoder",
    "ServerSentEvent",
    "Snapshot",
    "SpecFields",
    "StatusError",
    "StreamChunk",
    "TimeoutError",
    "Window",
    "parse_metrics",
    "run_probe",
    "window",
]
