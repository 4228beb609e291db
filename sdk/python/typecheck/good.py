"""Passes mypy --strict: the SDK's results are typed from the API (go test ./e2e/sdk checks it)."""

import sandlot


def use(p: sandlot.Path) -> int:
    r = p.run_code("1 + 1", "python", timeout_ms=5000)
    text: str = r["stdout"]
    err = r["error"]
    name = err["name"] if err is not None else ""
    b = p.bash("ls")
    info = p.upload_file("a.txt", b"x")
    return r["exitCode"] + b["exitCode"] + info["size"] + len(text) + len(name)
