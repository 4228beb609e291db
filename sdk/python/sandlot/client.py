"""The HTTP client of sandlot's /v1 API, sync (Client) and async
(AsyncClient), on httpx. Retries answers 503 and 429 only, with backoff;
checks the daemon's version on the first call."""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any, Literal, TypedDict, cast

import httpx

from .errors import SandlotError, VersionMismatchError, error_from_response, make_error
from .types import (BashResult, Context, ConversationEnded, FileInfo, FileList, Language, RunAnalysisResult,
                    RunCodeResult, TenantInfo, Template, Version)

SDK_VERSION = "0.1.0"
"""The version of this SDK, the daemon release it was made with."""

Result = dict[str, Any]
"""A tool's result by name (call); the named methods return the <Tool>Result of sandlot.types."""


class Event(TypedDict, total=False):
    """One line of a streamed call: stdout and stderr (data) and rich results (result) as they happen,
    then final (result: the tool's result). An error line is raised as its typed error instead."""

    type: Literal["stdout", "stderr", "result", "final"]
    data: str
    result: Any

PathEventType = Literal["branched", "edited", "merged", "deleted", "archived"]

_RELEASE = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)$")


def compatible(version: str, sdk: str = SDK_VERSION) -> bool:
    """A release daemon must share the SDK's major.minor; a development build is accepted."""
    d, s = _RELEASE.match(version), _RELEASE.match(sdk)
    if d is None or s is None:
        return True
    return d.group(1, 2) == s.group(1, 2)


def _tool_body(args: Mapping[str, Any], conversation_id: str, path_id: str, user_id: str | None,
               secrets: Mapping[str, str] | None) -> dict[str, Any]:
    body: dict[str, Any] = {"conversationId": conversation_id, "pathId": path_id, "args": dict(args)}
    if user_id:
        body["userId"] = user_id
    if secrets:
        body["secrets"] = dict(secrets)
    return body


def _backoff(attempt: int, base: float, cap: float, err: SandlotError) -> float:
    wait = min(cap, base * 2 ** attempt) * (0.5 + random.random() / 2)
    return float(min(cap, max(wait, err.retry_after or 0.0)))


def _parse_line(line: str, status: int) -> Event | None:
    line = line.strip()
    if not line:
        return None
    raw: dict[str, Any] = json.loads(line)
    if raw.get("type") == "error":
        raise make_error(str(raw.get("code", "internal")), str(raw.get("message", "the call failed")), status)
    return cast(Event, raw)


class _Base:
    def __init__(self, url: str | None, api_key: str | None, max_retries: int, backoff: float,
                 max_backoff: float, check_version: bool) -> None:
        self.url = (url or os.environ.get("SANDLOT_URL") or "http://127.0.0.1:7423").rstrip("/")
        self.api_key = api_key or os.environ.get("SANDLOT_API_KEY")
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self._check = check_version
        self._version: Version | None = None

    def _headers(self, accept: str = "application/json") -> dict[str, str]:
        h = {"Accept": accept}
        if self.api_key:
            h["Authorization"] = f"Bearer {self.api_key}"
        return h

    def _checked(self, v: Version) -> Version:
        if not compatible(str(v.get("version", ""))):
            raise VersionMismatchError("failed_precondition",
                                       f"the daemon is sandlot {v.get('version')} and this SDK is {SDK_VERSION}: "
                                       "use the SDK of the daemon's release")
        self._version = v
        return v


class Client(_Base):
    """A synchronous client of one daemon and one tenant (its key)."""

    def __init__(self, url: str | None = None, api_key: str | None = None, *, max_retries: int = 3,
                 backoff: float = 0.25, max_backoff: float = 10.0, check_version: bool = True,
                 timeout: float = 660.0, http: httpx.Client | None = None) -> None:
        super().__init__(url, api_key, max_retries, backoff, max_backoff, check_version)
        self._http = http or httpx.Client(timeout=timeout)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def path(self, conversation_id: str, path_id: str = "main", *, user_id: str | None = None) -> Path:
        """A handle on one conversation path: its tools, files and events."""
        return Path(self, conversation_id, path_id, user_id)

    def version(self) -> Version:
        """The daemon's build (GET /v1/version)."""
        res = self._http.get(self.url + "/v1/version", headers=self._headers())
        if res.status_code >= 400:
            raise error_from_response(res)
        return cast(Version, res.json())

    def check_version(self) -> Version:
        """Asks the daemon's version once and refuses a daemon of another release."""
        return self._version or self._checked(self.version())

    def request(self, method: str, path: str, *, params: Mapping[str, Any] | None = None, json_body: Any = None,
                content: bytes | None = None, accept: str = "application/json") -> httpx.Response:
        """Sends one request; 503 and 429 (and nothing else) are retried with backoff."""
        if self._check:
            self.check_version()
        q = {k: v for k, v in (params or {}).items() if v is not None and v != ""}
        headers = self._headers(accept)
        if content is not None:
            headers["Content-Type"] = "application/octet-stream"
        for attempt in range(self.max_retries + 1):
            res = self._http.request(method, self.url + path, params=q, json=json_body, content=content, headers=headers)
            if res.status_code < 400:
                return res
            err = error_from_response(res)
            if res.status_code not in (503, 429) or attempt == self.max_retries:
                raise err
            time.sleep(_backoff(attempt, self.backoff, self.max_backoff, err))
        raise AssertionError("unreachable")

    def json(self, method: str, path: str, **kw: Any) -> Any:
        return self.request(method, path, **kw).json()

    def call(self, tool: str, args: Mapping[str, Any], conversation_id: str, path_id: str = "main", *,
             user_id: str | None = None, secrets: Mapping[str, str] | None = None) -> Result:
        """Runs a tool and returns its result."""
        out: Result = self.json("POST", f"/v1/tools/{tool}", json_body=_tool_body(args, conversation_id, path_id, user_id, secrets))
        return out

    def stream(self, tool: str, args: Mapping[str, Any], conversation_id: str, path_id: str = "main", *,
               user_id: str | None = None, secrets: Mapping[str, str] | None = None) -> Iterator[Event]:
        """Runs a tool and yields its events as they happen; closing the iterator ends the call."""
        if self._check:
            self.check_version()
        body = _tool_body(args, conversation_id, path_id, user_id, secrets)
        for attempt in range(self.max_retries + 1):
            with self._http.stream("POST", self.url + f"/v1/tools/{tool}", json=body,
                                   headers=self._headers("application/x-ndjson")) as res:
                if res.status_code >= 400:
                    res.read()
                    err = error_from_response(res)
                    if res.status_code not in (503, 429) or attempt == self.max_retries:
                        raise err
                    time.sleep(_backoff(attempt, self.backoff, self.max_backoff, err))
                    continue
                final = False
                for line in res.iter_lines():
                    ev = _parse_line(line, res.status_code)
                    if ev is not None:
                        final = final or ev.get("type") == "final"
                        yield ev
                if not final:
                    raise make_error("unavailable", "the stream ended before the call's result", res.status_code)
                return

    def whoami(self) -> TenantInfo:
        """The tenant of the key (GET /v1/tenant)."""
        return cast(TenantInfo, self.json("GET", "/v1/tenant"))

    def tools(self) -> list[dict[str, Any]]:
        """The daemon's tools as OpenAI function definitions."""
        out: list[dict[str, Any]] = self.json("GET", "/v1/tools", params={"format": "openai"})
        return out

    def contexts(self, **filters: Any) -> list[Context]:
        """The tenant's contexts; filters: conversationId, pathId, userId, status, limit, after."""
        return cast(list[Context], self.json("GET", "/v1/contexts", params=filters)["contexts"])

    def terminate(self, context_id: str) -> None:
        self.request("DELETE", f"/v1/contexts/{context_id}")

    def end_conversation(self, conversation_id: str, *, user_id: str | None = None) -> ConversationEnded:
        """Ends every path of a conversation (reason deleted)."""
        return cast(ConversationEnded, self.json("DELETE", f"/v1/conversations/{conversation_id}", params={"userId": user_id}))

    def templates(self) -> list[Template]:
        return cast(list[Template], self.json("GET", "/v1/templates")["templates"])


class Path:
    """One conversation path of a Client: its tools, files and events."""

    def __init__(self, client: Client, conversation_id: str, path_id: str, user_id: str | None) -> None:
        self.client, self.conversation_id, self.path_id, self.user_id = client, conversation_id, path_id, user_id

    def _prefix(self) -> str:
        return f"/v1/conversations/{self.conversation_id}/paths/{self.path_id}"

    def call(self, tool: str, args: Mapping[str, Any], *, secrets: Mapping[str, str] | None = None) -> Result:
        return self.client.call(tool, args, self.conversation_id, self.path_id, user_id=self.user_id, secrets=secrets)

    def stream(self, tool: str, args: Mapping[str, Any], *, secrets: Mapping[str, str] | None = None) -> Iterator[Event]:
        return self.client.stream(tool, args, self.conversation_id, self.path_id, user_id=self.user_id, secrets=secrets)

    def run_code(self, code: str, language: Language = "python", *, timeout_ms: int | None = None,
                 env: Mapping[str, str] | None = None, secrets: Mapping[str, str] | None = None) -> RunCodeResult:
        """run_code: variables, imports and files persist between calls of this path."""
        return cast(RunCodeResult, self.call("run_code", _code_args(code, language, timeout_ms, env), secrets=secrets))

    def run_code_stream(self, code: str, language: Language = "python", *, timeout_ms: int | None = None,
                        env: Mapping[str, str] | None = None, secrets: Mapping[str, str] | None = None) -> Iterator[Event]:
        return self.stream("run_code", _code_args(code, language, timeout_ms, env), secrets=secrets)

    def run_analysis(self, analysis_type: str, parameters: Mapping[str, Any], **kw: Any) -> RunAnalysisResult:
        """run_analysis; kw are its other arguments (code, language, outputFormat, timeout)."""
        return cast(RunAnalysisResult, self.call("run_analysis", {"analysisType": analysis_type, "parameters": dict(parameters), **kw}))

    def bash(self, command: str, *, cwd: str | None = None, timeout_ms: int | None = None) -> BashResult:
        """bash: one command in a fresh process."""
        args: dict[str, Any] = {"command": command}
        if cwd:
            args["cwd"] = cwd
        if timeout_ms:
            args["timeout"] = timeout_ms
        return cast(BashResult, self.call("bash", args))

    def upload_file(self, path: str, data: bytes | str) -> FileInfo:
        """Uploads a file into the path's sandbox (created when absent), under /home/user or /tmp."""
        content = data.encode() if isinstance(data, str) else data
        return cast(FileInfo, self.client.json("PUT", self._prefix() + "/files", params={"path": path, "userId": self.user_id}, content=content))

    def download_file(self, path: str) -> bytes:
        """Downloads a file, guarded (a secret in it arrives redacted)."""
        return self.client.request("GET", self._prefix() + "/files", params={"path": path, "userId": self.user_id}, accept="*/*").content

    def list_files(self, path: str = "/home/user", depth: int | None = None) -> FileList:
        return cast(FileList, self.client.json("GET", self._prefix() + "/files/list", params={"path": path, "depth": depth, "userId": self.user_id}))

    def event(self, type: PathEventType, *, source_path_id: str | None = None, target_path_id: str | None = None) -> None:
        body = {k: v for k, v in {"type": type, "sourcePathId": source_path_id, "targetPathId": target_path_id}.items() if v}
        self.client.request("POST", self._prefix() + "/events", params={"userId": self.user_id}, json_body=body)

    def branch(self, new_path_id: str) -> Path:
        """A new path off this one: a fresh sandbox on its first call, nothing inherited."""
        p = Path(self.client, self.conversation_id, new_path_id, self.user_id)
        p.event("branched", source_path_id=self.path_id)
        return p

    def edited(self) -> None:
        """A message of this path was edited: the same context continues."""
        self.event("edited")

    def merge(self, target_path_id: str) -> None:
        """This path merged into target_path_id: its context is terminated (reason merged)."""
        self.event("merged", target_path_id=target_path_id)

    def delete(self) -> None:
        """This path was deleted: its context is terminated."""
        self.event("deleted")

    def archive(self) -> None:
        """This path was archived: its context is terminated."""
        self.event("archived")

    def active_context(self) -> Context | None:
        for c in self.client.contexts(conversationId=self.conversation_id, pathId=self.path_id, userId=self.user_id, status="active"):
            if c.get("status") in ("creating", "ready"):
                return c
        return None


def _code_args(code: str, language: str, timeout_ms: int | None, env: Mapping[str, str] | None) -> dict[str, Any]:
    args: dict[str, Any] = {"language": language, "code": code}
    if timeout_ms:
        args["timeout"] = timeout_ms
    if env:
        args["env"] = dict(env)
    return args


class AsyncClient(_Base):
    """The asynchronous client: the same surface as Client, awaited; cancelling a task ends its call."""

    def __init__(self, url: str | None = None, api_key: str | None = None, *, max_retries: int = 3,
                 backoff: float = 0.25, max_backoff: float = 10.0, check_version: bool = True,
                 timeout: float = 660.0, http: httpx.AsyncClient | None = None) -> None:
        super().__init__(url, api_key, max_retries, backoff, max_backoff, check_version)
        self._http = http or httpx.AsyncClient(timeout=timeout)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    def path(self, conversation_id: str, path_id: str = "main", *, user_id: str | None = None) -> AsyncPath:
        return AsyncPath(self, conversation_id, path_id, user_id)

    async def version(self) -> Version:
        res = await self._http.get(self.url + "/v1/version", headers=self._headers())
        if res.status_code >= 400:
            raise error_from_response(res)
        return cast(Version, res.json())

    async def check_version(self) -> Version:
        return self._version or self._checked(await self.version())

    async def request(self, method: str, path: str, *, params: Mapping[str, Any] | None = None, json_body: Any = None,
                      content: bytes | None = None, accept: str = "application/json") -> httpx.Response:
        if self._check:
            await self.check_version()
        q = {k: v for k, v in (params or {}).items() if v is not None and v != ""}
        headers = self._headers(accept)
        if content is not None:
            headers["Content-Type"] = "application/octet-stream"
        for attempt in range(self.max_retries + 1):
            res = await self._http.request(method, self.url + path, params=q, json=json_body, content=content, headers=headers)
            if res.status_code < 400:
                return res
            err = error_from_response(res)
            if res.status_code not in (503, 429) or attempt == self.max_retries:
                raise err
            await asyncio.sleep(_backoff(attempt, self.backoff, self.max_backoff, err))
        raise AssertionError("unreachable")

    async def json(self, method: str, path: str, **kw: Any) -> Any:
        return (await self.request(method, path, **kw)).json()

    async def call(self, tool: str, args: Mapping[str, Any], conversation_id: str, path_id: str = "main", *,
                   user_id: str | None = None, secrets: Mapping[str, str] | None = None) -> Result:
        out: Result = await self.json("POST", f"/v1/tools/{tool}", json_body=_tool_body(args, conversation_id, path_id, user_id, secrets))
        return out

    async def stream(self, tool: str, args: Mapping[str, Any], conversation_id: str, path_id: str = "main", *,
                     user_id: str | None = None, secrets: Mapping[str, str] | None = None) -> AsyncIterator[Event]:
        if self._check:
            await self.check_version()
        body = _tool_body(args, conversation_id, path_id, user_id, secrets)
        for attempt in range(self.max_retries + 1):
            async with self._http.stream("POST", self.url + f"/v1/tools/{tool}", json=body,
                                         headers=self._headers("application/x-ndjson")) as res:
                if res.status_code >= 400:
                    await res.aread()
                    err = error_from_response(res)
                    if res.status_code not in (503, 429) or attempt == self.max_retries:
                        raise err
                    await asyncio.sleep(_backoff(attempt, self.backoff, self.max_backoff, err))
                    continue
                final = False
                async for line in res.aiter_lines():
                    ev = _parse_line(line, res.status_code)
                    if ev is not None:
                        final = final or ev.get("type") == "final"
                        yield ev
                if not final:
                    raise make_error("unavailable", "the stream ended before the call's result", res.status_code)
                return

    async def contexts(self, **filters: Any) -> list[Context]:
        return cast(list[Context], (await self.json("GET", "/v1/contexts", params=filters))["contexts"])

    async def end_conversation(self, conversation_id: str, *, user_id: str | None = None) -> ConversationEnded:
        return cast(ConversationEnded, await self.json("DELETE", f"/v1/conversations/{conversation_id}", params={"userId": user_id}))


class AsyncPath:
    """One conversation path of an AsyncClient."""

    def __init__(self, client: AsyncClient, conversation_id: str, path_id: str, user_id: str | None) -> None:
        self.client, self.conversation_id, self.path_id, self.user_id = client, conversation_id, path_id, user_id

    def _prefix(self) -> str:
        return f"/v1/conversations/{self.conversation_id}/paths/{self.path_id}"

    async def call(self, tool: str, args: Mapping[str, Any], *, secrets: Mapping[str, str] | None = None) -> Result:
        return await self.client.call(tool, args, self.conversation_id, self.path_id, user_id=self.user_id, secrets=secrets)

    def stream(self, tool: str, args: Mapping[str, Any], *, secrets: Mapping[str, str] | None = None) -> AsyncIterator[Event]:
        return self.client.stream(tool, args, self.conversation_id, self.path_id, user_id=self.user_id, secrets=secrets)

    async def run_code(self, code: str, language: Language = "python", *, timeout_ms: int | None = None,
                       env: Mapping[str, str] | None = None, secrets: Mapping[str, str] | None = None) -> RunCodeResult:
        return cast(RunCodeResult, await self.call("run_code", _code_args(code, language, timeout_ms, env), secrets=secrets))

    def run_code_stream(self, code: str, language: Language = "python", *, timeout_ms: int | None = None,
                        env: Mapping[str, str] | None = None) -> AsyncIterator[Event]:
        return self.stream("run_code", _code_args(code, language, timeout_ms, env))

    async def run_analysis(self, analysis_type: str, parameters: Mapping[str, Any], **kw: Any) -> RunAnalysisResult:
        return cast(RunAnalysisResult, await self.call("run_analysis", {"analysisType": analysis_type, "parameters": dict(parameters), **kw}))

    async def bash(self, command: str) -> BashResult:
        return cast(BashResult, await self.call("bash", {"command": command}))

    async def upload_file(self, path: str, data: bytes | str) -> FileInfo:
        content = data.encode() if isinstance(data, str) else data
        return cast(FileInfo, await self.client.json("PUT", self._prefix() + "/files", params={"path": path, "userId": self.user_id}, content=content))

    async def download_file(self, path: str) -> bytes:
        return (await self.client.request("GET", self._prefix() + "/files", params={"path": path, "userId": self.user_id}, accept="*/*")).content

    async def list_files(self, path: str = "/home/user", depth: int | None = None) -> FileList:
        return cast(FileList, await self.client.json("GET", self._prefix() + "/files/list", params={"path": path, "depth": depth, "userId": self.user_id}))

    async def event(self, type: PathEventType, *, source_path_id: str | None = None, target_path_id: str | None = None) -> None:
        body = {k: v for k, v in {"type": type, "sourcePathId": source_path_id, "targetPathId": target_path_id}.items() if v}
        await self.client.request("POST", self._prefix() + "/events", params={"userId": self.user_id}, json_body=body)

    async def branch(self, new_path_id: str) -> AsyncPath:
        p = AsyncPath(self.client, self.conversation_id, new_path_id, self.user_id)
        await p.event("branched", source_path_id=self.path_id)
        return p

    async def merge(self, target_path_id: str) -> None:
        await self.event("merged", target_path_id=target_path_id)

    async def active_context(self) -> Context | None:
        for c in await self.client.contexts(conversationId=self.conversation_id, pathId=self.path_id, userId=self.user_id, status="active"):
            if c.get("status") in ("creating", "ready"):
                return c
        return None
