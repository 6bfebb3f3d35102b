"""Static policy: an AST check that refuses investigation code before it reaches a process."""

from __future__ import annotations

import ast
import string
from _string import formatter_field_name_split  # how str.format itself splits `0.io[k]` into its path
from dataclasses import dataclass
from functools import lru_cache

from iterate.sandbox.batch import PARAMS_HEAD
from iterate.sandbox.inprocess import ALLOWED_IMPORTS  # the runner's own list: one list, read by both

# Builtins that execute code, reach files or the interpreter, or read attributes by a computed name.
BANNED_CALLS = frozenset(
    {
        "eval",
        "exec",
        "compile",
        "__import__",
        "open",
        "input",
        "breakpoint",
        "help",
        "exit",
        "quit",
        "globals",
        "locals",
        "vars",
        "dir",
        "getattr",
        "setattr",
        "delattr",
        "memoryview",
    }
)

# Attribute names that lead to I/O, code execution or a module that does (`pd.io.common.os`, `re.enum.sys`).
BANNED_ATTRIBUTES = frozenset(
    {
        # modules reachable as attributes of allowed ones
        "os",
        "sys",
        "io",
        "subprocess",
        "builtins",
        "shutil",
        "socket",
        "ctypes",
        "ctypeslib",
        "importlib",
        "pickle",
        "marshal",
        "gc",
        "inspect",
        "threading",
        "multiprocessing",
        "signal",
        "resource",
        "posix",
        "pathlib",
        "tempfile",
        "urllib",
        "http",
        "enum",
        "functools",
        "operator",
        "weakref",
        "mmap",
        "codecs",
        "lib",
        "npyio",
        "f2py",
        "testing",
        "distutils",
        "compat",
        "core",
        "util",
        "plotting",
        "clipboard",
        "common",
        "parsers",
        "formats",
        "excel",
        "sql",
        # dynamic code and expression engines
        "eval",
        "query",
        "exec",
        "system",
        "popen",
        "spawn",
        "fork",
        "kill",
        "environ",
        "getenv",
        # file readers and writers outside the read_*/to_* families
        "load",
        "loadtxt",
        "genfromtxt",
        "fromfile",
        "tofile",
        "fromregex",
        "save",
        "savez",
        "savez_compressed",
        "savetxt",
        "memmap",
        "open",
        "fdopen",
        "dump",
        "DataSource",
        "HDFStore",
        "ExcelWriter",
        "ExcelFile",
        "read",
        "write",
        "frame",
        "f_back",
        "f_globals",
        "f_locals",
        "f_builtins",
        "gi_frame",
        "gi_code",
        "cr_frame",
        "ag_frame",
        "tb_frame",
        "tb_next",
        "co_code",
        "mro",
        # formatters look attributes up by a name held in a string: a frame walk the AST cannot see
        "Formatter",
        "get_field",
        "vformat",
        "format_map",
        "format_field",
        "convert_field",
        "cell_contents",
    }
)

# to_* methods that return values in memory rather than writing anywhere.
ALLOWED_TO_METHODS = frozenset(
    {
        "to_numeric",
        "to_datetime",
        "to_timedelta",
        "to_dict",
        "to_list",
        "to_numpy",
        "to_frame",
        "to_records",
        "to_period",
        "to_flat_index",
        "to_series",
        "to_pydatetime",
        "to_timestamp",
        "to_offset",
    }
)
# These write to a path when given one; with no target they return a string.
TO_METHODS_WITHOUT_TARGET = frozenset({"to_string", "to_json", "to_csv", "to_markdown", "to_html"})
TARGET_KEYWORDS = frozenset({"buf", "path_or_buf", "path", "filepath_or_buffer", "excel_writer"})

# Strings pandas resolves to a method by name (`df.apply("query", ...)`, `groupby(...).agg(name)`).
BANNED_STRINGS = frozenset({"eval", "query", "exec", "compile", "pipe"})

MAX_CODE_CHARS = 100_000


@dataclass(frozen=True)
class Violation:
    """One reason the code was refused, with the line it was found on."""

    line: int
    rule: str
    detail: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.rule}: {self.detail}"


def _is_dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__") and len(name) > 4


def _is_string_literal(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _walking_fields(template: str, depth: int = 2) -> list[str]:
    """The fields of `template`, read as a str.format template, that walk an attribute.

    str.format looks up `{0.io.common.os.environ}` attribute by attribute, a module walk the AST only sees as
    a string. So every string constant is read as a template, wherever it stands (formatted in place, bound
    to a name first, or handed to a library that formats it), and a field with any `.name` in its path is
    refused: a template never needs one, the expression can be written in code where the checker sees it.
    An index path alone (`{0[0]}`, `{row[city]}`) is let through: it is `x[0]` / `x["city"]` on an argument
    the code passed, which the policy allows in code too (a key with `__` is refused as any such string).
    Only identifier names count: a JSON key such as `{"a.b": 1}` reads as field `"a` with attribute `b"`,
    which names nothing. Specs are read as templates too (`{0:{1.io}}`), to the depth str.format allows.
    A template this cannot read, one built at run time, never reaches str.format: `.format` is refused on
    anything but a string literal (visit_Attribute); format_map, Formatter and vformat are banned outright.
    """
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError:  # not a template str.format accepts
        return []
    found = []
    for _, field, spec, _ in parsed:
        if field:
            try:
                path = list(formatter_field_name_split(field)[1])
            except ValueError:
                path = []
            if any(is_attribute and str(name).isidentifier() for is_attribute, name in path):
                found.append(field)
        if spec and depth > 1:
            found += _walking_fields(spec, depth - 1)
    return found


class _Checker(ast.NodeVisitor):
    def __init__(self) -> None:
        self.violations: list[Violation] = []

    def _flag(self, node: ast.AST, rule: str, detail: str) -> None:
        self.violations.append(Violation(getattr(node, "lineno", 0), rule, detail))

    def _check_module(self, node: ast.AST, module: str | None) -> None:
        top = (module or "").split(".")[0]
        if top not in ALLOWED_IMPORTS:
            self._flag(node, "import", f"module {module!r} is not allowed")
        elif "." in (module or "") and any(
            part in BANNED_ATTRIBUTES for part in (module or "").split(".")[1:]
        ):
            self._flag(node, "import", f"submodule {module!r} is not allowed")

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._check_module(node, alias.name)
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            self._flag(node, "import", "relative imports are not allowed")
        self._check_module(node, node.module)
        for alias in node.names:
            self._check_name(node, alias.name, "import")
        self.generic_visit(node)

    def _check_name(self, node: ast.AST, name: str, kind: str) -> None:
        if name == "*":
            self._flag(node, kind, "star imports are not allowed")
        elif _is_dunder(name) or name.startswith("_"):
            self._flag(node, kind, f"private or dunder name {name!r}")
        elif name in BANNED_ATTRIBUTES or name in BANNED_CALLS:
            self._flag(node, kind, f"{name!r} is not allowed")
        elif name.startswith("read_") or (name.startswith("to_") and name not in ALLOWED_TO_METHODS):
            self._flag(node, kind, f"{name!r} reads or writes files")

    def visit_Name(self, node: ast.Name) -> None:
        if _is_dunder(node.id):
            self._flag(node, "dunder", f"name {node.id!r}")
        elif node.id in BANNED_CALLS:
            self._flag(node, "builtin", f"{node.id!r} is not allowed")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        name = node.attr
        if name.startswith("_"):
            self._flag(node, "dunder", f"private or dunder attribute {name!r}")
        elif name in BANNED_ATTRIBUTES:
            self._flag(node, "attribute", f"{name!r} is not allowed")
        elif name.startswith("read_"):
            self._flag(node, "io", f"{name!r} reads files")
        elif (
            name.startswith("to_")
            and name not in ALLOWED_TO_METHODS
            and name not in TO_METHODS_WITHOUT_TARGET
        ):
            self._flag(node, "io", f"{name!r} writes files")
        elif name == "format" and not _is_string_literal(node.value):
            # A template from a name, an expression or `str.format(t, ...)` may be built where no check reads it.
            self._flag(
                node, "format", "format() on anything but a string literal: use a literal or an f-string"
            )
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        has_target = node.args or any(k.arg in TARGET_KEYWORDS or k.arg is None for k in node.keywords)
        if isinstance(func, ast.Attribute) and func.attr in TO_METHODS_WITHOUT_TARGET and has_target:
            self._flag(node, "io", f"{func.attr}() with a target writes a file")
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        # Strings reach attributes through str.format, pandas string dispatch (`df.apply("query")`) and
        # the like, so a string naming something banned is refused as if it were written as code.
        value = node.value
        if isinstance(value, bytes):
            value = value.decode("latin-1")
        if isinstance(value, str):
            stripped = value.strip()
            if "__" in value:
                self._flag(node, "dunder", "string containing '__'")
            elif stripped in BANNED_STRINGS or (
                stripped.isidentifier()
                and (
                    stripped.startswith("read_")
                    or (stripped.startswith("to_") and stripped not in ALLOWED_TO_METHODS)
                )
            ):
                self._flag(node, "string", f"string naming {stripped!r}")
            for field in _walking_fields(value):
                self._flag(
                    node,
                    "format",
                    f"format field {field!r} walks attributes inside a string: write the expression in code",
                )

    def visit_Global(self, node: ast.Global) -> None:
        self._flag(node, "scope", "global statements are not allowed")

    def visit_Nonlocal(self, node: ast.Nonlocal) -> None:
        self._flag(node, "scope", "nonlocal statements are not allowed")

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._flag(node, "async", "async code is not allowed")

    def visit_Await(self, node: ast.Await) -> None:
        self._flag(node, "async", "async code is not allowed")

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        # Classes bring metaclasses, descriptors and dunder methods: far more surface than an analysis needs.
        self._flag(node, "class", "class definitions are not allowed")

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        if node.decorator_list:
            self._flag(node, "decorator", "decorators are not allowed")
        if _is_dunder(node.name):
            self._flag(node, "dunder", f"function named {node.name!r}")
        self.generic_visit(node)


def check_policy(code: str) -> list[Violation]:
    """Every reason the static policy refuses `code`; an empty list means it may run.

    Code that begins with import lines and then `PARAMS = json.loads('<one string literal>')` is checked as
    that same code with an empty literal (a verdict remembered across calls) plus the literal's own value.
    That is the same verdict: the checker reads a string constant's value in visit_Constant alone, and a
    literal that opens the code after its imports stands in no other string.
    """
    found = PARAMS_HEAD.match(code)
    if found is None or len(code) > MAX_CODE_CHARS or "\x00" in code:
        return _check_policy(code)
    head, literal = found.group("head"), found.group("literal")
    try:
        value = ast.literal_eval(literal)
    except (SyntaxError, ValueError):
        return _check_policy(code)
    if not isinstance(value, str):
        return _check_policy(code)
    rest = code[found.end() :]
    violations = list(_check_policy_cached(head + "'')\n" + rest))
    line = head.count("\n") + 1
    probe = _Checker()
    probe.visit_Constant(ast.Constant(value=value, lineno=line, col_offset=0))
    return sorted(violations + probe.violations, key=lambda v: v.line)


@lru_cache(maxsize=256)
def _check_policy_cached(code: str) -> tuple[Violation, ...]:
    return tuple(_check_policy(code))


def _check_policy(code: str) -> list[Violation]:
    if len(code) > MAX_CODE_CHARS:
        return [Violation(0, "size", f"code longer than {MAX_CODE_CHARS} characters")]
    if "\x00" in code:
        return [Violation(0, "syntax", "NUL byte in code")]
    try:
        tree = ast.parse(code, mode="exec")
    except SyntaxError as exc:
        return [Violation(exc.lineno or 0, "syntax", exc.msg)]
    checker = _Checker()
    checker.visit(tree)
    return checker.violations
