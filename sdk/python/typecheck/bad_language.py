"""Fails mypy --strict: cobol is not one of run_code's languages."""

import sandlot


def use(p: sandlot.Path) -> None:
    p.run_code("1", "cobol")
