"""A strict parser of AWS Glue Data Quality's DQDL, written from its documented grammar (the DQDL reference and the
rule-type pages): a document is `Rules = [ rule, ... ]`; a rule is a rule type, its parameters and an expression,
optionally `where "<sql>"` and `with threshold <number condition>`; composites put rules in parentheses joined by
one of `and` / `or`. Strings are double-quoted with `\\"` and `\\\\` as their only escapes. Each rule type is checked
against its documented signature, so a string that ends early, an unknown rule type or a parameter too many fails.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any


class DQDLSyntaxError(ValueError):
    pass


@dataclass
class Token:
    kind: str  # STRING NUMBER WORD PUNCT OP
    value: Any
    pos: int


_PUNCT = "[](),="
_OPS = (">=", "<=", "!=", ">", "<", "=")


def tokenize(text: str) -> list[Token]:
    out: list[Token] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch in " \t\r\n":
            i += 1
        elif ch == '"':
            j, buf = i + 1, []
            while True:
                if j >= len(text):
                    raise DQDLSyntaxError(f"unterminated string at {i}")
                c = text[j]
                if c == "\\" and j + 1 < len(text) and text[j + 1] in '"\\':
                    buf.append(text[j + 1])
                    j += 2
                elif c == '"':
                    break
                else:
                    buf.append(c)
                    j += 1
            out.append(Token("STRING", "".join(buf), i))
            i = j + 1
        elif text.startswith(_OPS[:3], i) or ch in "<>!":
            op = next(o for o in _OPS if text.startswith(o, i))
            out.append(Token("OP", op, i))
            i += len(op)
        elif ch in _PUNCT:
            out.append(Token("OP" if ch == "=" else "PUNCT", ch, i))
            i += 1
        elif m := re.match(r"-?\d+(?:\.\d+)?(?![A-Za-z_])", text[i:]):
            out.append(Token("NUMBER", float(m.group()), i))
            i += len(m.group())
        elif m := re.match(r"[A-Za-z_][A-Za-z0-9_.]*", text[i:]):
            out.append(Token("WORD", m.group(), i))
            i += len(m.group())
        else:
            raise DQDLSyntaxError(f"unexpected character {ch!r} at {i}")
    return out


# rule type -> (number of column parameters: int or "+" for one or more, or "sql"; expression: required / none)
SIGNATURES: dict[str, tuple[Any, str]] = {
    "ColumnCount": (0, "number"),
    "RowCount": (0, "number"),
    "IsComplete": (1, "none"),
    "IsUnique": (1, "none"),
    "IsPrimaryKey": ("+", "none"),
    "ColumnExists": (1, "none"),
    "Completeness": (1, "number"),
    "Uniqueness": (1, "number"),
    "UniqueValueRatio": (1, "number"),
    "DistinctValuesCount": (1, "number"),
    "ColumnLength": (1, "number"),
    "Mean": (1, "number"),
    "Sum": (1, "number"),
    "StandardDeviation": (1, "number"),
    "Entropy": (1, "number"),
    "ColumnDataType": (1, "string"),
    "ColumnValues": (1, "values"),
    "CustomSql": ("sql", "number"),
}
KEYWORDS = {"NULL", "null", "EMPTY", "empty", "WHITESPACES_ONLY", "whitespaces_only"}


@dataclass
class Rule:
    type: str
    params: list[str]
    condition: tuple[Any, ...] | None
    where: str | None = None
    threshold: tuple[Any, ...] | None = None


@dataclass
class Composite:
    op: str
    rules: list[Rule] = field(default_factory=list)


class _Parser:
    def __init__(self, text: str):
        self.toks = tokenize(text)
        self.i = 0

    def peek(self, offset: int = 0) -> Token | None:
        j = self.i + offset
        return self.toks[j] if j < len(self.toks) else None

    def take(self, kind: str | None = None, value: Any = None) -> Token:
        t = self.peek()
        if t is None:
            raise DQDLSyntaxError(f"unexpected end, wanted {value or kind}")
        if (kind and t.kind != kind) or (value is not None and t.value != value):
            raise DQDLSyntaxError(f"at {t.pos}: wanted {value or kind}, got {t.value!r}")
        self.i += 1
        return t

    def at(self, kind: str, value: Any = None) -> bool:
        t = self.peek()
        return t is not None and t.kind == kind and (value is None or t.value == value)

    def document(self) -> list[Rule | Composite]:
        self.take("WORD", "Rules")
        self.take("OP", "=")
        self.take("PUNCT", "[")
        rules: list[Rule | Composite] = []
        if not self.at("PUNCT", "]"):
            rules.append(self.top())
            while self.at("PUNCT", ","):
                self.take()
                rules.append(self.top())
        self.take("PUNCT", "]")
        if self.peek() is not None:
            raise DQDLSyntaxError(f"text after the ruleset at {self.peek().pos}")  # type: ignore[union-attr]
        return rules

    def top(self) -> Rule | Composite:
        if not self.at("PUNCT", "("):
            return self.rule()
        comp = Composite(op="")
        while True:
            self.take("PUNCT", "(")
            comp.rules.append(self.rule())
            self.take("PUNCT", ")")
            if not (
                self.at("WORD", "and")
                or self.at("WORD", "AND")
                or self.at("WORD", "or")
                or self.at("WORD", "OR")
            ):
                break
            op = self.take().value.lower()
            if comp.op and comp.op != op:
                raise DQDLSyntaxError("and / or mixed without parentheses")
            comp.op = op
        if len(comp.rules) < 2:
            raise DQDLSyntaxError("a parenthesised rule must be joined to another with and / or")
        return comp

    def number_condition(self) -> tuple[Any, ...]:
        if self.at("WORD", "between"):
            self.take()
            low = self.take("NUMBER").value
            self.take("WORD", "and")
            return ("between", low, self.take("NUMBER").value)
        op = self.take("OP").value
        if op == "!=":
            raise DQDLSyntaxError("!= compares values, not a rule's number")
        return (op, self.take("NUMBER").value)

    def array(self) -> list[Any]:
        self.take("PUNCT", "[")
        items = [self.item()]
        while self.at("PUNCT", ","):
            self.take()
            items.append(self.item())
        self.take("PUNCT", "]")
        return items

    def item(self) -> Any:
        t = self.peek()
        if t is not None and t.kind == "WORD" and t.value in KEYWORDS:
            self.take()
            return t.value.upper()
        if t is not None and t.kind in ("STRING", "NUMBER"):
            self.take()
            return t.value
        raise DQDLSyntaxError(f"not a list item: {t.value if t else 'end'!r}")

    def values_condition(self) -> tuple[Any, ...]:
        if self.at("WORD", "not"):
            self.take()
            self.take("WORD", "in")
            return ("not in", self.array())
        if self.at("WORD", "in"):
            self.take()
            return ("in", self.array())
        if self.at("WORD", "matches"):
            self.take()
            regex = self.take("STRING").value
            try:
                re.compile(regex.replace(r"\p{L}", "a").replace(r"\p{Nd}", r"\d").replace(r"\z", r"\Z"))
            except re.error as exc:
                raise DQDLSyntaxError(f"matches takes a regular expression: {exc}") from exc
            return ("matches", regex)
        if self.at("WORD", "between"):
            return self.number_condition()
        op = self.take("OP").value
        t = self.peek()
        if t is not None and (t.kind in ("STRING", "NUMBER") or (t.kind == "WORD" and t.value in KEYWORDS)):
            return (op, self.item())
        raise DQDLSyntaxError(f"ColumnValues {op} needs a value")

    def rule(self) -> Rule:
        name = self.take("WORD").value
        if name not in SIGNATURES:
            raise DQDLSyntaxError(f"unknown rule type {name!r}")
        nparams, expr = SIGNATURES[name]
        params: list[str] = []
        if nparams == "+":
            params.append(self.take("STRING").value)
            while self.at("STRING"):
                params.append(self.take().value)
        elif nparams == "sql":
            params.append(self.take("STRING").value)
        else:
            params += [self.take("STRING").value for _ in range(nparams)]
        if self.at("STRING"):
            raise DQDLSyntaxError(f"{name} takes {nparams} column(s)")
        condition: tuple[Any, ...] | None = None
        if expr == "number":
            condition = self.number_condition()
        elif expr == "string":
            self.take("OP", "=")
            condition = ("=", self.take("STRING").value)
        elif expr == "values":
            condition = self.values_condition()
        rule = Rule(name, params, condition)
        if self.at("WORD", "where"):
            self.take()
            rule.where = self.take("STRING").value
        if self.at("WORD", "with"):
            self.take()
            self.take("WORD", "threshold")
            rule.threshold = self.number_condition()
        return rule


def parse(text: str) -> list[Rule | Composite]:
    """The rules of a DQDL document; DQDLSyntaxError when it breaks the grammar."""
    return _Parser(text).document()
