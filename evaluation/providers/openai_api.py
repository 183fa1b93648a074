"""OpenAI: the Responses API (reasoning effort, JSON schema output); chat completions for any
OpenAI-compatible base URL (Ollama, vLLM, llama.cpp server, LM Studio)."""

import functools
import hashlib
import itertools
import json
import os
import ssl
import time
import urllib.request
from typing import Any
from urllib.parse import unquote

import certifi
import openai
import urllib3
from openai.types.responses.response_create_params import ResponseCreateParamsNonStreaming

from evaluation.providers import ratelimit
from evaluation.providers.base import (
    Completion,
    Message,
    NoReplyError,
    Provider,
    Request,
    RetryableError,
    ToolCall,
    Usage,
    error_message,
    parse_retry_after,
    status_error,
)
from evaluation.providers.capabilities import terms_for
from evaluation.providers.compat import (
    EndpointTraits,
    alternating,
    refuses_format,
    refuses_roles,
    response_format,
    schema_instruction,
)


class OpenAIProvider(Provider):
    name = "openai"
    default_model = "gpt-5.2"
    key_env = "OPENAI_API_KEY"

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        # A custom base URL is usually a local OpenAI-compatible server: chat completions, maybe no key.
        self.api = self.options.get("api") or ("chat" if self.base_url else "responses")
        self.takes_seed = self.api == "chat"  # the Responses API has no seed parameter
        # OpenAI-compatible servers at a typed base URL get the chat wire format straight over urllib3;
        # OpenAI's own endpoint (and {"client": "sdk"}) keeps the SDK, whose client (an httpx pool and a
        # TLS context: some 40 ms of CPU to make) is made only then.
        self.compat = (
            CompatChat(self.base_url, self.api_key)
            if self.base_url and self.api == "chat" and self.options.get("client") != "sdk"
            else None
        )
        self.traits = EndpointTraits(self.options) if self.compat is not None else None
        if self.compat is None:
            # Always an explicit key: the SDK would otherwise read OPENAI_API_KEY itself, whatever the URL.
            self.client = openai.OpenAI(api_key=self.api_key or "none", base_url=self.base_url or None, max_retries=0)

    def generate(self, request: Request) -> Completion:
        if self.compat is not None:
            return self._compat_chat(request)
        try:
            if self.api == "chat":
                return self._chat(request)
            return self._responses(request)
        except openai.APIStatusError as exc:
            raise status_error(
                self.name, exc.status_code, error_message(exc), parse_retry_after(exc.response.headers), self.key_hint
            ) from exc
        except openai.APITimeoutError as exc:
            raise NoReplyError(f"{self.name}: no reply within {request.timeout:g}s") from exc
        except openai.APIConnectionError as exc:
            raise RetryableError(f"{self.name}: connection failed ({exc.__cause__ or exc})") from exc
        except (openai.APIResponseValidationError, ValueError) as exc:  # ValueError: a body that is not JSON
            raise RetryableError(f"{self.name}: malformed response ({exc})") from exc

    def _responses(self, request: Request) -> Completion:
        body: dict[str, Any] = dict(responses_body(request, cache=self.options.get("prompt_cache", True) is not False))
        raw = self.client.responses.with_raw_response.create(**body, timeout=request.timeout)
        response = raw.parse()
        usage = response.usage
        details = getattr(usage, "output_tokens_details", None) if usage else None
        input_details = getattr(usage, "input_tokens_details", None) if usage else None
        calls = [
            ToolCall(item.call_id, item.name, _arguments(item.arguments))
            for item in response.output or []
            if getattr(item, "type", "") == "function_call"
        ]
        return Completion(
            tool_calls=calls,
            text=response.output_text or "",
            usage=Usage(
                input_tokens=getattr(usage, "input_tokens", 0) or 0,
                cached_input_tokens=getattr(input_details, "cached_tokens", 0) or 0,
                # openai 3.54's ResponseUsage reports the tokens written to the cache (billed from GPT-5.6 on).
                cache_write_tokens=getattr(input_details, "cache_write_tokens", 0) or 0,
                output_tokens=getattr(usage, "output_tokens", 0) or 0,
                thinking_tokens=getattr(details, "reasoning_tokens", 0) or 0,
                calls=1,
            ),
            model=response.model or request.model,
            headers=raw.headers,
        )

    def timeout_for(self, request: Request) -> float:
        """The call's timeout: the configured one, or longer where the endpoint's measured speed needs it to
        produce max_tokens (a local server on two cores makes some 30 tokens a second)."""
        needed = None
        if self.traits is not None:
            prompt = ratelimit.estimate_tokens(request.messages, request.schema, request.tools)
            needed = self.traits.seconds_needed(prompt, request.settings.max_tokens)
        return max(request.timeout, needed or 0.0)

    def _compat_chat(self, request: Request) -> Completion:
        assert self.compat is not None and self.traits is not None
        traits = self.traits
        timeout = self.timeout_for(request)
        mode, alternate = traits.json_mode, traits.alternate_roles
        while True:
            body = compat_body(request, mode, alternate=alternate)
            started = time.perf_counter()
            try:
                data, headers = self.compat.create(body, timeout)
                break
            except urllib3.exceptions.HTTPError as exc:
                # urllib3 makes a refused connection (NewConnectionError) a kind of connect timeout.
                timed_out = isinstance(exc, urllib3.exceptions.TimeoutError) and not isinstance(
                    exc, urllib3.exceptions.NewConnectionError
                )
                if timed_out:
                    raise NoReplyError(f"{self.name}: no reply within {timeout:g}s") from exc
                raise RetryableError(f"{self.name}: connection failed ({exc})") from exc
            except CompatStatusError as exc:
                # A strict chat template refusing the order of roles: the same conversation with alternating roles.
                if not alternate and exc.status in (400, 422, 500) and refuses_roles(exc.message):
                    alternate = True
                    continue
                # A server that takes another way of asking for JSON (or none): the next, down to the prompt alone.
                following = traits.following_mode(mode) if request.schema is not None else None
                if following is not None and refuses_format(exc.status, exc.message):
                    mode = following
                    continue
                raise status_error(self.name, exc.status, exc.message, exc.retry_after, self.key_hint) from exc
        traits.learned(mode, alternate)
        traits.observe(data, time.perf_counter() - started)
        try:
            choice = (data.get("choices") or [None])[0] or {}
            message = choice.get("message") or {}
            usage = data.get("usage") or {}
            calls = [
                ToolCall(c["id"], c["function"]["name"], _arguments(c["function"].get("arguments")))
                for c in message.get("tool_calls") or []
                if c.get("function")
            ]
            return Completion(
                tool_calls=calls,
                text=message.get("content") or "",
                usage=Usage(
                    input_tokens=usage.get("prompt_tokens") or 0,
                    cached_input_tokens=(usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0,
                    cache_write_tokens=(usage.get("prompt_tokens_details") or {}).get("cache_write_tokens") or 0,
                    output_tokens=usage.get("completion_tokens") or 0,
                    calls=1,
                ),
                model=data.get("model") or request.model,
                headers=headers,
                stop_reason=str(choice.get("finish_reason") or ""),
            )
        except (AttributeError, KeyError, TypeError) as exc:
            raise RetryableError(f"{self.name}: malformed response ({type(exc).__name__}: {exc})") from exc

    def _chat(self, request: Request) -> Completion:
        kwargs: dict[str, Any] = {**chat_body(request), "timeout": request.timeout}
        raw = self.client.chat.completions.with_raw_response.create(**kwargs)
        response = raw.parse()
        choice = response.choices[0] if response.choices else None
        usage = response.usage
        raw_calls = (choice.message.tool_calls if choice and choice.message else None) or []
        calls = [
            ToolCall(c.id, c.function.name, _arguments(c.function.arguments))
            for c in raw_calls
            if getattr(c, "function", None)
        ]
        return Completion(
            tool_calls=calls,
            text=(choice.message.content if choice and choice.message else "") or "",
            usage=Usage(
                input_tokens=getattr(usage, "prompt_tokens", 0) or 0,
                cached_input_tokens=getattr(getattr(usage, "prompt_tokens_details", None), "cached_tokens", 0) or 0,
                cache_write_tokens=getattr(getattr(usage, "prompt_tokens_details", None), "cache_write_tokens", 0) or 0,
                output_tokens=getattr(usage, "completion_tokens", 0) or 0,
                calls=1,
            ),
            model=response.model or request.model,
            headers=raw.headers,
        )


class CompatStatusError(Exception):
    """An HTTP error status from an OpenAI-compatible server."""

    def __init__(self, status: int, message: str, retry_after: float | None):
        super().__init__(message)
        self.status, self.message, self.retry_after = status, message, retry_after


class CompatChat:
    """POST {base_url}/chat/completions over urllib3: the body is plain JSON built once per call, with
    none of the SDK's per-request transformation of the arguments and validation of the reply
    models, which cost more CPU than the HTTP exchange itself against a local server. urllib3 (a
    thread-safe connection pool over the standard library's HTTP client) takes about half the CPU of
    httpx for the same call (bench/README.md). As the SDK's httpx client does, it follows no
    redirect, goes through the proxy the environment names for the URL (HTTP(S)_PROXY or
    ALL_PROXY, credentials included, unless NO_PROXY exempts the host) and trusts certifi's CAs
    (or SSL_CERT_FILE / SSL_CERT_DIR when set)."""

    POOL_SIZE = 64
    """Connections kept open to the server: one per thread calling at once (the tutor server's 64
    turn threads, a batch's runs); beyond it a call opens one for itself and closes it after."""

    def __init__(self, base_url: str, api_key: str | None):
        # "none" without a key, as the SDK sends: never the environment's key (registry.api_key_for).
        headers = {
            "content-type": "application/json",
            "accept": "application/json",
            "authorization": f"Bearer {api_key or 'none'}",
        }
        self.url = base_url.rstrip("/") + "/chat/completions"
        tls: dict[str, Any] = {"ssl_context": _tls_context()} if self.url.startswith("https:") else {}
        proxy = _proxy_for(self.url)
        if proxy is None:
            self.pool: urllib3.PoolManager = urllib3.PoolManager(headers=headers, maxsize=self.POOL_SIZE, **tls)
            return
        parsed = urllib3.util.parse_url(proxy)
        if parsed.scheme not in ("http", "https"):
            raise ValueError(
                f"proxy {parsed.scheme}://{parsed.host}:{parsed.port or ''} (from the environment): only http:// "
                "and https:// proxies are supported for OpenAI-compatible servers; exempt the host with NO_PROXY"
            )
        auth = urllib3.make_headers(proxy_basic_auth=unquote(parsed.auth)) if parsed.auth else None
        self.pool = urllib3.ProxyManager(proxy, proxy_headers=auth, headers=headers, maxsize=self.POOL_SIZE, **tls)

    def create(self, body: dict[str, Any], timeout: float) -> tuple[dict[str, Any], Any]:
        """The reply's JSON and headers; CompatStatusError on an error status, urllib3 errors on transport failures
        (urllib3.exceptions.TimeoutError for no connection or reply within `timeout`), ValueError
        when the body is not a JSON object."""
        response = self.pool.request(
            "POST",
            self.url,
            body=json.dumps(body).encode(),
            timeout=urllib3.Timeout(connect=timeout, read=timeout),
            retries=False,  # LLM.call retries, with its own backoff and Retry-After
            redirect=False,
        )
        if response.status >= 400:
            raise CompatStatusError(response.status, _error_text(response), parse_retry_after(response.headers))
        data = json.loads(response.data)
        if not isinstance(data, dict):
            raise ValueError("the reply is not a JSON object")
        return data, response.headers


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """One TLS context for every compatible server: certifi's CAs, as the SDKs trust, or the files
    SSL_CERT_FILE / SSL_CERT_DIR name."""
    cafile, capath = os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")
    if cafile or capath:
        return ssl.create_default_context(cafile=cafile, capath=capath)
    return ssl.create_default_context(cafile=certifi.where())


def _proxy_for(url: str) -> str | None:
    """The proxy the environment names for this URL's scheme (else ALL_PROXY), with http:// when it
    names none, unless NO_PROXY exempts the URL's host."""
    parsed = urllib3.util.parse_url(url)
    proxies = urllib.request.getproxies_environment()
    proxy = proxies.get(parsed.scheme or "http") or proxies.get("all")
    # proxy_bypass_environment: NO_PROXY only, as httpx reads it (not the system settings on macOS).
    if not proxy or urllib.request.proxy_bypass_environment(parsed.host or "", proxies):  # type: ignore[attr-defined]
        return None
    return proxy if "://" in proxy else f"http://{proxy}"


def _error_text(response: urllib3.BaseHTTPResponse) -> str:
    text = response.data.decode("utf-8", errors="replace")
    try:
        body = json.loads(text)
    except ValueError:
        return text[:300] or response.reason or f"HTTP {response.status}"
    error = body.get("error", body) if isinstance(body, dict) else body
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])
    return str(error)[:300]


def prompt_cache_key(request: Request) -> str:
    """OpenAI routes calls with the same key to the same prompt cache: the role and its leading system
    messages (the stable prefix) make it, so the judge's calls over one rubric share a cache and the tutor's share another."""
    leading = itertools.takewhile(lambda m: m.role == "system", request.messages)
    system = "\n".join(m.content for m in leading)  # not a directive placed after the conversation
    return hashlib.sha256(f"{request.role}\n{system}".encode()).hexdigest()[:32]


def responses_body(request: Request, *, cache: bool) -> ResponseCreateParamsNonStreaming:
    """The Responses API's request body for a request (a direct call's and a batch line's alike), as the
    installed SDK's ResponseCreateParams types it: settings the model does not take (capabilities.terms_for)
    are not sent."""
    s = request.settings
    terms = terms_for("openai", request.model, api="responses")
    body: ResponseCreateParamsNonStreaming = {
        "model": request.model,
        "input": _responses_input(request.messages),  # type: ignore[typeddict-item]
        "max_output_tokens": s.max_tokens,
    }
    if request.tools:
        # FunctionToolParam requires strict; the Responses API makes an omitted one true, which our tools'
        # schemas (optional properties) would not satisfy.
        body["tools"] = [
            {
                "type": "function",
                "name": t["name"],
                "description": t["description"],
                "parameters": t["parameters"],
                "strict": False,
            }
            for t in request.tools
        ]
    reasoning = bool(s.reasoning_effort) and terms.reasoning_effort
    if reasoning:
        body["reasoning"] = {"effort": s.reasoning_effort}  # type: ignore[typeddict-item]
    if s.temperature is not None and terms.takes("temperature", reasoning=reasoning):
        body["temperature"] = s.temperature
    if request.schema is not None:
        body["text"] = {"format": {"type": "json_schema", "name": "result", "schema": request.schema, "strict": False}}
    if cache:
        body["prompt_cache_key"] = prompt_cache_key(request)
    return body


def chat_body(request: Request) -> dict[str, Any]:
    """The chat-completions request body (the same for the SDK and for CompatChat)."""
    s = request.settings
    kwargs: dict[str, Any] = {
        "model": request.model,
        "messages": _chat_messages(request.messages),
        "max_tokens": s.max_tokens,
    }
    if request.tools:
        kwargs["tools"] = [
            {
                "type": "function",
                "function": {"name": t["name"], "description": t["description"], "parameters": t["parameters"]},
            }
            for t in request.tools
        ]
    if s.temperature is not None:
        kwargs["temperature"] = s.temperature
    if s.seed is not None:
        kwargs["seed"] = s.seed
    if request.schema is not None:
        kwargs["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "result", "schema": request.schema, "strict": False},
        }
    return kwargs


def compat_body(request: Request, json_mode: str, *, alternate: bool) -> dict[str, Any]:
    """chat_body for an OpenAI-compatible server: JSON asked for in the way it takes (json_mode, see
    providers.compat), the schema in the prompt where the server is not told it, and the roles alternating
    where its chat template requires it."""
    body = chat_body(request)
    if request.schema is not None:
        fmt = response_format(json_mode, request.schema)
        if fmt is None:
            body.pop("response_format", None)
            body["messages"] = [{"role": "system", "content": schema_instruction(request.schema)}, *body["messages"]]
        else:
            body["response_format"] = fmt
    if alternate:
        body["messages"] = alternating(body["messages"])
    return body


def _arguments(raw: Any) -> dict[str, Any]:
    """Tool-call arguments arrive as a JSON string; a model's broken JSON becomes an empty call."""
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw or "{}")
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def _chat_messages(messages: list[Message]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "tool":
            out.append({"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content})
        elif m.tool_calls:
            calls = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
                for c in m.tool_calls
            ]
            out.append({"role": "assistant", "content": m.content or None, "tool_calls": calls})
        else:
            out.append({"role": m.role, "content": m.content})
    return out


def _responses_input(messages: list[Message]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "tool":
            out.append({"type": "function_call_output", "call_id": m.tool_call_id, "output": m.content})
            continue
        if m.content or not m.tool_calls:
            out.append({"role": m.role, "content": m.content})
        out += [
            {"type": "function_call", "call_id": c.id, "name": c.name, "arguments": json.dumps(c.arguments)}
            for c in m.tool_calls
        ]
    return out
