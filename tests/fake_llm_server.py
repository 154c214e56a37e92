"""A local LLM-judge server for tests and benchmarks: OpenAI-compatible and Gemini-compatible HTTP on
127.0.0.1, with planted per-model quality and injected faults.

Endpoints: POST /v1/chat/completions; POST /v1[beta]/models/{model}:generateContent; the minimal Batch
API (POST /v1/files, GET /v1/files/{id}[/content], POST /v1/batches, GET /v1/batches[/{id}]).

Judging: every response text planted by the tests carries `<<model:NAME>>`, every prompt text
`<<prompt:ID>>`. The first model tag in the user message is assistant A, the second B. The verdict
follows d = quality[A] - quality[B] + N(0, noise) (or always favours A with `always_a`); the k-th draw of
a cell (prompt, A, B) depends only on the seed, the cell and k, never on how requests interleave. The output
names a decoy label before the final one, so a parser that takes the first label gets it wrong.

Generating: a chat or generateContent request that is not a judge request (fewer than two distinct model
tags in its user message) is a model asked for its answer: it gets `planted_response(MODEL, PROMPT)`,
MODEL being the requested model (the chat body's `model`, the generateContent path's), PROMPT the
prompt tag's id, so a later judge run sees that model's tag and applies its planted quality. With
probability `empty_rate` the answer is empty. Counters count these apart (`generation_requests`,
`paid_answers`, `answer_usage`); `paid_samples` counts judge samples only. A Batch API line is told
apart the same way: generation lines get the planted answer (counted in `paid_answers`, not in
`generation_requests`, which counts HTTP requests).

Faults (chat / generate requests only): with probability `fault_rate` a request gets one of 429
(with Retry-After), 500, a stall longer than the client's timeout, or a TCP reset; with probability
`malformed_rate` a returned sample has no verdict label. `multi_sample` = 'accept' | 'reject' (HTTP 400
when n > 1) | 'ignore' (one sample whatever n). `rpm_limit` answers 429 beyond a per-second leaky bucket.
`fault_first` makes the first requests fail in turn through `fault_kinds`; `require_key` answers 401
(echoing the key it got) to a request without that key. `hold_after` parks every chat request after
that many successful ones until `release()`. `stop()` then `start()` again is a server going away and
coming back at the same address.

The server runs its own asyncio loop in a daemon thread; it speaks HTTP/1.1 via h11 over asyncio
streams (which is what lets it reset a connection). Counters are read with `snapshot()`.
"""

from __future__ import annotations

import asyncio
import collections
import email.parser
import email.policy
import json
import math
import random
import re
import socket
import struct
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import h11

FAULT_KINDS = ("429", "500", "stall", "reset")
_PROMPT_TAG = re.compile(r"<<prompt:([^>]+)>>")
_MODEL_TAG = re.compile(r"<<model:([^>]+)>>")
_GEMINI_PATH = re.compile(r"^/v1(?:beta)?/models/([^/:]+):generateContent$")
FIVE = ("A>>B", "A>B", "A=B", "B>A", "B>>A")
THREE = ("A>B", "A=B", "B>A")


def planted_response(model: str, prompt_id: str) -> str:
    """The answer text tests store for `model` on `prompt_id` (the server reads the model tag)."""
    return f"Answer of <<model:{model}>> to prompt {prompt_id}: " + "lorem ipsum dolor sit amet. " * 3


def planted_prompt(prompt_id: str) -> str:
    return f"<<prompt:{prompt_id}>> Question {prompt_id}: explain something in a few sentences."


@dataclass
class Counters:
    """Everything the server saw. `paid_samples[(prompt, A, B)]` counts samples returned with 200."""

    requests: int = 0  # chat + generate requests received (any outcome)
    successes: int = 0  # of those, answered 200
    faults: collections.Counter = field(default_factory=collections.Counter)
    rate_limited: int = 0  # 429 from rpm_limit (not injected)
    multi_sample_rejections: int = 0
    malformed_responses: int = 0  # 200 answers with at least one sample lacking a verdict
    malformed_samples: int = 0
    released_unserved: int = 0  # parked requests answered 503 by release(reject=True)
    paid_samples: collections.Counter = field(default_factory=collections.Counter)
    generation_requests: int = 0  # of `requests`, those asking a model for its answer (any outcome)
    paid_answers: collections.Counter = field(default_factory=collections.Counter)  # (model, prompt): 200 answers
    empty_answers: int = 0  # of those, answered with an empty text (empty_rate)
    answer_usage: dict = field(default_factory=dict)  # (model, prompt) -> (prompt tokens, completion tokens), last
    batch_creates: int = 0
    batch_retrievals: int = 0
    batch_samples: int = 0
    parked: int = 0  # requests waiting at the hold_after gate now
    success_times: list = field(default_factory=list)
    request_times: list = field(default_factory=list)
    sampling: collections.Counter = field(default_factory=collections.Counter)  # (max tokens, temperature) asked

    @property
    def injected_faults(self) -> int:
        return sum(self.faults.values())


class FakeLLMServer:
    def __init__(
        self,
        qualities: dict[str, float] | None = None,
        *,
        seed: int = 0,
        noise: float = 0.25,
        latency_s: float = 0.0,
        fault_rate: float = 0.0,
        fault_kinds: tuple[str, ...] = FAULT_KINDS,
        retry_after_s: float = 0.05,
        stall_s: float = 2.0,
        malformed_rate: float = 0.0,
        multi_sample: str = "accept",
        always_a: bool = False,
        rpm_limit: float | None = None,
        hold_after: int | None = None,
        fault_first: int = 0,
        require_key: str | None = None,
        batch_polls: int = 2,
        record_times: bool = False,
        empty_rate: float = 0.0,
    ):
        self.qualities = qualities or {}
        # One stream per kind of draw, so which requests fail does not depend on how concurrent
        # requests interleave with verdict draws.
        self.fault_rng = random.Random(f"{seed}:faults")
        self.malformed_rng = random.Random(f"{seed}:malformed")
        self.empty_rng = random.Random(f"{seed}:empty")
        self.empty_rate = empty_rate
        self.seed = seed
        self._verdicts_drawn: collections.Counter = collections.Counter()  # per (prompt, A, B)
        self.noise = noise
        self.latency_s = latency_s
        self.fault_rate = fault_rate
        self.fault_kinds = fault_kinds
        self.retry_after_s = retry_after_s
        self.stall_s = stall_s
        self.malformed_rate = malformed_rate
        self.multi_sample = multi_sample
        self.always_a = always_a
        self.rpm_limit = rpm_limit
        self.hold_after = hold_after
        self.fault_first = fault_first
        self.require_key = require_key
        self.batch_polls = batch_polls
        self.batch_hold = False  # keep batches in_progress while True
        self.record_times = record_times
        self.counters = Counters()
        self._lock = threading.Lock()
        self._files: dict[str, bytes] = {}
        self._batches: dict[str, dict] = {}
        self._batch_polls_seen: collections.Counter = collections.Counter()
        self._bucket = 0.0
        self._bucket_time = time.monotonic()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.base_events.Server | None = None
        self._thread: threading.Thread | None = None
        self._gate: asyncio.Event | None = None
        self._reject_held = False
        self._tasks: set[asyncio.Task] = set()
        self.port = 0  # a free port, chosen at the first start and kept by later ones

    # ---------------------------------------------------------------- lifecycle

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_base_url(self) -> str:
        return f"{self.url}/v1"

    def start(self) -> FakeLLMServer:
        ready = threading.Event()

        def run() -> None:
            self._loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self._loop)
            self._gate = asyncio.Event()
            self._server = self._loop.run_until_complete(
                asyncio.start_server(self._serve_connection, "127.0.0.1", self.port, backlog=1024)
            )
            self.port = self._server.sockets[0].getsockname()[1]
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, name="fake-llm-server", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("fake LLM server did not start")
        return self

    def stop(self) -> None:
        if self._loop is None:
            return

        async def shutdown() -> None:
            self._server.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop = None

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def snapshot(self) -> Counters:
        """A copy of the counters, safe to read from another thread."""
        with self._lock:
            c = self.counters
            return Counters(
                requests=c.requests,
                successes=c.successes,
                faults=collections.Counter(c.faults),
                rate_limited=c.rate_limited,
                multi_sample_rejections=c.multi_sample_rejections,
                malformed_responses=c.malformed_responses,
                malformed_samples=c.malformed_samples,
                released_unserved=c.released_unserved,
                paid_samples=collections.Counter(c.paid_samples),
                generation_requests=c.generation_requests,
                paid_answers=collections.Counter(c.paid_answers),
                empty_answers=c.empty_answers,
                answer_usage=dict(c.answer_usage),
                batch_creates=c.batch_creates,
                batch_retrievals=c.batch_retrievals,
                batch_samples=c.batch_samples,
                parked=c.parked,
                success_times=list(c.success_times),
                request_times=list(c.request_times),
                sampling=collections.Counter(c.sampling),
            )

    def release(self, *, reject: bool = False) -> None:
        """Let parked requests through (or answer them 503 without serving, with reject=True); returns
        once every parked request has been answered."""

        async def open_gate() -> None:
            self.hold_after = None
            self._reject_held = reject
            self._gate.set()
            while self.counters.parked:
                await asyncio.sleep(0.01)

        asyncio.run_coroutine_threadsafe(open_gate(), self._loop).result(30)

    def configure(self, **settings: Any) -> None:
        """Change settings (fault_rate, hold_after, batch_hold, ...) between runs."""
        with self._lock:
            for name, value in settings.items():
                if not hasattr(self, name):
                    raise AttributeError(name)
                setattr(self, name, value)
            if "hold_after" in settings and self._loop is not None:
                self._loop.call_soon_threadsafe(self._gate.clear)
                self._reject_held = False

    # ---------------------------------------------------------------- HTTP plumbing

    async def _serve_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self._tasks.add(task)
        conn = h11.Connection(h11.SERVER)
        try:
            while True:
                request, body = await self._read_request(conn, reader)
                if request is None:
                    break
                outcome = await self._route(request, body)
                if outcome == "reset":
                    sock = writer.get_extra_info("socket")
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    writer.transport.abort()
                    return
                status, headers, payload = outcome
                headers = [("content-type", "application/json"), ("content-length", str(len(payload))), *headers]
                writer.write(conn.send(h11.Response(status_code=status, headers=headers)))
                writer.write(conn.send(h11.Data(data=payload)))
                writer.write(conn.send(h11.EndOfMessage()))
                await writer.drain()
                if conn.our_state is h11.MUST_CLOSE or conn.their_state is h11.MUST_CLOSE:
                    break
                conn.start_next_cycle()
        except (ConnectionError, h11.RemoteProtocolError, asyncio.CancelledError):
            pass
        finally:
            self._tasks.discard(task)
            if not writer.transport.is_closing():
                writer.close()

    @staticmethod
    async def _read_request(conn: h11.Connection, reader: asyncio.StreamReader):
        request, chunks = None, []
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                data = await reader.read(65536)
                conn.receive_data(data)
                if not data and conn.their_state is not h11.DONE:
                    if request is None:
                        return None, b""
                continue
            if isinstance(event, h11.Request):
                request = event
            elif isinstance(event, h11.Data):
                chunks.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                return request, b"".join(chunks)
            elif isinstance(event, h11.ConnectionClosed):
                return None, b""

    async def _route(self, request: h11.Request, body: bytes):
        method = request.method.decode()
        target = request.target.decode()
        path = target.split("?", 1)[0]
        headers = {k.decode().lower(): v.decode() for k, v in request.headers}
        if method == "POST" and path == "/v1/chat/completions":
            return await self._model_call(json.loads(body), "openai", headers=headers)
        gemini = _GEMINI_PATH.match(path)
        if method == "POST" and gemini:
            return await self._model_call(json.loads(body), "gemini", gemini.group(1), headers=headers)
        if method == "POST" and path == "/v1/files":
            return self._upload(headers.get("content-type", ""), body)
        if method == "GET" and path.startswith("/v1/files/"):
            return self._file(path.removeprefix("/v1/files/"))
        if method == "POST" and path == "/v1/batches":
            return self._create_batch(json.loads(body))
        if method == "GET" and path == "/v1/batches":
            return _json(200, {"object": "list", "data": list(reversed(self._batches.values())), "has_more": False})
        if method == "GET" and path.startswith("/v1/batches/"):
            return self._retrieve_batch(path.removeprefix("/v1/batches/"))
        return _json(404, {"error": {"message": f"no route {method} {path}", "type": "invalid_request_error"}})

    # ---------------------------------------------------------------- judging

    def _take_rate_token(self) -> float | None:
        """None if the request may pass the rpm limit, else seconds until it could."""
        if self.rpm_limit is None:
            return None
        rate = self.rpm_limit / 60.0
        capacity = max(1.0, rate)
        now = time.monotonic()
        self._bucket = max(0.0, self._bucket - (now - self._bucket_time) * rate)
        self._bucket_time = now
        if self._bucket + 1 > capacity + 1e-9:
            return (self._bucket + 1 - capacity) / rate
        self._bucket += 1
        return None

    async def _model_call(self, body: dict, api: str, model: str | None = None, headers: dict | None = None):
        headers = headers or {}
        system, user = _texts(body, api)
        generating = len(set(_MODEL_TAG.findall(user))) < 2
        if self.require_key is not None:
            given = headers.get("x-goog-api-key") or headers.get("authorization", "").removeprefix("Bearer ")
            if given != self.require_key:
                with self._lock:
                    self.counters.requests += 1
                    self.counters.generation_requests += generating
                return _error(api, 401, f"Incorrect API key provided: {given}.")
        with self._lock:
            self.counters.requests += 1
            self.counters.generation_requests += generating
            if self.record_times:
                self.counters.request_times.append(time.monotonic())
            n = _requested_samples(body, api)
            self.counters.sampling[_sampling(body, api)] += 1
            if self.counters.requests <= self.fault_first:
                fault = self.fault_kinds[(self.counters.requests - 1) % len(self.fault_kinds)]
            else:
                fault = self.fault_rng.choice(self.fault_kinds) if self.fault_rng.random() < self.fault_rate else None
            if fault:
                self.counters.faults[fault] += 1
            wait = None if fault else self._take_rate_token()
            if wait is not None:
                self.counters.rate_limited += 1
        if fault == "reset":
            return "reset"
        if fault == "stall":
            await asyncio.sleep(self.stall_s)
            return _error(api, 504, "stalled")
        if fault in ("429", "500"):
            code = int(fault)
            return _error(api, code, "injected fault", retry_after=self.retry_after_s if code == 429 else None)
        if wait is not None:
            return _error(api, 429, "rate limit reached", retry_after=wait)
        if n > 1 and self.multi_sample == "reject":
            with self._lock:
                self.counters.multi_sample_rejections += 1
            return _error(api, 400, "n > 1 is not supported by this model")
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        if self.hold_after is not None:
            with self._lock:
                over = self.counters.successes >= self.hold_after
            if over:
                with self._lock:
                    self.counters.parked += 1
                try:
                    await self._gate.wait()
                finally:
                    with self._lock:
                        self.counters.parked -= 1
                if self._reject_held:
                    with self._lock:
                        self.counters.released_unserved += 1
                    return _error(api, 503, "released without serving")
        if generating:
            return self._answer(body, api, model or body.get("model", "?"), user)
        count = 1 if (self.multi_sample == "ignore") else n
        with self._lock:
            texts = [self._verdict_text(system, user) for _ in range(count)]
            malformed = sum(t is None for t in texts)
            texts = [t if t is not None else "I cannot say which answer is better." for t in texts]
            self.counters.successes += 1
            if self.record_times:
                self.counters.success_times.append(time.monotonic())
            self.counters.malformed_responses += malformed > 0
            self.counters.malformed_samples += malformed
            self.counters.paid_samples[_cell(user)] += count
        prompt_tokens = (len(system) + len(user)) // 4
        completion_tokens = [max(1, len(t) // 4) for t in texts]
        if api == "openai":
            return _json(200, _chat_completion(body.get("model", "?"), texts, prompt_tokens, completion_tokens))
        return _json(200, _gemini_response(model, texts, prompt_tokens, completion_tokens))

    def _answer(self, body: dict, api: str, model: str, user: str):
        """A model's answer to a prompt (module docstring: Generating)."""
        text, usage = self._answer_text(model, user)
        if api == "openai":
            return _json(200, _chat_completion(body.get("model", "?"), [text], usage[0], [usage[1]]))
        return _json(200, _gemini_response(model, [text], usage[0], [usage[1]]))

    def _answer_text(self, model: str, user: str) -> tuple[str, tuple[int, int]]:
        """The planted answer (or an empty one) of `model` to the prompt in `user`, and its usage, counted."""
        prompt = _PROMPT_TAG.search(user)
        prompt_id = prompt.group(1) if prompt else "?"
        with self._lock:
            empty = self.empty_rng.random() < self.empty_rate
            text = "" if empty else planted_response(model, prompt_id)
            usage = (max(1, len(user) // 4), len(text) // 4)
            self.counters.successes += 1
            self.counters.paid_answers[model, prompt_id] += 1
            self.counters.empty_answers += empty
            self.counters.answer_usage[model, prompt_id] = usage
        return text, usage

    def _noise_draw(self, cell: tuple[str, str, str]) -> float:
        """The judge noise of the cell's next verdict: the k-th draw of a cell is the same whatever the
        order in which concurrent requests arrive, so verdicts do not depend on scheduling."""
        k = self._verdicts_drawn[cell]
        self._verdicts_drawn[cell] += 1
        return random.Random(f"{self.seed}:{':'.join(cell)}:{k}").gauss(0, self.noise)

    def _verdict_text(self, system: str, user: str) -> str | None:
        """A judge output for the user message, or None for a malformed one (caller holds the lock)."""
        if self.malformed_rng.random() < self.malformed_rate:
            return None
        labels = FIVE if "[[A>>B]]" in system else THREE
        tags = list(dict.fromkeys(_MODEL_TAG.findall(user)))
        model_a, model_b = (tags[0], tags[1]) if len(tags) >= 2 else ("?", "?")
        if self.always_a:
            label = labels[0]
        else:
            d = self.qualities.get(model_a, 0.0) - self.qualities.get(model_b, 0.0) + self._noise_draw(_cell(user))
            if labels is FIVE:
                label = (
                    "A>>B" if d > 0.6 else "A>B" if d > 0.2 else "A=B" if d >= -0.2 else "B>A" if d >= -0.6 else "B>>A"
                )
            else:
                label = "A>B" if d > 0.2 else "A=B" if d >= -0.2 else "B>A"
        decoy = labels[-1] if label != labels[-1] else labels[0]
        return (
            f"Both answers address the request. One might first think [[{decoy}]], but checking the "
            f"details changes that.\n\nMy final verdict is [[{label}]]."
        )

    # ---------------------------------------------------------------- files and batches

    def _upload(self, content_type: str, body: bytes):
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            f"Content-Type: {content_type}\r\n\r\n".encode() + body
        )
        fields, filename = {}, "upload.jsonl"
        for part in message.iter_parts():
            name = part.get_param("name", header="content-disposition")
            fields[name] = part.get_payload(decode=True)
            filename = part.get_filename() or filename
        if "file" not in fields:
            return _json(400, {"error": {"message": "multipart field 'file' missing"}})
        file_id = f"file-{uuid.uuid4().hex[:12]}"
        self._files[file_id] = fields["file"]
        return _json(200, _file_object(file_id, filename, len(fields["file"]), (fields.get("purpose") or b"").decode()))

    def _file(self, rest: str):
        file_id, _, tail = rest.partition("/")
        if file_id not in self._files:
            return _json(404, {"error": {"message": f"no file {file_id}"}})
        if tail == "content":
            return 200, [("content-type", "application/octet-stream")], self._files[file_id]
        return _json(200, _file_object(file_id, file_id, len(self._files[file_id]), "batch"))

    def _create_batch(self, body: dict):
        if body.get("input_file_id") not in self._files:
            return _json(400, {"error": {"message": f"no file {body.get('input_file_id')}"}})
        batch_id = f"batch_{uuid.uuid4().hex[:12]}"
        lines = self._files[body["input_file_id"]].decode().splitlines()
        with self._lock:
            self.counters.batch_creates += 1
        self._batches[batch_id] = {
            "id": batch_id,
            "object": "batch",
            "endpoint": body.get("endpoint"),
            "errors": None,
            "input_file_id": body["input_file_id"],
            "completion_window": body.get("completion_window", "24h"),
            "status": "validating",
            "output_file_id": None,
            "error_file_id": None,
            "created_at": int(time.time()),
            "request_counts": {"total": len([line for line in lines if line.strip()]), "completed": 0, "failed": 0},
            "metadata": body.get("metadata"),
        }
        return _json(200, self._batches[batch_id])

    def _retrieve_batch(self, batch_id: str):
        batch = self._batches.get(batch_id)
        if batch is None:
            return _json(404, {"error": {"message": f"no batch {batch_id}"}})
        self._batch_polls_seen[batch_id] += 1
        with self._lock:
            self.counters.batch_retrievals += 1
        if batch["status"] == "validating":
            batch["status"] = "in_progress"
        elif (
            batch["status"] == "in_progress"
            and not self.batch_hold
            and self._batch_polls_seen[batch_id] >= self.batch_polls
        ):
            self._run_batch(batch)
        return _json(200, batch)

    def _run_batch(self, batch: dict) -> None:
        outputs, errors = [], []
        for line in self._files[batch["input_file_id"]].decode().splitlines():
            if not line.strip():
                continue
            item = json.loads(line)
            body = item["body"]
            n = _requested_samples(body, "openai")
            request_id = f"req_{uuid.uuid4().hex[:10]}"
            if n > 1 and self.multi_sample == "reject":
                errors.append(
                    {
                        "id": f"batch_req_{uuid.uuid4().hex[:10]}",
                        "custom_id": item["custom_id"],
                        "response": {
                            "status_code": 400,
                            "request_id": request_id,
                            "body": {"error": {"message": "n > 1 is not supported"}},
                        },
                        "error": None,
                    }
                )
                continue
            system, user = _texts(body, "openai")
            if len(set(_MODEL_TAG.findall(user))) < 2:  # a model asked for its answer (Generating)
                text, usage = self._answer_text(body.get("model", "?"), user)
                completion = _chat_completion(body.get("model", "?"), [text], usage[0], [usage[1]])
            else:
                with self._lock:
                    texts = [self._verdict_text(system, user) for _ in range(n)]
                    self.counters.malformed_samples += sum(t is None for t in texts)
                    texts = [t if t is not None else "No verdict from me." for t in texts]
                    self.counters.paid_samples[_cell(user)] += n
                    self.counters.batch_samples += n
                completion = _chat_completion(
                    body.get("model", "?"), texts, (len(system) + len(user)) // 4, [max(1, len(t) // 4) for t in texts]
                )
            outputs.append(
                {
                    "id": f"batch_req_{uuid.uuid4().hex[:10]}",
                    "custom_id": item["custom_id"],
                    "response": {"status_code": 200, "request_id": request_id, "body": completion},
                    "error": None,
                }
            )
        for kind, records in (("output_file_id", outputs), ("error_file_id", errors)):
            if records:
                file_id = f"file-{uuid.uuid4().hex[:12]}"
                self._files[file_id] = "".join(json.dumps(r) + "\n" for r in records).encode()
                batch[kind] = file_id
        batch["status"] = "completed"
        batch["request_counts"]["completed"] = len(outputs)
        batch["request_counts"]["failed"] = len(errors)


# -------------------------------------------------------------------- wire formats


def _json(status: int, payload: dict, headers: list | None = None):
    return status, headers or [], json.dumps(payload).encode()


def _error(api: str, status: int, message: str, retry_after: float | None = None):
    headers = []
    if retry_after is not None:
        headers = [
            ("retry-after-ms", str(int(math.ceil(retry_after * 1000)))),
            ("retry-after", str(int(math.ceil(retry_after)))),
        ]
    if api == "gemini":
        names = {
            400: "INVALID_ARGUMENT",
            429: "RESOURCE_EXHAUSTED",
            500: "INTERNAL",
            503: "UNAVAILABLE",
            504: "DEADLINE_EXCEEDED",
        }
        payload = {"error": {"code": status, "message": message, "status": names.get(status, "UNKNOWN")}}
    else:
        payload = {
            "error": {
                "message": message,
                "type": "server_error" if status >= 500 else "invalid_request_error",
                "code": None,
            }
        }
    return _json(status, payload, headers)


def _requested_samples(body: dict, api: str) -> int:
    if api == "openai":
        return int(body.get("n") or 1)
    return int((body.get("generationConfig") or {}).get("candidateCount") or 1)


def _sampling(body: dict, api: str) -> tuple:
    """(max output tokens, temperature) a chat or generateContent body asks for (None: not given)."""
    if api == "openai":
        return body.get("max_completion_tokens") or body.get("max_tokens"), body.get("temperature")
    config = body.get("generationConfig") or {}
    return config.get("maxOutputTokens"), config.get("temperature")


def _texts(body: dict, api: str) -> tuple[str, str]:
    """(system text, user text) of a chat or generateContent body."""
    if api == "openai":
        system = "\n".join(m["content"] for m in body["messages"] if m["role"] == "system")
        user = "\n".join(m["content"] for m in body["messages"] if m["role"] == "user")
        return system, user
    instruction = body.get("systemInstruction") or {}
    system = "\n".join(p.get("text", "") for p in instruction.get("parts", []))
    user = "\n".join(p.get("text", "") for c in body.get("contents", []) for p in c.get("parts", []))
    return system, user


def _cell(user: str) -> tuple[str, str, str]:
    prompt = _PROMPT_TAG.search(user)
    models = list(dict.fromkeys(_MODEL_TAG.findall(user)))
    return (prompt.group(1) if prompt else "?", models[0] if models else "?", models[1] if len(models) > 1 else "?")


def _chat_completion(model: str, texts: list[str], prompt_tokens: int, completion_tokens: list[int]) -> dict:
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": i, "message": {"role": "assistant", "content": t}, "finish_reason": "stop"}
            for i, t in enumerate(texts)
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": sum(completion_tokens),
            "total_tokens": prompt_tokens + sum(completion_tokens),
        },
    }


def _gemini_response(model: str, texts: list[str], prompt_tokens: int, completion_tokens: list[int]) -> dict:
    return {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": t}]}, "finishReason": "STOP", "index": i}
            for i, t in enumerate(texts)
        ],
        "usageMetadata": {
            "promptTokenCount": prompt_tokens,
            "candidatesTokenCount": sum(completion_tokens),
            "totalTokenCount": prompt_tokens + sum(completion_tokens),
        },
        "modelVersion": model,
    }


def _file_object(file_id: str, filename: str, size: int, purpose: str) -> dict:
    return {
        "id": file_id,
        "object": "file",
        "bytes": size,
        "created_at": int(time.time()),
        "filename": filename,
        "purpose": purpose or "batch",
        "status": "processed",
    }


def plant_dataset(con, dataset: str, prompt_ids: list[str], models: list[str]) -> None:
    """Store prompts and every model's planted answer through the warehouse's catalog functions."""
    import hashlib

    from eqarena.warehouse.catalog import MODELS, PROMPTS, RESPONSES, transaction, write_rows

    with transaction(con):
        write_rows(
            con,
            PROMPTS,
            [
                {"dataset": dataset, "prompt_id": p, "category": None, "cluster": None, "text": planted_prompt(p)}
                for p in prompt_ids
            ],
        )
        write_rows(con, MODELS, [{"model_id": m, "family": m.rstrip("0123456789")} for m in models])
        rows = []
        for p in prompt_ids:
            for m in models:
                text = planted_response(m, p)
                rows.append(
                    {
                        "dataset": dataset,
                        "prompt_id": p,
                        "model_id": m,
                        "response_id": None,
                        "text": text,
                        "text_sha256": hashlib.sha256(text.encode()).hexdigest(),
                    }
                )
        write_rows(con, RESPONSES, rows)
