"""Which columns of `df` a piece of investigation code can read, proved from its syntax tree.

Code a model writes used to get the whole table: on AWS every column fetched by ranged GETs and loaded as
text (a 3.2 GB frame at 10M rows x 20 columns, past the sandbox's memory budget from about 5M rows), even
when it counts one column. `frame_columns` reads the code and, when every use of `df` is one whose answer
does not depend on the columns it does not name, returns the names it uses; the sandbox then loads only
those (`DatasetRef.columns`, as for the engine's own templates). Anything it cannot prove gives None, and
the code gets the whole frame as before: the projection changes what is loaded, never what the code sees.

Uses of `df` that are kept (each one's answer is the same on the frame of its columns as on the whole):
- `df["a"]`, `df[["a", "b"]]` (read, or assigned: a new column), with names that are string constants or
  variables bound only to string constants (`col = "a"`, `cols = ["a", "b"]`, `for c in ["a", "b"]`);
- `df.loc[rows, "a"]`, `df.loc[rows, ["a", "b"]]`, `df.at[row, "a"]`, `df.get("a")`;
- `len(df)`, `df.index`, `df.shape[0]`, `"a" in df.columns`;
- rows picked by a mask, `df[mask]` and `df.loc[mask]` (a comparison, a predicate method such as `.isna()`,
  `.isin(...)` or `.str.contains(...)`, or `~`, `&`, `|` of masks: never a column name), and a variable bound
  once to `df` or to such rows, each used in the ways listed here.
Anything else (`df.columns` otherwise, `df.shape`, `df.loc[rows]` by anything but a mask, `df.apply(...)`,
`df.duplicated()`, `bad.head()`, `"a" in df`,
`df` passed to a function or rebound, names built at run time, `globals()`, `eval`, `pd.eval`, `query`,
attributes starting with `_`) reads the whole frame.
"""

from __future__ import annotations

import ast

FRAME = "df"

# Names whose use can reach `df` (or its columns) without naming it: the code then gets the whole frame.
_OPAQUE_NAMES = frozenset(
    {"globals", "locals", "vars", "eval", "exec", "compile", "getattr", "__import__", "__builtins__", "dir"}
)
# Attributes (on anything) that evaluate a string against the caller's variables (`pd.eval("df.shape")`) or
# reach a frame's variables.
_OPAQUE_ATTRIBUTES = frozenset({"eval", "query", "f_globals", "f_locals", "f_back", "tb_frame", "gi_frame"})
# `df.<attribute>` that read no column and mean the same on any choice of columns.
_ROW_ATTRIBUTES = frozenset({"index"})

# What makes a mask (see _Reader._boolean): comparisons, and methods of a Series that answer one boolean a row.
_MASK_COMPARISONS = (ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE)
_MASK_METHODS = frozenset(
    {
        "isna",
        "notna",
        "isnull",
        "notnull",
        "isin",
        "duplicated",
        "between",
        "eq",
        "ne",
        "lt",
        "le",
        "gt",
        "ge",
    }
)
_STR_PREDICATES = frozenset(
    {
        "contains",
        "startswith",
        "endswith",
        "match",
        "fullmatch",
        "isalnum",
        "isalpha",
        "isdigit",
        "isdecimal",
        "isnumeric",
        "isspace",
        "islower",
        "isupper",
        "istitle",
    }
)

_Values = tuple[str, frozenset[str]]  # ("str" | "list", the strings it can be)


class _Unprovable(Exception):
    """Some use of `df` may read a column it does not name."""


def frame_columns(code: str) -> tuple[str, ...] | None:
    """The names of the only columns `code` can read from `df`, each once, in the order of the uses of `df`
    that name them (the sandbox loads them in the file's order); None when it may read any, or when that cannot
    be proved. An empty tuple: it reads no column (only `len(df)` and such)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    try:
        return tuple(_Reader(tree).columns())
    except (_Unprovable, RecursionError):
        return None


class _Reader:
    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.parent: dict[ast.AST, ast.AST] = {}
        self.bindings: dict[str, list[ast.AST]] = {}
        self.visiting: set[int] = set()
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                self.parent[child] = node
        self._index_bindings()

    def _index_bindings(self) -> None:
        """Every place a name is bound; a binding of `df` itself, or one that hides what it holds, is refused."""
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                if node.id == FRAME:
                    raise _Unprovable("df is rebound or deleted")
                self.bindings.setdefault(node.id, []).append(node)
            elif isinstance(node, ast.Global | ast.Nonlocal) and FRAME in node.names:
                raise _Unprovable("df is declared global")
            elif isinstance(node, ast.Name) and node.id in _OPAQUE_NAMES:
                raise _Unprovable(f"{node.id} can reach df")
            elif isinstance(node, ast.Attribute) and (
                node.attr.startswith("_") or node.attr in _OPAQUE_ATTRIBUTES
            ):
                raise _Unprovable(f".{node.attr}")
            else:
                for name in _opaquely_bound(node):
                    if name == FRAME:
                        raise _Unprovable("df is bound by a statement")
                    # Recorded as the node itself: `_binding` refuses whatever is not an assignment or a loop.
                    self.bindings.setdefault(name, []).append(node)

    def columns(self) -> list[str]:
        names: dict[str, None] = {}
        uses = [n for n in ast.walk(self.tree) if isinstance(n, ast.Name) and n.id == FRAME]
        for node in sorted(uses, key=lambda n: (n.lineno, n.col_offset)):  # in the order they are written
            for name in sorted(self._use(node)):
                names.setdefault(name, None)
        return list(names)

    def _use(self, node: ast.expr) -> frozenset[str]:
        """The columns one use of a frame reads: of `df`, of rows picked from it by a mask (`df[mask]`,
        `df.loc[mask]`), or of a variable bound once to one of those (`bad = df[mask]`)."""
        if id(node) in self.visiting:
            raise _Unprovable("a frame defined through itself")
        self.visiting.add(id(node))
        try:
            return self._frame_use(node)
        finally:
            self.visiting.discard(id(node))

    def _frame_use(self, node: ast.expr) -> frozenset[str]:
        parent = self.parent.get(node)
        if isinstance(parent, ast.Subscript) and parent.value is node:
            if isinstance(parent.ctx, ast.Del):
                raise _Unprovable("del df[...]")
            if isinstance(parent.ctx, ast.Load) and self._boolean(parent.slice, set()):
                # Rows picked by a mask: a frame of the same columns (the mask's own reads are uses of their own)
                return self._use(parent)
            return self._names(parent.slice)
        if (
            isinstance(parent, ast.Assign)
            and parent.value is node
            and len(parent.targets) == 1
            and isinstance(parent.targets[0], ast.Name)
            and len(self.bindings.get(parent.targets[0].id, ())) == 1
        ):
            # A variable bound once to the frame: every use of it is a use of the frame.
            name = parent.targets[0].id
            names: set[str] = set()
            for use in ast.walk(self.tree):
                if isinstance(use, ast.Name) and use.id == name and isinstance(use.ctx, ast.Load):
                    names |= self._use(use)
            return frozenset(names)
        if isinstance(parent, ast.Call) and node in parent.args:
            func = parent.func
            if (
                isinstance(func, ast.Name)
                and func.id == "len"
                and len(parent.args) == 1
                and not parent.keywords
            ):
                return frozenset()
            raise _Unprovable("df passed to a function")
        if isinstance(parent, ast.Attribute) and parent.value is node:
            return self._attribute(parent)
        raise _Unprovable("df used whole")

    def _attribute(self, attribute: ast.Attribute) -> frozenset[str]:
        outer = self.parent.get(attribute)
        if attribute.attr in _ROW_ATTRIBUTES:
            return frozenset()
        if attribute.attr == "columns":
            # `"a" in df.columns`: whether the table has that column, the same on a frame that loads "a" if it
            # exists; any other use of the names reads them all.
            if (
                isinstance(outer, ast.Compare)
                and outer.comparators == [attribute]
                and len(outer.ops) == 1
                and isinstance(outer.ops[0], ast.In | ast.NotIn)
            ):
                return self._names(outer.left)
            raise _Unprovable("df.columns")
        if attribute.attr == "shape":
            if (
                isinstance(outer, ast.Subscript)
                and outer.value is attribute
                and isinstance(outer.slice, ast.Constant)
                and outer.slice.value == 0
                and not isinstance(outer.slice.value, bool)
            ):
                return frozenset()
            raise _Unprovable("df.shape")
        if attribute.attr == "loc" and (
            isinstance(outer, ast.Subscript)
            and outer.value is attribute
            and isinstance(outer.ctx, ast.Load)
            and self._boolean(outer.slice, set())
        ):
            return self._use(outer)  # df.loc[mask]: rows picked, every column kept
        if attribute.attr in ("loc", "at"):
            if (
                isinstance(outer, ast.Subscript)
                and outer.value is attribute
                and not isinstance(outer.ctx, ast.Del)
                and isinstance(outer.slice, ast.Tuple)
                and len(outer.slice.elts) == 2
                and not any(isinstance(e, ast.Starred) for e in outer.slice.elts)
            ):
                return self._names(outer.slice.elts[1])
            raise _Unprovable(f"df.{attribute.attr} without a column")
        if attribute.attr == "get":
            if (
                isinstance(outer, ast.Call)
                and outer.func is attribute
                and outer.args
                and not any(isinstance(a, ast.Starred) for a in outer.args)
                and not outer.keywords
                and len(outer.args) <= 2
            ):
                return self._names(outer.args[0])
            raise _Unprovable("df.get without a column")
        raise _Unprovable(f"df.{attribute.attr}")

    def _boolean(self, node: ast.AST, seen: set[str]) -> bool:
        """Whether `node` is a mask for sure (never a column name or a list of names): a comparison, a
        predicate method (`.isna()`, `.isin(...)`, `.str.contains(...)`), `~`, `&`, `|`, `^` of masks, or a
        variable bound once to one."""
        if isinstance(node, ast.Compare):
            return all(isinstance(op, _MASK_COMPARISONS) for op in node.ops)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Invert):
            return self._boolean(node.operand, seen)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitAnd | ast.BitOr | ast.BitXor):
            return self._boolean(node.left, seen) and self._boolean(node.right, seen)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            method = node.func
            if method.attr in _MASK_METHODS:
                return True
            return (
                method.attr in _STR_PREDICATES
                and isinstance(method.value, ast.Attribute)
                and method.value.attr == "str"
            )
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in seen:
            bound = self.bindings.get(node.id, ())
            if len(bound) == 1:
                statement = self.parent.get(bound[0])
                if isinstance(statement, ast.Assign) and statement.targets == [bound[0]]:
                    return self._boolean(statement.value, seen | {node.id})
        return False

    def _names(self, node: ast.AST) -> frozenset[str]:
        """Column names a subscript's key can be: a string, or a list of strings."""
        return self._values(node, set())[1]

    def _values(self, node: ast.AST, seen: set[str]) -> _Values:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return "str", frozenset({node.value})
        if isinstance(node, ast.List | ast.Tuple):
            found: set[str] = set()
            for element in node.elts:
                kind, values = self._values(element, seen)
                if kind != "str":
                    raise _Unprovable("a list inside a list of names")
                found |= values
            return "list", frozenset(found)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            return self._variable(node.id, seen)
        raise _Unprovable("a name computed at run time")

    def _variable(self, name: str, seen: set[str]) -> _Values:
        """What a variable can hold, when every binding of it holds constant names (and it is bound at all)."""
        if name in seen:
            raise _Unprovable("a name defined through itself")
        seen = seen | {name}
        kinds: set[str] = set()
        found: set[str] = set()
        for target in self.bindings.get(name, ()):
            kind, values = self._binding(target, seen)
            kinds.add(kind)
            found |= values
        if len(kinds) != 1:
            raise _Unprovable(f"{name} is unbound or bound to different kinds")
        kind = kinds.pop()
        if kind == "list":
            self._unchanged(name)
        return kind, frozenset(found)

    def _unchanged(self, name: str) -> None:
        """A list of names stays what it was bound to: it is only read where a column key or a loop reads it
        (never handed on, where `cols.append("b")` or an alias could change it)."""
        for node in ast.walk(self.tree):
            if not (isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Load)):
                continue
            parent = self.parent.get(node)
            if isinstance(parent, ast.Subscript) and parent.slice is node:
                ok = isinstance(parent.value, ast.Name) and parent.value.id == FRAME
            elif isinstance(parent, ast.Tuple):  # df.loc[rows, cols]
                outer = self.parent.get(parent)
                ok = (
                    isinstance(outer, ast.Subscript)
                    and outer.slice is parent
                    and isinstance(outer.value, ast.Attribute)
                    and outer.value.attr in ("loc", "at")
                    and isinstance(outer.value.value, ast.Name)
                    and outer.value.value.id == FRAME
                )
            elif isinstance(parent, ast.For | ast.comprehension):
                ok = parent.iter is node
            elif isinstance(parent, ast.Call):
                func = parent.func
                ok = parent.args == [node] and (
                    (isinstance(func, ast.Name) and func.id == "len")
                    or (
                        isinstance(func, ast.Attribute)
                        and func.attr == "get"
                        and isinstance(func.value, ast.Name)
                        and func.value.id == FRAME
                    )
                )
            else:
                ok = False
            if not ok:
                raise _Unprovable(f"{name} may change")

    def _binding(self, target: ast.AST, seen: set[str]) -> _Values:
        statement = self.parent.get(target)
        if isinstance(statement, ast.Assign) and statement.targets == [target]:
            return self._values(statement.value, seen)
        if (
            isinstance(statement, ast.AnnAssign)
            and statement.target is target
            and statement.value is not None
        ):
            return self._values(statement.value, seen)
        if isinstance(statement, ast.For | ast.comprehension) and statement.target is target:
            kind, values = self._values(statement.iter, seen)
            if kind != "list":
                raise _Unprovable("a loop over a string")
            return "str", values
        raise _Unprovable("a binding that is not a constant")


def _opaquely_bound(node: ast.AST) -> list[str]:
    """Names a statement binds other than by assigning a Name: parameters, imports, `except ... as`,
    definitions, match patterns."""
    if isinstance(node, ast.arg):
        return [node.arg]
    if isinstance(node, ast.alias):
        return [(node.asname or node.name).split(".")[0]]
    if isinstance(node, ast.ExceptHandler | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [node.name] if node.name else []
    if isinstance(node, ast.MatchAs | ast.MatchStar):
        return [node.name] if node.name else []
    if isinstance(node, ast.MatchMapping):
        return [node.rest] if node.rest else []
    return []
