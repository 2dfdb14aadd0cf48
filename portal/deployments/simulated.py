"""The simulated cluster's stand-in for a deployment's model server: no model runs there, so the
portal answers the calls a client makes, behind the same token check, in the shape the real server
would use. Code written against the demo (curl, the `openai` client, a KServe v2 client) parses
its answers; every answer says it is simulated.

OpenAI-compatible runtimes (vLLM, TGI) answer `GET /v1/models` and, by the model's task,
`POST /v1/chat/completions` (also streamed, as server-sent events) and `POST /v1/completions`, or
`POST /v1/embeddings` (short vectors of EMBEDDING_SIZE numbers that mean nothing); KServe v2
runtimes (Triton) answer the model's metadata and `POST .../infer`. A malformed body is a 400, and
a wrong model name a 404 where the runtime checks it (vLLM, Triton; TGI serves its one model
whatever is asked), each in its API's error shape. Any other path is a 404 naming what was asked.
"""

from __future__ import annotations

import base64
import hashlib
import json
import struct
import time
from dataclasses import dataclass, field
from typing import Any

from portal.catalog.models import CatalogModel, Runtime
from portal.deployments.models import Serving

EMBEDDING_SIZE = 8  # a short vector: the numbers mean nothing here
CLASSES = 1000  # an image classifier's output, as ImageNet's
MAX_BATCH = 64  # the stand-in's answer is batch x CLASSES numbers
MAX_INPUTS = 2048  # embedding inputs in one call, as OpenAI's API allows
MAX_CHOICES = 16  # `n`


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
    """An OpenAI API error."""
    error = {"message": message, "type": kind, "param": None, "code": status}
    return StandInAnswer(status, {"simulated": True, "error": error})


def _kserve_error(status: int, message: str) -> StandInAnswer:
    """A KServe v2 error: its message as a string."""
    return StandInAnswer(status, {"simulated": True, "error": message})


def _json_body(call: StandInCall) -> dict[str, Any] | str:
    """The body as an object, or why it is not one."""
    try:
        body = json.loads(call.body or b"null")
    except (ValueError, UnicodeDecodeError, RecursionError):
        return "The body is not JSON."
    if not isinstance(body, dict):
        return "The body must be a JSON object."
    return body


# --- OpenAI-compatible: vLLM, TGI ---------------------------------------------------------------

TASK_PATHS = {
    "/v1/chat/completions": CatalogModel.Task.TEXT_GENERATION,
    "/v1/completions": CatalogModel.Task.TEXT_GENERATION,
    "/v1/embeddings": CatalogModel.Task.EMBEDDING,
}


def _openai(serving: Serving, model: str, call: StandInCall, path: str) -> StandInAnswer:
    if path == "/v1/models" and call.method == "GET":
        card = {"id": model, "object": "model", "created": 0, "owned_by": "gpu-portal (simulated)"}
        return StandInAnswer(200, {"object": "list", "data": [card], "simulated": True})
    if TASK_PATHS.get(path) != serving.model.task or call.method != "POST":
        return _unknown_path(serving, model, call)
    body = _json_body(call)
    if isinstance(body, str):
        return _error(400, body)
    if body.get("model") != model and serving.runtime.slug != Runtime.Slug.TGI:
        return _error(404, f"The model `{body.get('model')}` does not exist.", "NotFoundError")
    if path == "/v1/embeddings":
        return _embeddings(model, body)
    return _completion(serving, model, body, chat=path == "/v1/chat/completions")


def _words(text: str) -> int:
    return len(text.split())


def _text(content: object) -> str:
    """A message's content as text: a string, or the text of its parts."""
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return "" if content is None else str(content)


def _asked(body: dict[str, Any], *, chat: bool) -> tuple[str, int] | str:
    """What the caller asked last, and the words of the whole prompt; or why the body is refused."""
    if chat:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
            return "messages: a non-empty list of {role, content} objects."
        return _text(messages[-1].get("content")), sum(_words(_text(m.get("content"))) for m in messages)
    prompt = body.get("prompt")
    if isinstance(prompt, list) and prompt and all(isinstance(part, str) for part in prompt):
        prompt = prompt[0]
    if not isinstance(prompt, str):
        return "prompt: a string or a list of strings."
    return prompt, _words(prompt)


def _completion(serving: Serving, model: str, body: dict[str, Any], *, chat: bool) -> StandInAnswer:
    asked = _asked(body, chat=chat)
    if isinstance(asked, str):
        return _error(400, asked)
    n = body.get("n", 1)
    if type(n) is not int or not 1 <= n <= MAX_CHOICES:
        return _error(400, f"n: a whole number from 1 to {MAX_CHOICES}.")
    text = f"(simulated) {_note(serving, model)} You asked: {asked[0][:200]}"
    usage = {
        "prompt_tokens": asked[1],
        "completion_tokens": n * _words(text),
        "total_tokens": asked[1] + n * _words(text),
    }
    head = {
        "id": f"{'chatcmpl' if chat else 'cmpl'}-simulated-{time.time_ns()}",
        "object": "chat.completion" if chat else "text_completion",
        "created": int(time.time()),
        "model": model,
        "simulated": True,
    }
    if body.get("stream") is True:
        options = body.get("stream_options")
        with_usage = isinstance(options, dict) and options.get("include_usage") is True
        return _streamed(head, text, chat=chat, usage=usage if with_usage else None)
    said = {"message": {"role": "assistant", "content": text}} if chat else {"text": text}
    choices = [{"index": index, "finish_reason": "stop", "logprobs": None, **said} for index in range(n)]
    return StandInAnswer(200, {**head, "choices": choices, "usage": usage})


def _streamed(head: dict[str, Any], text: str, *, chat: bool, usage: dict | None) -> StandInAnswer:
    """The same answer as server-sent events, a few words a chunk, then the usage if it was asked
    for (`stream_options.include_usage`), then `[DONE]`."""
    if chat:
        head = {**head, "object": "chat.completion.chunk"}
    words = text.split(" ")
    pieces = [
        " ".join(words[i : i + 4]) + (" " if i + 4 < len(words) else "") for i in range(0, len(words), 4)
    ]
    choices = []
    for number, piece in enumerate(pieces):
        delta: dict[str, Any] = {"content": piece}
        if number == 0:
            delta["role"] = "assistant"
        choices.append({"index": 0, "finish_reason": None, **({"delta": delta} if chat else {"text": piece})})
    choices.append({"index": 0, "finish_reason": "stop", **({"delta": {}} if chat else {"text": ""})})
    events = [json.dumps({**head, "choices": [choice]}) for choice in choices]
    if usage is not None:
        events.append(json.dumps({**head, "choices": [], "usage": usage}))
    return StandInAnswer(200, events=(*events, "[DONE]"))


def _vector(text: str) -> list[float]:
    """A stand-in vector, the same for the same text."""
    digest = hashlib.sha256(text.encode()).digest()
    return [round(byte / 255 - 0.5, 4) for byte in digest[:EMBEDDING_SIZE]]


def _embeddings(model: str, body: dict[str, Any]) -> StandInAnswer:
    given = body.get("input")
    texts = [given] if isinstance(given, str) else given
    if not isinstance(texts, list) or not texts or not all(isinstance(text, str) for text in texts):
        return _error(400, "input: a string or a non-empty list of strings.")
    if len(texts) > MAX_INPUTS:
        return _error(400, f"input: at most {MAX_INPUTS} strings in one call.")
    encoding = body.get("encoding_format", "float")
    if encoding not in ("float", "base64"):
        return _error(400, "encoding_format: float or base64.")

    def encoded(vector: list[float]) -> list[float] | str:
        if encoding == "float":
            return vector
        return base64.b64encode(
            struct.pack(f"<{len(vector)}f", *vector)
        ).decode()  # float32s, as OpenAI sends

    data = [
        {"object": "embedding", "index": index, "embedding": encoded(_vector(text))}
        for index, text in enumerate(texts)
    ]
    words = sum(_words(text) for text in texts)
    usage = {"prompt_tokens": words, "total_tokens": words}
    return StandInAnswer(
        200, {"object": "list", "data": data, "model": model, "usage": usage, "simulated": True}
    )


# --- KServe v2: Triton ---------------------------------------------------------------------------


def _kserve(serving: Serving, model: str, call: StandInCall, path: str) -> StandInAnswer:
    base = "/v2/models/"
    if not path.startswith(base):
        return _unknown_path(serving, model, call)
    name, _, rest = path[len(base) :].partition("/")
    if name != model:
        return _kserve_error(404, f"Request for unknown model: '{name}' is not found")
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
    if isinstance(body, str):
        return _kserve_error(400, body)
    inputs = body.get("inputs")
    if not isinstance(inputs, list) or not inputs or not all(isinstance(i, dict) for i in inputs):
        return _kserve_error(400, "inputs: a non-empty list of {name, shape, datatype, data} objects.")
    shape = inputs[0].get("shape")
    batch = shape[0] if isinstance(shape, list) and shape and type(shape[0]) is int else 0
    if not 1 <= batch <= MAX_BATCH:
        return _kserve_error(400, f"inputs[0].shape: a batch of 1 to {MAX_BATCH} first, as [1, 3, 224, 224].")
    output = {
        "name": "output__0",
        "datatype": datatype,
        "shape": [batch, CLASSES],
        "data": [0.0] * (batch * CLASSES),
    }
    return StandInAnswer(
        200,
        {
            "model_name": model,
            "model_version": "1",
            "id": body.get("id", ""),
            "outputs": [output],
            "simulated": True,
        },
    )
