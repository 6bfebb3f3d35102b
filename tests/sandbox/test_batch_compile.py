"""compile_batch_item: a template's head and shared body, run in turn, do what the whole code does."""

from __future__ import annotations

import traceback

import pytest

from iterate.sandbox import batch
from iterate.sandbox.batch import PARAMS_HEAD, compile_batch_item

_HEAD = "import json\n\nimport math\nPARAMS = json.loads({literal})\n"
_BODIES = [
    "result = {'n': len(PARAMS), 'sqrt': math.sqrt(4)}\n",
    '"""Not a docstring after the PARAMS line."""\nresult = __doc__\n',
    "def f(x):\n    return x['a']\n\nresult = f(PARAMS)\n",  # raises KeyError at line 6 of the code
    "x = 1\nfrom __future__ import annotations\n",  # a SyntaxError in the whole code
    "if True:\n    result = [PARAMS, 1 +\n        2]\n",
]


def _run(codes: tuple) -> tuple[object, str | None]:
    namespace: dict = {"__name__": "__investigation__", "result": None}
    try:
        for code in codes:
            exec(code, namespace)
    except Exception as exc:
        frames = traceback.extract_tb(exc.__traceback__)
        return None, f"{type(exc).__name__} at {[(f.filename, f.lineno) for f in frames[1:]]}"
    return namespace.get("result"), None


@pytest.mark.parametrize("body", _BODIES)
@pytest.mark.parametrize("value", ['{"a": 1}', "{}", "[1, 2]"])
def test_split_code_runs_as_the_whole_code(body: str, value: str) -> None:
    code = _HEAD.format(literal=repr(value)) + body
    assert PARAMS_HEAD.match(code) is not None
    try:
        whole: tuple = (compile(code, batch.CODE_NAME, "exec"),)
    except SyntaxError as exc:
        with pytest.raises(SyntaxError) as split_error:
            compile_batch_item(code)
        assert split_error.value.lineno == exc.lineno
        return
    split = compile_batch_item(code)
    assert len(split) == 2  # the fast path was taken
    assert _run(split) == _run(whole)


def test_items_of_one_template_share_one_compiled_body() -> None:
    first = compile_batch_item(_HEAD.format(literal=repr('{"a": 1}')) + _BODIES[0])
    second = compile_batch_item(_HEAD.format(literal=repr('{"a": 2}')) + _BODIES[0])
    assert first[1] is second[1] and first[0] is not second[0]
    assert _run(first)[0] == _run(second)[0] == {"n": 1, "sqrt": 2.0}


def test_other_code_is_compiled_whole() -> None:
    code = 'x = """\nPARAMS = json.loads(\'{}\')\n"""\nresult = x\n'
    (only,) = compile_batch_item(code)
    assert _run((only,)) == ("\nPARAMS = json.loads('{}')\n", None)
