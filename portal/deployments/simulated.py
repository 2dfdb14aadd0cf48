"""The simulated cluster's stand-in for a deployment's model server: no model runs there, so the
portal answers the calls a client makes, behind the same token check, in the shape the real server
would use. Code written against the demo (curl, the `openai` client, a KServe v2 client) parses
its answers; every answer says it is simulated.

OpenAI-compatible runtimes (vLLM, TGI) answer `GET /v1/models`, `POST /v1/chat/completions` (also
streamed, as server-sent events), `POST /v1/completions` and `POST /v1/embeddings`; KServe v2
runtimes (Triton) answer the model's metadata and `POST .../infer`. A wrong model name is a 404 and
a malformed body a 400, as the servers answer them. Any other path is a 404 naming what was asked.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from typing import Any

from portal.catalog.models import CatalogModel, Runtime
from portal.deployments.models import Serving

EMBEDDING_SIZE = 8  # a short vector: the numbers mean nothing here
CLASSES = 1000  # an image classifier's output, as ImageNet's
MAX_BATCH = 64  # the stand-in's answer is batch x CLASSES numbers


@dataclass(frozen=True)
class StandInAnswer:
    """What the stand-in answers: a JSON body, or (streamed) server-sent event lines."""

    status: int
    body: dict[str, Any] = field(default_factory=dict)
    events: tuple[str, ...] = ()


@dataclass(frozen=True)
class StandInCall:
    """A call the token check let through."""

    deployment: int
    caller: str
    method: str
    path: str
    body: bytes


def stand_in_answer(serving: Serving, model: str, call: StandInCall) -> StandInAnswer:
    """The answer to one call, as `serving`'s runtime serving `model` would give it, marked simulated."""
    path = call.path.rstrip("/") or "/"
    if path in ("/health", "/v2/health/ready", "/v2/health/live"):
        return StandInAnswer(200, {"simulated": True, "ready": True})
    if serving.api == Runtime.Api.KSERVE_V2:
        return _kserve(serving, model, call, path)
    return _openai(serving, model, call, path)


def _note(serving: Serving, model: str) -> str:
    return (
        f"Simulated cluster: no model server runs. On a real cluster {serving.runtime.name} "
        f"serving {model} would answer this request."
    )


def _unknown_path(serving: Serving, model: str, call: StandInCall) -> StandInAnswer:
    return StandInAnswer(
        404,
        {
            "simulated": True,
            "note": _note(serving, model),
            "error": {"message": f"No {call.method} {call.path} here.", "type": "NotFoundError", "code": 404},
            "deployment": call.deployment,
            "caller": call.caller,
        },
    )


def _error(status: int, message: str, kind: str = "BadRequestError") -> StandInAnswer:
    return StandInAnswer(
        status,
        {"simulated": True, "error": {"message": message, "type": kind, "param": None, "code": status}},
    )


def _json_body(call: StandInCall) -> dict[str, Any] | StandInAnswer:
    try:
        body = json.loads(call.body or b"null")
    except (ValueError, UnicodeDecodeError):
        return _error(400, "The body is not JSON.")
    if not isinstance(body, dict):
        return _error(400, "The body must be a JSON object.")
    return body


def _openai(serving: Serving, model: str, call: StandInCall, path: str) -> StandInAnswer:
    if path == "/v1/models" and call.method == "GET":
        return StandInAnswer(
            200,
            {
                "object": "list",
                "data": [
                    {"id": model, "object": "model", "created": 0, "owned_by": "gpu-portal (simulated)"}
                ],
                "simulated": True,
            },
        )
    kinds = {
        "/v1/chat/completions": CatalogModel.Task.TEXT_GENERATION,
        "/v1/completions": CatalogModel.Task.TEXT_GENERATION,
        "/v1/embeddings": CatalogModel.Task.EMBEDDING,
    }
    if kinds.get(path) != serving.model.task or call.method != "POST":
        return _unknown_path(serving, model, call)
    body = _json_body(call)
    if isinstance(body, StandInAnswer):
        return body
    if body.get("model") != model:
        return _error(404, f"The model `{body.get('model')}` does not exist.", "NotFoundError")
    if path == "/v1/embeddings":
        return _embeddings(model, body)
    return _completion(serving, model, body, chat=path == "/v1/chat/completions")


def _words(text: str) -> int:
    return len(text.split())


def _completion(serving: Serving, model: str, body: dict[str, Any], *, chat: bool) -> StandInAnswer:
    if chat:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
            return _error(400, "messages: a non-empty list of {role, content} objects.")
        asked = str(messages[-1].get("content") or "")
        prompt_words = sum(_words(str(m.get("content") or "")) for m in messages)
    else:
        if not isinstance(body.get("prompt"), str):
            return _error(400, "prompt: a string.")
        asked = body["prompt"]
        prompt_words = _words(asked)
    text = f"(simulated) {_note(serving, model)} You asked: {asked[:200]}"
    usage = {
        "prompt_tokens": prompt_words,
        "completion_tokens": _words(text),
        "total_tokens": prompt_words + _words(text),
    }
    ident, created = f"{'chatcmpl' if chat else 'cmpl'}-simulated-{time.time_ns()}", int(time.time())
    kind = "chat.completion" if chat else "text_completion"
    if body.get("stream") is True:
        return _streamed(ident, created, model, kind, text, chat=chat)
    choice: dict[str, Any] = {"index": 0, "finish_reason": "stop", "logprobs": None}
    if chat:
        choice["message"] = {"role": "assistant", "content": text}
    else:
        choice["text"] = text
    return StandInAnswer(
        200,
        {
            "id": ident,
            "object": kind,
            "created": created,
            "model": model,
            "choices": [choice],
            "usage": usage,
            "simulated": True,
        },
    )


def _streamed(ident: str, created: int, model: str, kind: str, text: str, *, chat: bool) -> StandInAnswer:
    """The same answer as server-sent events, a few words a chunk, then `[DONE]`."""
    kind = f"{kind}.chunk" if chat else kind
    words = text.split(" ")
    pieces = [
        " ".join(words[i : i + 4]) + (" " if i + 4 < len(words) else "") for i in range(0, len(words), 4)
    ]
    chunks = []
    for number, piece in enumerate(pieces):
        delta: dict[str, Any] = {"content": piece}
        if chat and number == 0:
            delta["role"] = "assistant"
        choice: dict[str, Any] = {"index": 0, "finish_reason": None}
        choice.update({"delta": delta} if chat else {"text": piece})
        chunks.append(choice)
    last: dict[str, Any] = {"index": 0, "finish_reason": "stop"}
    last.update({"delta": {}} if chat else {"text": ""})
    chunks.append(last)
    events = tuple(
        json.dumps({"id": ident, "object": kind, "created": created, "model": model, "choices": [choice]})
        for choice in chunks
    )
    return StandInAnswer(200, events=(*events, "[DONE]"))


def _vector(text: str) -> list[float]:
    """A unit-free stand-in vector, the same for the same text."""
    digest = hashlib.sha256(text.encode()).digest()
    return [round(byte / 255 - 0.5, 4) for byte in digest[:EMBEDDING_SIZE]]


def _embeddings(model: str, body: dict[str, Any]) -> StandInAnswer:
    given = body.get("input")
    texts = [given] if isinstance(given, str) else given
    if not isinstance(texts, list) or not texts or not all(isinstance(text, str) for text in texts):
        return _error(400, "input: a string or a non-empty list of strings.")
    words = sum(_words(text) for text in texts)
    return StandInAnswer(
        200,
        {
            "object": "list",
            "data": [
                {"object": "embedding", "index": index, "embedding": _vector(text)}
                for index, text in enumerate(texts)
            ],
            "model": model,
            "usage": {"prompt_tokens": words, "total_tokens": words},
            "simulated": True,
        },
    )


def _kserve(serving: Serving, model: str, call: StandInCall, path: str) -> StandInAnswer:
    base = "/v2/models/"
    if not path.startswith(base):
        return _unknown_path(serving, model, call)
    name, _, rest = path[len(base) :].partition("/")
    if name != model:
        return _error(404, f"Request for unknown model: '{name}' is not found", "NotFoundError")
    datatype = "FP32" if serving.precision == "fp32" else "FP16"
    if rest == "" and call.method == "GET":
        return StandInAnswer(
            200,
            {
                "name": model,
                "versions": ["1"],
                "platform": "simulated",
                "inputs": [{"name": "input__0", "datatype": datatype, "shape": [-1, 3, 224, 224]}],
                "outputs": [{"name": "output__0", "datatype": datatype, "shape": [-1, CLASSES]}],
                "simulated": True,
            },
        )
    if rest != "infer" or call.method != "POST":
        return _unknown_path(serving, model, call)
    body = _json_body(call)
    if isinstance(body, StandInAnswer):
        return body
    inputs = body.get("inputs")
    if not isinstance(inputs, list) or not inputs or not all(isinstance(i, dict) for i in inputs):
        return _error(400, "inputs: a non-empty list of {name, shape, datatype, data} objects.")
    shape = inputs[0].get("shape")
    batch = shape[0] if isinstance(shape, list) and shape and isinstance(shape[0], int) else 0
    if not 1 <= batch <= MAX_BATCH:
        return _error(400, f"inputs[0].shape: a batch of 1 to {MAX_BATCH} first, as [1, 3, 224, 224].")
    return StandInAnswer(
        200,
        {
            "model_name": model,
            "model_version": "1",
            "id": body.get("id", ""),
            "outputs": [
                {
                    "name": "output__0",
                    "datatype": datatype,
                    "shape": [batch, CLASSES],
                    "data": [0.0] * (batch * CLASSES),
                }
            ],
            "simulated": True,
        },
    )
