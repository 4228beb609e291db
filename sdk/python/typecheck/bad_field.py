"""Fails mypy --strict: run_code's result has no field "output"."""

import sandlot


def use(p: sandlot.Path) -> str:
    return p.run_code("1")["output"]
