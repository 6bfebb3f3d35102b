"""Offline follow-up agent: rule-based questions per issue type, one at a time, each answer a fix action."""

from __future__ import annotations

from typing import Any

from iterate.contracts import FixAction, FollowupTurn, Issue, SmartFixFollowup, SmartFixOption

# Every action a follow-up may lead to; the Claude agent's answers are checked against this list too.
FIX_ACTIONS = frozenset(
    {
        "standardize_values",
        "set_null",
        "drop_rows",
        "drop_column",
        "keep",
        "convert_unit",
        "convert_dates",
        "split_column",
        "fill_value",
        "trim_whitespace",
        "flag_for_review",
        "ask_next",
    }
)

Option = tuple[str, str, FixAction]


def _q(prompt: str, options: list[Option], examples: str | None = None) -> SmartFixFollowup:
    return SmartFixFollowup(
        prompt=prompt,
        options=[SmartFixOption(key=k, label=label) for k, label, _ in options],
        examples=examples,
        onResponse={k: action for k, _, action in options},
    )


def _act(action: str, **parameters: Any) -> FixAction:
    return FixAction(action=action, parameters=parameters)


def _examples(issue: Issue, n: int = 3) -> str | None:
    if issue.evidence is None or not issue.evidence.examples:
        return None
    parts = []
    for e in issue.evidence.examples[:n]:
        arrow = f" → '{e.expected}'" if e.expected else ""
        parts.append(f"row {e.row}: '{e.value[:40]}'{arrow}")
    return "; ".join(parts)


def _stats(issue: Issue) -> dict[str, Any]:
    return dict(issue.evidence.stats) if issue.evidence else {}


def _column(issue: Issue) -> str:
    stats = _stats(issue)
    col = stats.get("column") or stats.get("rhs")
    return str(col) if col else (issue.affectedColumns[0] if issue.affectedColumns else "")


def _rows(issue: Issue) -> str:
    return f"{issue.affectedRows} rows" if issue.affectedRows is not None else "Some rows"


def main_question(issue: Issue) -> SmartFixFollowup:
    """The first question for an issue, chosen by its type."""
    t, col, stats, ex = issue.type, _column(issue), _stats(issue), _examples(issue)
    review, keep = (
        ("review", "Flag them for manual review", _act("flag_for_review", column=col)),
        (
            "keep",
            "Leave them as they are",
            _act("keep"),
        ),
    )
    if t == "inconsistent_category" and stats.get("rule") == "word_slip":
        mapping = {str(k): str(v) for k, v in (stats.get("canonical") or {}).items()}
        slips = [s for s in (stats.get("slips") or {}).values() if isinstance(s, list) and len(s) >= 2]
        pairs = list(dict.fromkeys((str(s[0]), str(s[1])) for s in slips))
        shown = ", ".join(f"'{written}' for '{usual}'" for written, usual in pairs[:3])
        return _q(
            f"{_rows(issue)} of '{col}' hold a misspelled word"
            + (f" ({shown})" if shown else "")
            + ": the column writes that word another way everywhere else. Correct the words?",
            [
                (
                    "standardize",
                    "Yes, use the column's usual spelling of the word",
                    _act("standardize_values", column=col, mapping=mapping),
                ),
                review,
                ("keep", "They are spelled right; keep them", _act("keep")),
            ],
            ex,
        )
    if t in {"inconsistent_category", "encoding_damage"}:
        mapping = {str(k): str(v) for k, v in (stats.get("canonical") or {}).items()}
        return _q(
            f"'{col}' spells the same value in different ways ({_rows(issue)}). Replace the variants with one "
            "canonical spelling each?",
            [
                (
                    "standardize",
                    "Yes, use the suggested spelling",
                    _act("standardize_values", column=col, mapping=mapping),
                ),
                review,
                keep,
            ],
            ex,
        )
    if t == "stray_whitespace":
        return _q(
            f"Values in '{col}' have leading, trailing or doubled spaces ({_rows(issue)}). Trim them?",
            [("trim", "Yes, trim the spaces", _act("trim_whitespace", column=col)), keep],
            ex,
        )
    if t in {"missing_values", "disguised_missing"}:
        markers = [str(m) for m in stats.get("markers", [])]
        return _q(
            f"'{col}' is missing in {_rows(issue).lower()}"
            + (f" (written as {', '.join(repr(m) for m in markers[:4])})" if markers else "")
            + ". How should they be handled?",
            [
                ("null", "Store them as proper empty values", _act("set_null", column=col, values=markers)),
                ("fill", "Fill them with a value", _act("ask_next", topic="fill")),
                ("drop", "Remove those rows", _act("drop_rows", column=col, condition="missing")),
                keep,
            ],
            ex,
        )
    if t == "numeric_outlier":
        bounds = {k: stats[k] for k in ("low", "high") if k in stats}
        return _q(
            f"{_rows(issue)} have '{col}' values far outside the usual range. What should happen to them?",
            [
                review,
                ("null", "Clear those values", _act("set_null", column=col, condition="outside", **bounds)),
                ("drop", "Remove those rows", _act("drop_rows", column=col, condition="outside", **bounds)),
                ("keep", "They are genuine; keep them", _act("keep")),
            ],
            ex,
        )
    if t == "unit_in_number":
        return _q(
            f"'{col}' mixes numbers with units or symbols ({_rows(issue)}). Convert everything to plain numbers "
            "in one unit?",
            [
                (
                    "convert",
                    "Yes, convert to the most common unit",
                    _act("convert_unit", column=col, to=str(stats.get("unit", "most_common"))),
                ),
                (
                    "strip",
                    "Just remove the unit text",
                    _act("standardize_values", column=col, strategy="strip_units"),
                ),
                review,
                keep,
            ],
            ex,
        )
    if t in {"format_violation", "mixed_types", "out_of_domain"}:
        main_format, formats = stats.get("main_format"), [str(f) for f in stats.get("other_formats", [])]
        convert: list[Option] = []
        canonical = {str(k): str(v) for k, v in (stats.get("canonical") or {}).items()}
        if canonical:  # written unlike the column's convention: rewritten the column's way, value unchanged
            first = next(iter(canonical.items()))
            convert = [
                (
                    "rewrite",
                    f"Rewrite them the column's way ('{first[0]}' → '{first[1]}')",
                    _act("standardize_values", column=col, mapping=canonical),
                )
            ]
        elif main_format and formats:  # dates written in several formats: one format is a conversion away
            convert = [
                (
                    "convert",
                    f"Convert them to the column's main format ({main_format})",
                    _act("convert_dates", column=col, to=str(main_format), formats=formats),
                )
            ]
        return _q(
            f"{_rows(issue)} have '{col}' values that do not fit the column's format. What should happen?",
            [
                *convert,
                review,
                ("null", "Clear the invalid values", _act("set_null", column=col, condition="invalid")),
                # four options at most: a convertible column offers conversion instead of removing rows
                *(
                    []
                    if convert
                    else [("drop", "Remove those rows", _act("drop_rows", column=col, condition="invalid"))]
                ),
                keep,
            ],
            ex,
        )
    if t in {"duplicate_rows", "near_duplicate_rows"}:
        return _q(
            f"{_rows(issue)} repeat another row"
            + (" after normalising case and spaces" if t.startswith("near") else "")
            + ". Remove the repeats and keep the first occurrence?",
            [
                ("drop", "Yes, keep only the first", _act("drop_rows", condition=t, keep="first")),
                review,
                keep,
            ],
            ex,
        )
    if t == "dependency_violation" and not stats.get("lhs"):
        # Neighbours in file order (detect/order.py): no group decides the value, so no majority to copy in;
        # a file sorted by another column can look like this, so the owner checks them against the source.
        return _q(
            f"{_rows(issue)} hold another value of '{col}' than the rows around them in the file. "
            "Flag them so someone checks each against the source?",
            [review, keep],
            ex,
        )
    if t == "dependency_violation":
        lhs = [str(c) for c in stats.get("lhs", [])]
        return _q(
            f"{_rows(issue)} disagree with the usual '{col}' for their "
            + " + ".join(f"'{c}'" for c in lhs)
            + ". Correct them to the majority value of their group?",
            [
                (
                    "correct",
                    "Yes, use the majority value",
                    _act("standardize_values", column=col, strategy="group_majority", by=lhs),
                ),
                review,
                keep,
            ],
            ex,
        )
    if t == "merged_columns":
        other = str(stats.get("other", ""))
        return _q(
            f"In {_rows(issue).lower()}, '{col}' seems to also hold the value that belongs in '{other}'. Split it?",
            [
                (
                    "split",
                    "Yes, move the tail into the other column",
                    _act("split_column", column=col, into=[col, other]),
                ),
                review,
                keep,
            ],
            ex,
        )
    if t in {"constant_column", "all_unique_column"}:
        return _q(
            f"'{col}' carries no analytical signal ({t.replace('_', ' ')}). Drop the column?",
            [("drop", "Drop the column", _act("drop_column", column=col)), keep],
            ex,
        )
    return _q(
        f"{issue.description[:300]} How would you like to proceed?",
        [review, keep],
        ex,
    )


def topic_question(issue: Issue, topic: str) -> SmartFixFollowup:
    """A second-level question reached through an `ask_next` answer."""
    col = _column(issue)
    if topic == "fill" and _stats(issue).get("dataType") == "numeric":
        # A number column: a number that keeps its distribution, never text (issue stats carry the profile's type)
        return _q(
            f"Which number should fill the gaps in '{col}'?",
            [
                ("median", "The median of the column", _act("fill_value", column=col, strategy="median")),
                ("null", "Leave them as proper empty values", _act("set_null", column=col)),
            ],
        )
    if topic == "fill":
        return _q(
            f"Which value should fill the gaps in '{col}'?",
            [
                (
                    "most_frequent",
                    "The most frequent value",
                    _act("fill_value", column=col, strategy="most_frequent"),
                ),
                ("unknown", "The text 'Unknown'", _act("fill_value", column=col, value="Unknown")),
                ("null", "Leave them as proper empty values", _act("set_null", column=col)),
            ],
        )
    return done_question(issue)


def done_question(issue: Issue) -> SmartFixFollowup:
    return _q(
        "The fix for this issue is chosen. Anything else?",
        [
            ("done", "No, that's all", _act("keep")),
            ("review", "Also flag the rows for review", _act("flag_for_review", column=_column(issue))),
        ],
    )


def next_topic(history: list[FollowupTurn]) -> str | None:
    """The topic to ask about next: "main" first, the `ask_next` topic after such an answer, None when done."""
    answered = [t for t in history if t.answer is not None]
    if not answered:
        return "main"
    last = answered[-1]
    action = (last.question.onResponse or {}).get(last.answer or "")
    if action is not None and action.action == "ask_next":
        return str(action.parameters.get("topic", "main"))
    return None


class OfflineFollowupAgent:
    """FollowupAgent without an LLM."""

    def next_question(self, issue: Issue, history: list[FollowupTurn]) -> SmartFixFollowup:
        if history and history[-1].answer is None:
            return history[-1].question  # still waiting for an answer: ask the same question again
        topic = next_topic(history)
        if topic == "main":
            return main_question(issue)
        if topic is None:
            return done_question(issue)
        return topic_question(issue, topic)
