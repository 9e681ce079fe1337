"""Enough of GitHub Actions' expression language to evaluate a workflow's `if:` conditions in tests:
literals, context paths (a missing one is null), ==, !=, !, &&, ||, parentheses, always() and
startsWith(). GitHub's rules: && and || return an operand, == compares strings case-insensitively,
null is falsy, a condition without `${{ }}` is an expression."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

TOKEN_RE = re.compile(r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<num>\d+(?:\.\d+)?)|(?P<op>==|!=|&&|\|\||[!().,])"
                      r"|(?P<name>[A-Za-z_][\w-]*))")


def truthy(value: Any) -> bool:
    return value not in (None, False, "", 0)


def evaluate(condition: str, context: dict[str, Any]) -> Any:
    text = condition.strip()
    if text.startswith("${{") and text.endswith("}}"):
        text = text[3:-2]
    tokens, position = [], 0
    while text[position:].strip():
        match = TOKEN_RE.match(text, position)
        assert match, f"cannot read {text[position:]!r}"
        tokens.append(next((kind, value) for kind, value in match.groupdict().items() if value is not None))
        position = match.end()
    parser = _Parser(tokens, context)
    value = parser.either()
    assert parser.at == len(tokens), f"left over: {tokens[parser.at:]}"
    return value


class _Parser:
    def __init__(self, tokens: list[tuple[str, str]], context: dict[str, Any]) -> None:
        self.tokens, self.context, self.at = tokens, context, 0

    def peek(self) -> str | None:
        return self.tokens[self.at][1] if self.at < len(self.tokens) else None

    def take(self, expected: str | None = None) -> tuple[str, str]:
        token = self.tokens[self.at]
        assert expected is None or token[1] == expected, f"expected {expected}, got {token}"
        self.at += 1
        return token

    def chain(self, op: str, operand: Callable[[], Any], combine: Callable[[Any, Any], Any]) -> Any:
        value = operand()
        while self.peek() == op:
            self.take()
            value = combine(value, operand())
        return value

    def either(self) -> Any:  # ||: the first truthy operand, else the last
        return self.chain("||", self.both, lambda left, right: left if truthy(left) else right)

    def both(self) -> Any:  # &&: the first falsy operand, else the last
        return self.chain("&&", self.compare, lambda left, right: right if truthy(left) else left)

    def compare(self) -> Any:
        value = self.unary()
        while self.peek() in ("==", "!="):
            op, right = self.take()[1], self.unary()
            same = str(value).lower() == str(right).lower() if isinstance(value, str) and isinstance(right, str) \
                else value == right
            value = same if op == "==" else not same
        return value

    def unary(self) -> Any:
        if self.peek() == "!":
            self.take()
            return not truthy(self.unary())
        return self.primary()

    def primary(self) -> Any:
        kind, value = self.take()
        if value == "(":
            inner = self.either()
            self.take(")")
            return inner
        if kind == "str":
            return value[1:-1].replace("''", "'")
        if kind == "num":
            return float(value)
        if value in ("true", "false", "null"):
            return {"true": True, "false": False, "null": None}[value]
        if self.peek() == "(":
            self.take("(")
            args = []
            while self.peek() != ")":
                args.append(self.either())
                if self.peek() == ",":
                    self.take(",")
            self.take(")")
            return {"always": lambda: True, "success": lambda: True,
                    "startsWith": lambda s, p: str(s or "").lower().startswith(str(p).lower())}[value](*args)
        found: Any = self.context.get(value)
        while self.peek() == ".":
            self.take(".")
            key = self.take()[1]
            found = found.get(key) if isinstance(found, dict) else None
        return found
