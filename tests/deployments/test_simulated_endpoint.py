"""The simulated cluster's stand-in for a model server answers in the runtime's own shape: the
OpenAI API for vLLM and TGI (chat, completions, streaming, embeddings, models), KServe v2 for
Triton, with the servers' errors for a wrong model or a malformed body. The real `openai` client
parses its answers, and the page's own examples, run in a shell, get 200s."""

from __future__ import annotations

import base64
import json
import os
import shutil
import struct
import subprocess
import sys

import pytest
from django.test import Client

from portal.deployments.selectors import deployment_client_example, deployment_example
from portal.workloads.models import Workload
from tests.deployments.test_endpoint_gate import host_of, serving_token
from tests.rows import make_deployment

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
BGE = "BAAI/bge-large-en-v1.5"


def _deploy(fleet, researcher, team, model: str, index: int) -> Workload:
    workload = make_deployment(owner=researcher, team=team, model=model, gpu=fleet["whole"].gpus.all()[index])
    workload.access = f"https://dep-vision-{model.split('-')[0]}-{workload.pk}.sandboxes.gpu.internal"
    workload.save(update_fields=["access"])
    return Workload.objects.select_related("cluster", "serving__model", "serving__runtime").get(
        pk=workload.pk
    )


@pytest.fixture
def deployments(fleet, catalog, researcher, team) -> dict[str, Workload]:
    return {
        model: _deploy(fleet, researcher, team, model, index)
        for index, model in enumerate(("llama-3.1-8b-instruct", "bge-large-en-v1.5", "resnet-50"))
    }


class Caller:
    def __init__(self, deployment: Workload, token: str) -> None:
        self.base = f"/simulated-endpoint/{host_of(deployment)}"
        self.auth = {"HTTP_AUTHORIZATION": f"Bearer {token}"}

    def get(self, path: str):
        return Client().get(f"{self.base}{path}", **self.auth)

    def post(self, path: str, body: object):
        data = body if isinstance(body, str) else json.dumps(body)
        return Client().post(f"{self.base}{path}", data=data, content_type="application/json", **self.auth)


@pytest.fixture
def call(db, deployments, researcher):
    token = serving_token(researcher)
    return {slug: Caller(deployment, token) for slug, deployment in deployments.items()}


@pytest.mark.django_db
def test_a_chat_completion_comes_back_as_the_openai_api_shapes_it(call):
    body = {"model": LLAMA, "messages": [{"role": "user", "content": "Say hello in one sentence."}]}
    answer = call["llama-3.1-8b-instruct"].post("/v1/chat/completions", body)

    assert answer.status_code == 200, answer.content
    completion = answer.json()
    assert completion["object"] == "chat.completion" and completion["model"] == LLAMA
    assert completion["id"].startswith("chatcmpl-") and isinstance(completion["created"], int)
    [choice] = completion["choices"]
    assert choice["finish_reason"] == "stop" and choice["message"]["role"] == "assistant"
    content = choice["message"]["content"]
    assert content.startswith("(simulated)") and "vLLM serving meta-llama/Llama-3.1-8B-Instruct" in content
    assert content.endswith("You asked: Say hello in one sentence.")
    usage = completion["usage"]
    assert usage["prompt_tokens"] == 5 and usage["total_tokens"] == 5 + usage["completion_tokens"]
    assert completion["simulated"] is True


@pytest.mark.django_db
def test_a_streamed_chat_completion_comes_as_server_sent_events_ending_in_done(call):
    body = {"model": LLAMA, "messages": [{"role": "user", "content": "hi"}], "stream": True}
    answer = call["llama-3.1-8b-instruct"].post("/v1/chat/completions", body)

    assert answer.status_code == 200 and answer["Content-Type"] == "text/event-stream"
    events = [line.removeprefix("data: ") for line in answer.content.decode().split("\n\n") if line]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(event) for event in events[:-1]]
    assert {chunk["object"] for chunk in chunks} == {"chat.completion.chunk"}
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert chunks[-1]["choices"][0] == {"index": 0, "finish_reason": "stop", "delta": {}}
    text = "".join(chunk["choices"][0]["delta"].get("content", "") for chunk in chunks)
    assert text.startswith("(simulated)") and text.endswith("You asked: hi")


@pytest.mark.django_db
def test_a_plain_completion_and_the_model_list(call):
    llama = call["llama-3.1-8b-instruct"]
    answer = llama.post("/v1/completions", {"model": LLAMA, "prompt": "Once upon a time"})
    assert answer.status_code == 200, answer.content
    assert answer.json()["object"] == "text_completion"
    assert answer.json()["choices"][0]["text"].endswith("You asked: Once upon a time")

    models = llama.get("/v1/models").json()
    assert models["object"] == "list" and [m["id"] for m in models["data"]] == [LLAMA]


@pytest.mark.django_db
def test_embeddings_are_one_vector_per_input_the_same_for_the_same_text(call):
    bge = call["bge-large-en-v1.5"]
    one = bge.post("/v1/embeddings", {"model": BGE, "input": "GPU portals"}).json()
    two = bge.post("/v1/embeddings", {"model": BGE, "input": ["GPU portals", "something else"]}).json()

    assert one["object"] == "list" and one["model"] == BGE
    assert [item["index"] for item in two["data"]] == [0, 1]
    assert two["data"][0]["embedding"] == one["data"][0]["embedding"]
    assert two["data"][1]["embedding"] != one["data"][0]["embedding"]
    assert all(-0.5 <= number <= 0.5 for number in one["data"][0]["embedding"])
    assert two["usage"] == {"prompt_tokens": 4, "total_tokens": 4}


@pytest.mark.django_db
def test_the_servers_errors_for_a_wrong_model_a_malformed_body_and_a_path_it_has_not(call):
    llama = call["llama-3.1-8b-instruct"]
    wrong = llama.post("/v1/chat/completions", {"model": "gpt-4", "messages": [{"role": "user"}]})
    assert wrong.status_code == 404
    assert wrong.json()["error"]["message"] == "The model `gpt-4` does not exist."

    for body, said in (
        ("{not json", "not JSON"),
        ([1, 2], "a JSON object"),
        ({"model": LLAMA, "messages": []}, "messages: a non-empty list"),
        ({"model": LLAMA, "messages": "hello"}, "messages: a non-empty list"),
    ):
        refused = llama.post("/v1/chat/completions", body)
        assert refused.status_code == 400 and said in refused.json()["error"]["message"], body
    assert llama.post("/v1/completions", {"model": LLAMA, "prompt": 3}).status_code == 400
    bge = call["bge-large-en-v1.5"]
    assert bge.post("/v1/embeddings", {"model": BGE, "input": []}).status_code == 400
    assert bge.post("/v1/embeddings", {"model": BGE, "input": [1]}).status_code == 400

    elsewhere = llama.post("/v1/embeddings", {"model": LLAMA, "input": "x"})  # a chat model embeds nothing
    assert (
        elsewhere.status_code == 404
        and "No POST /v1/embeddings here." in elsewhere.json()["error"]["message"]
    )
    assert "On a real cluster vLLM serving" in elsewhere.json()["note"]
    assert llama.get("/v1/chat/completions").status_code == 404
    assert llama.get("/health").status_code == 200


@pytest.mark.django_db
def test_what_clients_send_besides_the_basics_is_answered_as_the_api_says(call):
    llama, bge = call["llama-3.1-8b-instruct"], call["bge-large-en-v1.5"]
    parts = [{"type": "text", "text": "Describe"}, {"type": "text", "text": "this."}]
    three = llama.post(
        "/v1/chat/completions", {"model": LLAMA, "messages": [{"role": "user", "content": parts}], "n": 3}
    )
    assert [choice["index"] for choice in three.json()["choices"]] == [0, 1, 2]
    assert three.json()["choices"][0]["message"]["content"].endswith("You asked: Describe this.")
    assert llama.post("/v1/chat/completions", {"model": LLAMA, "messages": [{}], "n": 99}).status_code == 400
    listed = llama.post("/v1/completions", {"model": LLAMA, "prompt": ["Once", "Twice"]})
    assert listed.json()["choices"][0]["text"].endswith("You asked: Once")

    body = {"model": LLAMA, "messages": [{"role": "user", "content": "hi"}], "stream": True}
    counted = llama.post("/v1/chat/completions", {**body, "stream_options": {"include_usage": True}})
    events = [line.removeprefix("data: ") for line in counted.content.decode().split("\n\n") if line]
    usage_chunk = json.loads(events[-2])
    assert usage_chunk["choices"] == [] and usage_chunk["usage"]["prompt_tokens"] == 1
    assert all(json.loads(event)["simulated"] is True for event in events[:-1])

    floats = bge.post("/v1/embeddings", {"model": BGE, "input": "x"}).json()["data"][0]["embedding"]
    packed = bge.post("/v1/embeddings", {"model": BGE, "input": "x", "encoding_format": "base64"})
    vector = struct.unpack("<8f", base64.b64decode(packed.json()["data"][0]["embedding"]))
    assert vector == pytest.approx(floats, abs=1e-6)
    too_many = bge.post("/v1/embeddings", {"model": BGE, "input": ["a"] * 2049})
    assert too_many.status_code == 400 and "at most 2048" in too_many.json()["error"]["message"]
    deep = "[" * 100_000 + "]" * 100_000
    assert bge.post("/v1/embeddings", deep).status_code == 400


@pytest.mark.django_db
def test_tgi_serves_its_one_model_whatever_the_call_names(fleet, catalog, researcher, team):
    tgi = _deploy(fleet, researcher, team, "mistral-7b-instruct-v0.3", 3)
    answer = Caller(tgi, serving_token(researcher)).post(
        "/v1/chat/completions", {"model": "tgi", "messages": [{"role": "user", "content": "hi"}]}
    )
    assert answer.status_code == 200, answer.content
    assert "Text Generation Inference serving" in answer.json()["choices"][0]["message"]["content"]


@pytest.mark.django_db
def test_triton_answers_its_metadata_and_an_inference_in_kserve_v2(call):
    resnet = call["resnet-50"]
    metadata = resnet.get("/v2/models/resnet-50").json()
    assert metadata["name"] == "resnet-50" and metadata["inputs"][0]["name"] == "input__0"
    assert metadata["inputs"][0]["shape"] == [-1, 3, 224, 224]

    image = {"name": "input__0", "shape": [2, 3, 224, 224], "datatype": "FP16", "data": [0, 0]}
    answer = resnet.post("/v2/models/resnet-50/infer", {"id": "r1", "inputs": [image]})
    assert answer.status_code == 200, answer.content
    [output] = answer.json()["outputs"]
    assert answer.json()["id"] == "r1" and output["shape"] == [2, 1000] and len(output["data"]) == 2000

    unknown = resnet.get("/v2/models/resnet-18")
    assert (
        unknown.status_code == 404
        and unknown.json()["error"] == "Request for unknown model: 'resnet-18' is not found"
    )
    refused = resnet.post("/v2/models/resnet-50/infer", {"inputs": []})
    assert refused.status_code == 400 and refused.json()["error"].startswith("inputs: a non-empty list")
    huge = {**image, "shape": [10**9, 3, 224, 224]}  # the answer would be batch x 1000 numbers
    assert resnet.post("/v2/models/resnet-50/infer", {"inputs": [huge]}).status_code == 400
    assert resnet.post("/v1/chat/completions", {"model": "resnet-50"}).status_code == 404
    assert resnet.get("/v2/health/ready").status_code == 200


def test_the_openai_client_and_the_pages_examples_work_against_the_stand_in(
    live_server, transactional_db, settings, fleet, catalog, researcher, team
):
    """What a user copies from the deployment page, run as they would run it."""
    from openai import OpenAI

    settings.PORTAL_BASE_URL = live_server.url
    found = {
        slug: _deploy(fleet, researcher, team, slug, index)
        for index, slug in enumerate(("llama-3.1-8b-instruct", "bge-large-en-v1.5", "resnet-50"))
    }
    token = serving_token(researcher)

    snippet = deployment_client_example(found["llama-3.1-8b-instruct"])
    base_url = snippet.split('base_url="')[1].split('"')[0]
    # Closed at the end: a connection the client kept open would keep the live server's thread,
    # and its database session, alive past the test run.
    with OpenAI(base_url=base_url, api_key=token, max_retries=0) as client:
        reply = client.chat.completions.create(model=LLAMA, messages=[{"role": "user", "content": "hello"}])
        assert (
            reply.choices[0].message.content.endswith("You asked: hello") and reply.usage.prompt_tokens == 1
        )
        streamed = client.chat.completions.create(
            model=LLAMA, messages=[{"role": "user", "content": "hello"}], stream=True
        )
        text = "".join(chunk.choices[0].delta.content or "" for chunk in streamed)
        assert text == reply.choices[0].message.content
        assert [model.id for model in client.models.list()] == [LLAMA]

    printed = {}
    for slug in ("llama-3.1-8b-instruct", "bge-large-en-v1.5"):
        run = subprocess.run(
            [sys.executable, "-c", deployment_client_example(found[slug])],
            env={**os.environ, "SERVING_TOKEN": token},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert run.returncode == 0, (slug, run.stderr[-2000:])
        printed[slug] = run.stdout
    assert printed["llama-3.1-8b-instruct"].endswith("You asked: Say hello in one sentence.\n")
    assert printed["bge-large-en-v1.5"].startswith("8 [")

    if shutil.which("curl") is None:
        pytest.skip("no curl here to run the page's examples")
    for slug, deployment in found.items():
        example = deployment_example(deployment)
        shell = subprocess.run(
            ["bash", "-c", example.replace("curl -s ", "curl -sS --fail-with-body ")],
            env={**os.environ, "SERVING_TOKEN": token},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert shell.returncode == 0, (slug, shell.stdout[-500:], shell.stderr)
        answers = _json_values(shell.stdout)
        assert answers and all(answer["simulated"] is True for answer in answers), slug


def _json_values(text: str) -> list[dict]:
    """The JSON objects curl printed one after another (a server's body ends without a newline)."""
    decoder, values, at = json.JSONDecoder(), [], 0
    while at < len(text.strip()):
        value, at = decoder.raw_decode(text, at)
        values.append(value)
        while at < len(text) and text[at].isspace():
            at += 1
    return values
