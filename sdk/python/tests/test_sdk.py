"""The Python SDK against a real sandlot serve."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

import sandlot

AWS_CODE = 'print("AKIA" + "QWERTYUIOPASDFGH")'  # assembled in the sandbox: never in a request
AWS_REDACTED = "[REDACTED:AWS_ACCESS_KEY]"


def main_text(r: dict[str, Any]) -> Any:
    return next((x.get("text") for x in r["results"] if x.get("main")), None)


def test_state_kept_across_calls(client: sandlot.Client, conversation: Callable[[], str]) -> None:
    p = client.path(conversation())
    a = p.run_code("x = 41")
    assert a["success"], a
    b = p.run_code("x + 1")
    assert main_text(b) == "42"
    assert b["sandboxId"] == a["sandboxId"]
    assert b["conversationId"] == p.conversation_id and b["pathId"] == "main"


def test_branch_isolation(client: sandlot.Client, conversation: Callable[[], str]) -> None:
    main = client.path(conversation())
    main.run_code("only_main = 1")
    branch = main.branch("b1")
    r = branch.run_code("only_main")
    assert not r["success"] and r["error"]["name"] == "NameError"
    assert main_text(main.run_code("only_main")) == "1"
    branch.merge("main")
    assert branch.active_context() is None
    assert main.active_context() is not None
    main.edited()
    assert main_text(main.run_code("only_main")) == "1"
    for end in ("delete", "archive"):
        p = main.branch(end)
        p.run_code("w = 2")
        assert p.active_context() is not None
        getattr(p, end)()
        assert p.active_context() is None, end


def test_streaming(client: sandlot.Client, conversation: Callable[[], str]) -> None:
    p = client.path(conversation())
    events = list(p.run_code_stream("import time\nfor i in range(3):\n    print('line', i, flush=True)\n    time.sleep(0.3)"))
    out = [e["data"] for e in events if e["type"] == "stdout"]
    assert "".join(out) == "line 0\nline 1\nline 2\n"
    assert len(out) >= 2, events
    assert events[-1]["type"] == "final" and events[-1]["result"]["success"]


def test_cancellation_sync(client: sandlot.Client, conversation: Callable[[], str]) -> None:
    p = client.path(conversation())
    p.run_code("kept = 'yes'")
    start = time.monotonic()
    stream = p.run_code_stream("import time\nprint('started', flush=True)\ntime.sleep(60)")
    for ev in stream:
        if ev["type"] == "stdout" and "started" in ev["data"]:
            break
    stream.close()  # closes the response: the daemon interrupts the code
    r = p.run_code("kept")
    assert main_text(r) == "'yes'"
    assert time.monotonic() - start < 50


def test_cancellation_async(conversation: Callable[[], str]) -> None:
    conv = conversation()

    async def go() -> None:
        async with sandlot.AsyncClient() as c:
            p = c.path(conv)
            await p.run_code("kept = 'async'")
            task = asyncio.create_task(p.run_code("import time\ntime.sleep(60)"))
            await asyncio.sleep(1.5)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            start = time.monotonic()
            r = await p.run_code("kept")
            assert main_text(r) == "'async'"
            assert time.monotonic() - start < 50
            lines = [e async for e in p.run_code_stream("print('a')")]
            assert lines[-1]["type"] == "final"
            b = await p.branch("async-b")
            r2 = await b.run_code("kept")
            assert not r2["success"]
            await b.merge("main")
            assert await b.active_context() is None

    asyncio.run(go())


def test_files_round_trip(client: sandlot.Client, conversation: Callable[[], str]) -> None:
    p = client.path(conversation())
    data = bytes((i * 7) % 256 for i in range(200_000))
    info = p.upload_file("data/blob.bin", data)
    assert info["size"] == len(data)
    assert p.download_file("/home/user/data/blob.bin") == data
    p.upload_file("n.csv", "a,b\n1,2\n")
    assert main_text(p.run_code("open('n.csv').read().splitlines()[1]")) == "'1,2'"
    assert any(e["name"] == "n.csv" for e in p.list_files()["entries"])
    a = p.run_analysis("data_analysis", {"path": "n.csv"})
    assert a["success"] and a["parsedOutput"]["rowCount"] == 1


def test_guard_redaction(client: sandlot.Client, conversation: Callable[[], str]) -> None:
    p = client.path(conversation())
    r = p.run_code(AWS_CODE)
    assert AWS_REDACTED in r["stdout"] and "QWERTYUIOPASDFGH" not in r["stdout"]
    streamed = "".join(e["data"] for e in p.run_code_stream(AWS_CODE) if e["type"] == "stdout")
    assert AWS_REDACTED in streamed and "QWERTYUIOPASDFGH" not in streamed
    p.run_code("open('k.txt','w').write('AKIA' + 'QWERTYUIOPASDFGH')")
    assert b"QWERTYUIOPASDFGH" not in p.download_file("k.txt")
    s = p.run_code("import os\nprint(os.environ['API_TOKEN'])", secrets={"API_TOKEN": "tok-" + "9f8e7d6c5b4a"})
    assert s["stdout"] == "[REDACTED:SECRET]\n"


def test_limits_are_readable_results(client: sandlot.Client, conversation: Callable[[], str]) -> None:
    p = client.path(conversation())
    r = p.run_code("import time\ntime.sleep(5)", timeout_ms=1000)
    assert not r["success"] and r["timedOut"] and r["outputType"] == "error"
    conv = conversation()
    for path in ("p1", "p2", "p3"):
        assert client.path(conv, path).run_code("1")["success"]
    over = client.path(conv, "p4").run_code("1")
    assert not over["success"]
    assert over["error"]["name"] == "ContextLimitExceeded"
    assert "terminate one or wait" in over["error"]["value"]


def test_errors_mapped(client: sandlot.Client, conversation: Callable[[], str]) -> None:
    p = client.path(conversation())
    with pytest.raises(sandlot.InvalidArgumentError) as e:
        p.call("run_code", {"lang": "python", "code": "1"})
    assert e.value.status == 400 and "lang" in e.value.message
    with pytest.raises(sandlot.NotFoundError):
        client.terminate("no-such-context")
    with sandlot.Client(api_key="e2b_" + "0" * 40) as bad:
        with pytest.raises(sandlot.UnauthenticatedError):
            bad.path(conversation()).run_code("1")


class _Scripted(BaseHTTPRequestHandler):
    answers: list[tuple[int, dict[str, Any], dict[str, str]]] = []
    seen: list[str] = []
    version = "devel"

    def log_message(self, *args: Any) -> None:
        pass

    def _answer(self) -> None:
        if self.path == "/v1/version":
            status, body, headers = 200, {"version": type(self).version, "schemaVersion": 1}, {}
        else:
            n = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(n)
            type(self).seen.append(self.path)
            status, body, headers = type(self).answers[min(len(type(self).seen), len(type(self).answers)) - 1]
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = _answer


def scripted(answers: list[tuple[int, dict[str, Any], dict[str, str]]], version: str = "devel") -> tuple[str, list[str], ThreadingHTTPServer]:
    handler = type("H", (_Scripted,), {"answers": answers, "seen": [], "version": version})
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{srv.server_address[1]}", handler.seen, srv


OK = (200, {"success": True, "results": []}, {})
BUSY = (503, {"code": "unavailable", "message": "busy"}, {})


def test_retries_503_and_429_only() -> None:
    url, seen, srv = scripted([BUSY, (429, {"code": "resource_exhausted", "message": "slow"}, {"Retry-After": "0"}), OK])
    try:
        with sandlot.Client(url, "k", backoff=0.005) as c:
            assert c.path("c").run_code("1")["success"]
        assert len(seen) == 3
    finally:
        srv.shutdown()
    for answer in [(500, {"code": "internal", "message": "boom"}, {}), (400, {"code": "invalid_argument", "message": "bad"}, {})]:
        url, seen, srv = scripted([answer, OK])
        try:
            with sandlot.Client(url, "k", backoff=0.001) as c, pytest.raises(sandlot.SandlotError) as e:
                c.path("c").run_code("1")
            assert e.value.status == answer[0] and len(seen) == 1
        finally:
            srv.shutdown()
    url, seen, srv = scripted([BUSY])
    try:
        with sandlot.Client(url, "k", backoff=0.001, max_retries=2) as c, pytest.raises(sandlot.UnavailableError):
            c.path("c").run_code("1")
        assert len(seen) == 3
    finally:
        srv.shutdown()


def test_version_checked_before_the_first_call() -> None:
    url, seen, srv = scripted([OK], version="v9.4.0")
    try:
        with sandlot.Client(url, "k") as c, pytest.raises(sandlot.VersionMismatchError):
            c.path("c").run_code("1")
        assert seen == []
    finally:
        srv.shutdown()
    assert sandlot.compatible("v0.1.9", "0.1.0") and not sandlot.compatible("v0.2.0", "0.1.0")
    assert sandlot.compatible("devel") and sandlot.compatible("v0.1.0-3-gabc1234", "0.1.0")


def test_execution_context_manager(client: sandlot.Client, conversation: Callable[[], str]) -> None:
    m = sandlot.ExecutionContextManager()
    ident: sandlot.ExecutionContextIdentity = {"conversation_id": conversation(), "path_id": "main"}
    assert not m.has_active_context(ident)
    created = m.get_or_create_context(ident)
    assert created.status == "active" and created.execution_count == 0 and created.sandbox_id
    r = m.execute_code(ident, "x = 20\nprint(x * 2)", "python")
    assert r["success"] and r["output"] == "40\n" and r["output_type"] == "text"
    assert m.execute_code(ident, "x", "python")["output"] == "20"
    js = m.execute_code(ident, "console.log(JSON.stringify({n: 1}))", "javascript")
    assert js["output_type"] == "json"
    bad = m.execute_code(ident, "1/0", "python")
    assert not bad["success"] and "ZeroDivisionError" in bad["error"] and bad["output_type"] == "error"
    assert AWS_REDACTED in m.execute_code(ident, AWS_CODE, "python")["output"]
    assert m.get_or_create_context(ident).sandbox_id == created.sandbox_id
    m.terminate_context(ident)
    assert not m.has_active_context(ident)
    m.terminate_context(ident)
    me = client.whoami()
    for tenant in (me["id"], me["name"]):
        assert m.execute_code({"tenant_id": tenant, "conversation_id": ident["conversation_id"], "path_id": "t"}, "1 + 1")["output"] == "2"
    with pytest.raises(sandlot.PermissionDeniedError):
        m.execute_code({"tenant_id": "someone-else", "conversation_id": ident["conversation_id"], "path_id": "t"}, "1")
