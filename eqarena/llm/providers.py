"""LLM providers behind one small interface, chosen by a spec string.

    openai:MODEL                       the OpenAI API (key: OPENAI_API_KEY; OPENAI_BASE_URL is honoured)
    gemini:MODEL                       the Gemini API via google-genai (key: GEMINI_API_KEY or GOOGLE_API_KEY)
    openai-compatible:MODEL@BASE_URL   any OpenAI-compatible server: vLLM, llama.cpp, Ollama, ...
    recorded:JUDGE[@DB]                replays JUDGE's stored judgments offline (eqarena/judge/replay.py, made by
                                       eqarena/judge/judges.py)

`openai:` and `gemini:` also accept `@BASE_URL` (a proxy or a test server). An openai-compatible server
gets OPENAI_API_KEY when it is set (that key is then sent to that server) and a placeholder key
otherwise, since local servers usually need none. The judge id stored with each judgment is
`PROVIDER:MODEL`, without the base URL, so the same model served elsewhere continues the same judgments.

Providers do one request and report what happened; retries, rate limits and budgets are the
runner's (eqarena/judge/runner.py). SDK-level retries are switched off so that every attempt passes
through the runner's rate limiter and is counted. Keys are read from the environment when a provider
is made, handed to the SDK, and never logged, stored or put in an error message.
"""

from __future__ import annotations

import email.utils
import os
import re
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import httpx
import httpx2

from eqarena.exceptions import EqarenaError, exception_chain
from eqarena.options import GenerationOptions

PROVIDERS = ("openai", "gemini", "openai-compatible", "recorded")
LIVE_PROVIDERS = PROVIDERS[:3]  # the ones that generate: a model's answers come only from these
PLACEHOLDER_KEY = "no-key"
FATAL_STATUS = (401, 403, 404)  # wrong key, no access, unknown model: stop the run, do not write rows
TRANSIENT_STATUS = (408, 409, 429, 500, 502, 503, 504)

Messages = list[dict[str, str]]  # [{"role": "system"|"user", "content": ...}]

_KEY_PATTERNS = re.compile(r"(sk-[A-Za-z0-9_\-*]{6,}|AIza[0-9A-Za-z_\-]{10,})")


class JudgeSpecError(EqarenaError, ValueError):
    """A provider spec string (--judge, --model) is malformed or its key is missing."""


class FatalProviderError(EqarenaError, RuntimeError):
    """The provider refuses every request (bad key, no access, unknown model): the run stops."""


class JudgeUnreachableError(FatalProviderError):
    """Nothing listens at the judge's address (connection refused): the run stops."""


@dataclass(frozen=True)
class JudgeSpec:
    """A parsed --judge spec. `judge_id` (PROVIDER:MODEL) is what judgments record."""

    provider: str
    model: str
    base_url: str | None = None

    @property
    def judge_id(self) -> str:
        return f"{self.provider}:{self.model}"


_SPEC_FORMS = {
    "openai": "openai:MODEL",
    "gemini": "gemini:MODEL",
    "openai-compatible": "openai-compatible:MODEL@BASE_URL",
    "recorded": "recorded:JUDGE",
}


def parse_judge_spec(spec: str, option: str = "--judge", providers: tuple[str, ...] = PROVIDERS) -> JudgeSpec:
    """`openai:MODEL[@URL]`, `gemini:MODEL[@URL]`, `openai-compatible:MODEL@URL` (or `recorded:JUDGE[@DB]`),
    among `providers`; errors name `option`, the flag the spec came from."""
    provider, sep, rest = spec.partition(":")
    if not sep or provider not in providers:
        forms = [_SPEC_FORMS[p] for p in providers]
        raise JudgeSpecError(f"{option} {spec!r}: expected {', '.join(forms[:-1])} or {forms[-1]}")
    model, _, base_url = rest.partition("@")
    model, base_url = model.strip(), base_url.strip() or None
    if not model:
        raise JudgeSpecError(f"{option} {spec!r}: the model name is empty")
    if provider == "recorded":  # recorded:JUDGE[@DB]: the judge whose judgments are replayed, the warehouse file
        return JudgeSpec(provider, model, base_url)
    if provider == "openai-compatible" and base_url is None:
        raise JudgeSpecError(
            f"{option} {spec!r}: an openai-compatible {option.strip('-')} needs the server, e.g. "
            f"openai-compatible:{model}@http://127.0.0.1:8000/v1"
        )
    if base_url is not None and not re.match(r"^https?://[^\s/]+", base_url):
        raise JudgeSpecError(f"{option} {spec!r}: base URL {base_url!r} must start with http:// or https://")
    return JudgeSpec(provider, model, base_url)


@dataclass(frozen=True)
class Completion:
    """One provider response: the text of each returned sample and the token usage of the request.

    Token counts are None when the server does not report usage.
    """

    texts: tuple[str, ...]
    tokens_in: int | None
    tokens_out: int | None


OPENAI_URL = "https://api.openai.com/v1"
GEMINI_URL = "https://generativelanguage.googleapis.com"


def base_url(spec: JudgeSpec) -> str:
    """The address a spec's requests go to: its @BASE_URL, else the SDK's default (or the SDK's
    environment variable for it)."""
    if spec.base_url:
        return spec.base_url
    if spec.provider == "gemini":
        return os.environ.get("GOOGLE_GEMINI_BASE_URL") or GEMINI_URL
    return os.environ.get("OPENAI_BASE_URL") or OPENAI_URL


def connection_refused(exc: BaseException) -> bool:
    """Whether `exc` comes from a refused connection (nothing listens at the address): a
    ConnectionRefusedError among its causes and contexts, or in an exception group among them (a
    host name with several addresses fails with one error per address)."""
    return any(isinstance(error, ConnectionRefusedError) for error in exception_chain(exc))


def _headers_of(exc: BaseException):
    response = getattr(exc, "response", None)
    return getattr(response, "headers", None)


def retry_after_seconds(exc: BaseException) -> float | None:
    """The wait a failed response asks for: `retry-after-ms`, else `retry-after` (seconds or a date);
    an error that carries it already read (`retry_after_s`, a call made on a Dask worker) gives that."""
    carried = getattr(exc, "retry_after_s", None)
    if carried is not None:
        return max(0.0, float(carried))
    headers = _headers_of(exc)
    if not headers:
        return None
    value = headers.get("retry-after-ms")
    if value is not None:
        try:
            return max(0.0, float(value) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


class Provider(ABC):
    """One judge model behind one SDK. `complete` asks for `n` samples of one prompt in one request."""

    def __init__(self, spec: JudgeSpec, secrets: tuple[str, ...] = ()):
        self.spec = spec
        self._secrets = tuple(s for s in secrets if s and s != PLACEHOLDER_KEY)

    @abstractmethod
    async def complete(self, messages: Messages, n: int, options: GenerationOptions) -> Completion:
        """Send one request for `n` samples; raise the SDK's exception on failure."""

    @abstractmethod
    def status_of(self, exc: BaseException) -> int | None:
        """The HTTP status of a failed request, None for network errors and timeouts."""

    @abstractmethod
    def is_network_error(self, exc: BaseException) -> bool:
        """A connection error, reset or timeout (worth retrying)."""

    async def aclose(self) -> None:
        """Release the HTTP connections; by default there are none to release, and this does nothing."""
        return None

    def is_transient(self, exc: BaseException) -> bool:
        """Worth retrying: network errors, timeouts, 408/409/429 and 5xx."""
        status = self.status_of(exc)
        return self.is_network_error(exc) or (status is not None and (status in TRANSIENT_STATUS or status >= 500))

    def is_fatal(self, exc: BaseException) -> bool:
        return self.status_of(exc) in FATAL_STATUS

    def is_refused(self, exc: BaseException) -> bool:
        """The connection was refused: no server listens at the judge's address."""
        return connection_refused(exc)

    @property
    def base_url(self) -> str:
        return base_url(self.spec)

    def rejects_multiple_samples(self, exc: BaseException, n: int) -> bool:
        """The request was refused because it asked for several samples (HTTP 400 with n > 1)."""
        return n > 1 and self.status_of(exc) in (400, 422)

    def describe(self, exc: BaseException) -> str:
        """One line for the judgments.error column and logs: type, status, message; keys scrubbed."""
        status = self.status_of(exc)
        message = " ".join(str(exc).split())
        for secret in self._secrets:
            message = message.replace(secret, "***")
        message = _KEY_PATTERNS.sub("***", message)[:400]  # scrubbed before cutting: no partial key left
        return f"{type(exc).__name__}" + (f" (HTTP {status})" if status else "") + (f": {message}" if message else "")


class OpenAIProvider(Provider):
    """`openai:` and `openai-compatible:` judges through the `openai` SDK's async client."""

    def __init__(self, spec: JudgeSpec, *, timeout_s: float, option: str = "--judge"):
        import openai

        self._openai = openai
        if spec.provider == "openai":
            key = os.environ.get("OPENAI_API_KEY")
            if not key:
                raise JudgeSpecError(f"{option} {spec.judge_id}: set OPENAI_API_KEY in the environment")
        else:
            key = os.environ.get("OPENAI_API_KEY") or PLACEHOLDER_KEY
        super().__init__(spec, (key,))
        self.client = openai.AsyncOpenAI(api_key=key, base_url=spec.base_url, max_retries=0, timeout=timeout_s)

    def request_body(self, messages: Messages, n: int, options: GenerationOptions) -> dict[str, Any]:
        """The chat-completions request body (also one line of a Batch API file)."""
        body: dict[str, Any] = {"model": self.spec.model, "messages": messages}
        if options.max_tokens is not None:
            # OpenAI's current models take max_completion_tokens; most other servers know max_tokens.
            body["max_completion_tokens" if self.spec.provider == "openai" else "max_tokens"] = options.max_tokens
        if options.temperature is not None:
            body["temperature"] = options.temperature
        if n != 1:
            body["n"] = n
        return body

    async def complete(self, messages: Messages, n: int, options: GenerationOptions) -> Completion:
        response = await self.client.chat.completions.create(**self.request_body(messages, n, options))
        return completion_from_chat(response.choices, response.usage)

    def status_of(self, exc: BaseException) -> int | None:
        return exc.status_code if isinstance(exc, self._openai.APIStatusError) else None

    def is_network_error(self, exc: BaseException) -> bool:
        return isinstance(exc, self._openai.APIConnectionError)  # includes APITimeoutError

    async def aclose(self) -> None:
        await self.client.close()


def completion_from_chat(choices: list[Any], usage: Any) -> Completion:
    """A Completion from chat-completion choices and usage (SDK objects or the same as plain dicts)."""

    def get(obj: Any, name: str) -> Any:
        return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)

    ordered = sorted(choices, key=lambda c: get(c, "index") or 0)
    return Completion(
        texts=tuple((get(get(c, "message"), "content") or "") for c in ordered),
        tokens_in=get(usage, "prompt_tokens") if usage is not None else None,
        tokens_out=get(usage, "completion_tokens") if usage is not None else None,
    )


class GeminiProvider(Provider):
    """`gemini:` judges through the google-genai SDK's async client (`client.aio`)."""

    def __init__(self, spec: JudgeSpec, *, timeout_s: float, option: str = "--judge"):
        from google import genai
        from google.genai import errors, types

        key = os.environ.get("GEMINI_API_KEY") or os.environ.get("GOOGLE_API_KEY")
        if not key:
            raise JudgeSpecError(f"{option} {spec.judge_id}: set GEMINI_API_KEY (or GOOGLE_API_KEY) in the environment")
        super().__init__(spec, (key,))
        self._errors, self._types = errors, types
        http_options = types.HttpOptions(base_url=spec.base_url, timeout=int(timeout_s * 1000))
        # No retry_options: the SDK then makes exactly one attempt per call.
        self.client = genai.Client(api_key=key, http_options=http_options)

    async def complete(self, messages: Messages, n: int, options: GenerationOptions) -> Completion:
        types = self._types
        system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
        contents = [
            types.Content(role="user" if m["role"] == "user" else "model", parts=[types.Part(text=m["content"])])
            for m in messages
            if m["role"] != "system"
        ]
        config = types.GenerateContentConfig(
            system_instruction=system or None,
            candidate_count=n if n != 1 else None,
            max_output_tokens=options.max_tokens,
            temperature=options.temperature,
        )
        response = await self.client.aio.models.generate_content(
            model=self.spec.model, contents=contents, config=config
        )
        texts = []
        for candidate in sorted(response.candidates or [], key=lambda c: c.index or 0):
            parts = (candidate.content.parts if candidate.content else None) or []
            texts.append("".join(p.text for p in parts if p.text and not p.thought))
        usage = response.usage_metadata
        tokens_out = None
        if usage is not None and usage.candidates_token_count is not None:
            tokens_out = usage.candidates_token_count + (
                usage.thoughts_token_count or 0
            )  # thoughts are billed as output
        return Completion(
            texts=tuple(texts),
            tokens_in=usage.prompt_token_count if usage is not None else None,
            tokens_out=tokens_out,
        )

    def status_of(self, exc: BaseException) -> int | None:
        return exc.code if isinstance(exc, self._errors.APIError) else None

    def is_network_error(self, exc: BaseException) -> bool:
        return isinstance(exc, (httpx.TransportError, httpx2.TransportError, TimeoutError, ConnectionError))

    async def aclose(self) -> None:
        await self.client.aio.aclose()


def make_provider(spec: JudgeSpec | str, *, timeout_s: float = 120.0, option: str = "--judge") -> Provider:
    """The provider for a spec; raises JudgeSpecError (naming `option`) when the spec is malformed or its
    key is missing."""
    if isinstance(spec, str):
        spec = parse_judge_spec(spec, option)
    if spec.provider == "recorded":
        raise JudgeSpecError(f"{option}: a recorded judge is made by eqarena.judge.judges.make_judge_provider")
    if spec.provider == "gemini":
        return GeminiProvider(spec, timeout_s=timeout_s, option=option)
    return OpenAIProvider(spec, timeout_s=timeout_s, option=option)
