"""POST /issues/{ref}/followup (functions/followup): one multiple-choice question at a time per smart fix."""

from __future__ import annotations

import json
from collections.abc import Callable

from aws_lambda_powertools.event_handler import APIGatewayRestResolver
from aws_lambda_powertools.event_handler.exceptions import NotFoundError

from iterate.api.common import (
    FOLLOWUP_LLM_BUDGET_S,
    ConflictError,
    DepsProvider,
    responses,
    split_issue_ref,
)
from iterate.api.models import (
    FollowupRequest,
    FollowupResponse,
)
from iterate.contracts import FollowupTurn, Issue, SmartFixFollowup
from iterate.storage.dynamo import (
    DynamoRunRepository,
    RunTransitionError,
)


def register_followup(
    app: APIGatewayRestResolver, get_deps: DepsProvider, repo: Callable[[], DynamoRunRepository]
) -> None:
    @app.post(
        "/issues/<issue_ref>/followup",
        summary="Answer the open question of a smart fix, get the next one",
        responses=responses(200, FollowupResponse, 400, 404, 409),
    )
    def followup(issue_ref: str, body: FollowupRequest) -> FollowupResponse:
        from iterate.aws.secrets import settings_with_secret

        run_id, issue_id = split_issue_ref(issue_ref)
        r = repo()
        raw_issue = r.get_issue(run_id, issue_id)
        if raw_issue is None:
            raise NotFoundError(f"issue {issue_ref} not found")
        issue = Issue.model_validate(raw_issue)
        turns = r.list_followups(issue_ref)
        history = [
            FollowupTurn(question=SmartFixFollowup.model_validate(t["question"]), answer=t.get("answer"))
            for t in turns
        ]
        open_turn = len(history) - 1 if history and history[-1].answer is None else None
        if body.answer is not None:
            if open_turn is None:
                raise ConflictError("there is no open question to answer; POST without an answer to get one")
            question = history[open_turn].question
            keys = [o.key for o in question.options]
            if body.answer not in keys:
                raise ConflictError(f"answer must be one of {keys}")
            try:
                r.answer_followup(issue_ref, open_turn, body.answer)
            except RunTransitionError as exc:
                raise ConflictError("this question was answered meanwhile") from exc
            history[open_turn] = FollowupTurn(question=question, answer=body.answer)
            action = (question.onResponse or {}).get(body.answer)
            if action is not None and action.action != "ask_next":
                return FollowupResponse(issueRef=issue_ref, turn=open_turn, action=action, done=True)
        elif open_turn is not None:
            return FollowupResponse(
                issueRef=issue_ref, turn=open_turn, question=history[open_turn].question, done=False
            )
        deps = get_deps()
        settings = settings_with_secret(deps.settings, provider=deps.secret_provider)
        if deps.agents_factory is not None:
            agents = deps.agents_factory(settings)
        else:
            from iterate.agents import build_agents

            # API Gateway gives up after 29 s: a slow Claude must fall back to the offline agent before that.
            agents = build_agents(settings, deadline_s=FOLLOWUP_LLM_BUDGET_S)
        question = agents.followup.next_question(issue, history)
        turn = len(history)
        try:
            r.put_followup(issue_ref, turn, {"question": json.loads(question.model_dump_json())})
        except RunTransitionError as exc:
            raise ConflictError("another answer moved this conversation on; fetch it again") from exc
        return FollowupResponse(issueRef=issue_ref, turn=turn, question=question, done=False)
