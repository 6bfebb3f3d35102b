"""The static policy: what it refuses before any process starts, and what it lets through."""

import pytest

from iterate.sandbox import check_policy
from iterate.sandbox.policy import MAX_CODE_CHARS

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("code", "rule"),
    [
        ("import os", "import"),
        ("import subprocess", "import"),
        ("from os import path", "import"),
        ("import numpy.ctypeslib", "import"),
        ("from . import x", "import"),
        ("from pandas import *", "import"),
        ("from pandas import read_csv", "import"),
        ("x = ().__class__", "dunder"),
        ("x = df._mgr", "dunder"),
        ("x = __builtins__", "dunder"),
        ("eval('1')", "builtin"),
        ("exec('x = 1')", "builtin"),
        ("compile('1', 'f', 'eval')", "builtin"),
        ("open('/etc/passwd')", "builtin"),
        ("getattr(df, 'x')", "builtin"),
        ("x = pd.io.common.os", "attribute"),
        ("import re\nx = re.enum.sys", "attribute"),
        ("df.query('a > 1')", "attribute"),
        ("pd.eval('1 + 1')", "attribute"),
        ("x = pd.read_csv('f.csv')", "io"),
        ("df.to_parquet('f.parquet')", "io"),
        ("df.to_csv('f.csv')", "io"),
        ("df.to_json(path_or_buf='f.json')", "io"),
        ("np.save('f', df)", "attribute"),
        ("x = np.arange(3).tofile('f')", "attribute"),
        ("df.apply('query', expr='1')", "string"),
        ("x = '{0.__class__}'.format(df)", "dunder"),
        ("x = '{0.__class__}'.format(df)", "format"),
        # str.format walks attributes named in its template: every walking field is refused
        ("x = '{0.io.common.os.environ}'.format(pd)", "format"),
        ("x = '{x.io}'.format_map({'x': pd})", "format"),
        ("t = '{0.io}'\nx = t.format(pd)", "format"),
        ("x = '{0:{1.io}}'.format(1, pd)", "format"),
        ("x = '{0[0].real}'.format([pd])", "format"),
        ("x = list(map('{0.real}'.format, [1]))", "format"),
        ("x = {'k': '{0.dtypes}'}", "format"),
        # and a template the checker cannot read is never formatted
        ("t = 'harmless'\nx = t.format(pd)", "format"),
        ("x = ('{0.i' + 'o}').format(pd)", "format"),
        ("x = str.format('{0}', pd)", "format"),
        ("x = f'{{0.io}}'.format(pd)", "format"),
        ("x = df.style.format('{0}')", "format"),
        # f-strings are expressions: the walk is an ast.Attribute like any other
        ("x = f'{pd.io.common.os.environ}'", "attribute"),
        ("x = f'{df:{pd.io}}'", "attribute"),
        ("x = 'read_csv'", "string"),
        ("class X:\n    pass", "class"),
        ("def f():\n    global g", "scope"),
        ("async def f():\n    pass", "async"),
        ("result = {", "syntax"),
    ],
)
def test_hostile_constructs_are_refused_with_a_rule(code: str, rule: str) -> None:
    # Given code using a construct the policy bans / When checked / Then a violation names the rule and line
    violations = check_policy(code)
    assert violations, code
    assert rule in {v.rule for v in violations}, [str(v) for v in violations]
    assert all(v.line >= 0 for v in violations)


@pytest.mark.parametrize(
    "code",
    [
        "result = {'n': len(df)}",
        "import pandas as pd\nimport numpy as np\nimport re, json, math, datetime, statistics, collections",
        "import itertools, decimal, difflib, string, unicodedata",
        "from collections import Counter\nresult = dict(Counter(df['a']))",
        "s = pd.to_numeric(df['a'].str.replace(',', ''), errors='coerce')\nresult = {'n': int(s.isna().sum())}",
        "d = pd.to_datetime(df['d'], errors='coerce')\nresult = {'x': d.dt.year.to_list()}",
        "result = json.loads(df.head().to_json(orient='records'))[0]",
        "print(df.to_string())",
        "p = re.compile(r'\\d+')\nresult = {'m': [bool(p.fullmatch(v)) for v in df['a']]}",
        "def f(v):\n    return v.strip()\nresult = {'x': [f(v) for v in df['a']]}",
        "for _ in range(3):\n    pass\nresult = {'ok': True}",
        "result = {'o': df['a'].astype(object).to_dict(), 't': str(type(1))}",
        "x = df.groupby(['a', 'b']).size().reset_index(name='n')\nresult = {'n': len(x)}",
        "result = {'numeric': bool(pd.api.types.is_numeric_dtype(pd.to_numeric(df['a'], errors='coerce')))}",
        # str.format with fields that name, index and format arguments, and f-strings
        "x = '{:.2f}'.format(1.5) + '{0} rows'.format(len(df)) + '{name}: {n:,}'.format(name='a', n=3)",
        "x = '{0[0]} in {row[city]}'.format([1], row={'city': 'x'})",
        "x = '{0:>{1}}|{x!r:^{w}.3}'.format('a', 5, x=1.5, w=9)",
        "x = '{{0.io}} is literal text'.format()",
        "x = df['a'].map('{:.1%}'.format)",
        "x = f'{len(df):,} rows, {df.shape[1]} columns, {df[\"a\"].mean():.2f}'",
        # strings that read as templates but walk nothing: regex quantifiers, JSON with dotted keys
        "p = re.compile(r'\\d{1,3}\\.\\d{2}')",
        'x = json.loads(\'{"a.b": {"c.d": [1, 2]}}\')',
    ],
)
def test_ordinary_analysis_code_passes(code: str) -> None:
    assert check_policy(code) == []


def test_a_format_field_that_walks_attributes_is_named_in_the_refusal() -> None:
    # Given the module walk of issue 33 hidden in a format string / When checked / Then the field is named
    details = [v.detail for v in check_policy("x = '{0.io.common.os.environ}'.format(pd)")]
    assert details == [
        "format field '0.io.common.os.environ' walks attributes inside a string: write the expression in code"
    ]


def test_code_too_long_is_refused_before_parsing() -> None:
    violations = check_policy("x = 1\n" * (MAX_CODE_CHARS // 5))
    assert [v.rule for v in violations] == ["size"]


# The engine's templates differ only in the literal of parameters after their imports: check_policy checks
# that code once with an empty literal and the literal on its own. The verdict must be the full check's.
_HEAD = (
    "import json\nimport re\n\nimport numpy as np\nimport pandas as pd\n\nPARAMS = json.loads({literal})\n"
)
_BODIES = [
    "name = PARAMS['column']\nresult = {'n': len(df[name])}\n",
    "x = getattr(df, PARAMS['a'])\n",
    "import os\nresult = 1\n",
    "df.to_csv(PARAMS['path'])\n",
]
_VALUES = [
    '{"column": "a"}',
    '{"a": "__class__"}',
    '{"a": "eval"}',
    '{"a": "read_csv"}',
    '{"a": "{0.io}"}',
    '{"a.b": {"c.d": "x"}}',
    "x'\\\"\n",
    "",
]


@pytest.mark.parametrize("body", _BODIES)
@pytest.mark.parametrize("value", _VALUES)
def test_parameter_literals_get_the_verdict_of_the_whole_code(body: str, value: str) -> None:
    from iterate.sandbox.batch import PARAMS_HEAD
    from iterate.sandbox.policy import _check_policy

    code = _HEAD.format(literal=repr(value)) + body
    assert PARAMS_HEAD.match(code) is not None  # the fast path is taken
    fast = sorted(str(v) for v in check_policy(code))
    assert fast == sorted(str(v) for v in _check_policy(code))


def test_a_literal_inside_another_string_takes_the_full_check() -> None:
    from iterate.sandbox.batch import PARAMS_HEAD

    code = 'x = """\nPARAMS = json.loads(\'__import__\')\n"""\n'
    assert PARAMS_HEAD.match(code) is None
    assert any(v.rule == "dunder" for v in check_policy(code))


def test_a_walking_template_in_the_parameter_literal_is_refused_on_the_fast_path() -> None:
    from iterate.sandbox.batch import PARAMS_HEAD

    code = _HEAD.format(literal=repr('{"t": "{0.io.common.os.environ}"}')) + "x = PARAMS['t']\n"
    assert PARAMS_HEAD.match(code) is not None
    assert [v.rule for v in check_policy(code)] == ["format"]
