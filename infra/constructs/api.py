"""The REST API: Cognito user-pool authorizer on every method, request validation, routes to two functions."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_cognito as cognito
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.nag import acknowledge


class OpenApiError(ValueError):
    """The API document is missing or uses a construct API Gateway models cannot express."""


@dataclass(frozen=True)
class Route:
    """One method from the OpenAPI document: path, verb, the function behind it, its body schema."""

    path: str
    method: str
    function: str  # "api", "followup" or "fix" (its fix jobs' status too)
    path_params: tuple[str, ...]
    query_params: tuple[tuple[str, bool], ...]
    header_params: tuple[tuple[str, bool], ...]
    body_model: str | None
    body_schema: dict[str, Any] | None


def _function_for(path: str) -> str:
    # The follow-up conversation has its own function (it needs the LLM layer), so has the fix route (the data
    # layer, and the only right to write versions/); everything else is "api".
    if path.endswith("/followup"):
        return "followup"
    return "fix" if path.endswith("/fixes") or "/fixes/" in path else "api"


def load_routes(openapi_path: Path) -> tuple[Route, ...]:
    """Every method in the runtime's exported OpenAPI document (the one source of routes and body shapes)."""
    if not openapi_path.is_file():
        raise OpenApiError(f"OpenAPI document not found: {openapi_path}")
    doc = json.loads(openapi_path.read_text())
    schemas = doc.get("components", {}).get("schemas", {})
    routes = []
    for path, methods in sorted(doc["paths"].items()):
        for method, op in sorted(methods.items()):
            params = op.get("parameters", [])
            body = op.get("requestBody")
            body_model = body_schema = None
            if body:
                ref = body["content"]["application/json"]["schema"].get("$ref", "")
                body_model = ref.rsplit("/", 1)[-1]
                if body_model not in schemas:
                    raise OpenApiError(f"{method.upper()} {path}: body schema {ref!r} not in components")
                body_schema = schemas[body_model]
            routes.append(
                Route(
                    path=path,
                    method=method.upper(),
                    function=_function_for(path),
                    path_params=tuple(p["name"] for p in params if p["in"] == "path"),
                    query_params=tuple(
                        (p["name"], bool(p.get("required"))) for p in params if p["in"] == "query"
                    ),
                    header_params=tuple(
                        (p["name"], bool(p.get("required"))) for p in params if p["in"] == "header"
                    ),
                    body_model=body_model,
                    body_schema=body_schema,
                )
            )
    return tuple(routes)


_SCALAR_KEYWORDS = {
    "title": "title",
    "description": "description",
    "default": "default",
    "required": "required",
    "minLength": "min_length",
    "maxLength": "max_length",
    "pattern": "pattern",
    "enum": "enum",
    "minimum": "minimum",
    "maximum": "maximum",
    "minItems": "min_items",
    "maxItems": "max_items",
    "format": "format",
}


def to_gateway_schema(schema: dict[str, Any], *, root: bool = True) -> apigw.JsonSchema:
    """A pydantic/OpenAPI 3.1 schema as an API Gateway (draft-04) model; unknown keywords are an error."""
    types = {t.name.lower(): t for t in apigw.JsonSchemaType}
    kwargs: dict[str, Any] = {"schema": apigw.JsonSchemaVersion.DRAFT4} if root else {}
    for key, value in schema.items():
        if key == "type":
            kinds = [value] if isinstance(value, str) else value
            mapped = [types[k] for k in kinds]
            kwargs["type"] = mapped[0] if len(mapped) == 1 else mapped
        elif key == "properties":
            kwargs["properties"] = {k: to_gateway_schema(v, root=False) for k, v in value.items()}
        elif key == "anyOf":
            kwargs["any_of"] = [to_gateway_schema(v, root=False) for v in value]
        elif key == "additionalProperties":
            kwargs["additional_properties"] = (
                value if isinstance(value, bool) else to_gateway_schema(value, root=False)
            )
        elif key == "items":
            kwargs["items"] = to_gateway_schema(value, root=False)
        elif key in _SCALAR_KEYWORDS:
            kwargs[_SCALAR_KEYWORDS[key]] = value
        else:
            raise OpenApiError(f"JSON Schema keyword {key!r} has no API Gateway (draft-04) equivalent here")
    return apigw.JsonSchema(**kwargs)


class ApiConstruct(Construct):
    """RestApi + user pool; every route scoped to the caller by the functions, authenticated here."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        functions: dict[str, lambda_.IFunction],
        openapi_path: Path,
        log_retention: logs.RetentionDays,
        removal_policy: RemovalPolicy,
    ) -> None:
        super().__init__(scope, construct_id)
        self.user_pool = cognito.UserPool(
            self,
            "Users",
            self_sign_up_enabled=False,  # accounts are provisioned by an admin; owners are user-pool subjects
            sign_in_aliases=cognito.SignInAliases(email=True),
            password_policy=cognito.PasswordPolicy(
                min_length=12,
                require_digits=True,
                require_lowercase=True,
                require_uppercase=True,
                require_symbols=True,
                temp_password_validity=Duration.days(3),
            ),
            mfa=cognito.Mfa.REQUIRED,
            mfa_second_factor=cognito.MfaSecondFactor(otp=True, sms=False),
            account_recovery=cognito.AccountRecovery.EMAIL_ONLY,
            removal_policy=removal_policy,
        )
        acknowledge(
            self.user_pool,
            "AwsSolutions-COG3",
            "Threat protection (advanced security) needs the Cognito Plus feature plan, billed per user; "
            "enable it per deployment once the pool has real users.",
        )
        acknowledge(
            self.user_pool,
            "AwsSolutions-COG8",
            "The Plus feature plan is billed per monthly active user; choose it per deployment (see COG3).",
        )
        # SRP sign-in from the application only: no hosted-UI OAuth flows (the L2's default enables the implicit
        # grant and an https://example.com callback), so no token is ever handed out in a redirect URL.
        self.client = self.user_pool.add_client(
            "Client", auth_flows=cognito.AuthFlow(user_srp=True), generate_secret=False, disable_o_auth=True
        )
        authorizer = apigw.CognitoUserPoolsAuthorizer(self, "Authorizer", cognito_user_pools=[self.user_pool])

        access_logs = logs.LogGroup(
            self, "AccessLogs", retention=log_retention, removal_policy=removal_policy
        )
        self.api = apigw.RestApi(
            self,
            "Api",
            description="Iterate: datasets, runs, issues, reports, follow-ups and schedules",
            endpoint_types=[apigw.EndpointType.REGIONAL],
            cloud_watch_role=True,
            cloud_watch_role_removal_policy=removal_policy,
            deploy_options=apigw.StageOptions(
                stage_name="v1",
                access_log_destination=apigw.LogGroupLogDestination(access_logs),
                access_log_format=apigw.AccessLogFormat.json_with_standard_fields(
                    caller=True,
                    http_method=True,
                    ip=True,
                    protocol=True,
                    request_time=True,
                    resource_path=True,
                    response_length=True,
                    status=True,
                    user=True,
                ),
                logging_level=apigw.MethodLoggingLevel.ERROR,
                data_trace_enabled=False,  # request bodies may hold customer data
                tracing_enabled=True,
                metrics_enabled=True,
                throttling_rate_limit=50,
                throttling_burst_limit=100,
            ),
            default_method_options=apigw.MethodOptions(
                authorizer=authorizer, authorization_type=apigw.AuthorizationType.COGNITO
            ),
        )
        acknowledge(
            self.api,
            "AwsSolutions-APIG3",
            "WAF is a per-deployment choice (cost, rules tuned to the client base); the API is "
            "authenticated, throttled and validated without it.",
        )
        cw_role = self.api.node.try_find_child("CloudWatchRole")
        assert cw_role is not None
        acknowledge(
            cw_role,
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AmazonAPIGatewayPushToCloudWatchLogs]",
            "API Gateway's account-level logging role: this AWS-managed policy is the documented way to let "
            "API Gateway write execution logs, and it grants nothing else.",
        )
        self._error_responses()

        self.body_validator = self.api.add_request_validator(
            "BodyValidator", validate_request_body=True, validate_request_parameters=True
        )
        self.params_validator = self.api.add_request_validator(
            "ParamsValidator", validate_request_body=False, validate_request_parameters=True
        )
        models: dict[str, apigw.IModel] = {}
        integrations = {
            name: apigw.LambdaIntegration(fn, allow_test_invoke=False) for name, fn in functions.items()
        }
        self.routes = load_routes(openapi_path)
        for route in self.routes:
            model = None
            if route.body_model is not None and route.body_schema is not None:
                if route.body_model not in models:
                    models[route.body_model] = self.api.add_model(
                        f"{route.body_model}Model",
                        content_type="application/json",
                        model_name=route.body_model,
                        schema=to_gateway_schema(route.body_schema),
                    )
                model = models[route.body_model]
            params = {f"method.request.path.{p}": True for p in route.path_params}
            params |= {f"method.request.querystring.{q}": required for q, required in route.query_params}
            params |= {f"method.request.header.{h}": required for h, required in route.header_params}
            self.api.root.resource_for_path(route.path).add_method(
                route.method,
                integrations[route.function],
                request_validator=self.body_validator if model else self.params_validator,
                request_models={"application/json": model} if model else None,
                request_parameters=params or None,
            )

    def _error_responses(self) -> None:
        # Gateway errors as JSON with the validator's own message, so a 400 says which check failed.
        body = '{"error": "$context.error.responseType", "message": $context.error.messageString}'
        validation = '{"error": "invalid_request", "message": "$util.escapeJavaScript($context.error.validationErrorString)"}'
        self.api.add_gateway_response(
            "BadBody",
            type=apigw.ResponseType.BAD_REQUEST_BODY,
            templates={"application/json": validation},
        )
        self.api.add_gateway_response(
            "BadParams",
            type=apigw.ResponseType.BAD_REQUEST_PARAMETERS,
            templates={"application/json": validation},
        )
        for name, response_type in (
            ("Unauthorized", apigw.ResponseType.UNAUTHORIZED),
            ("AccessDenied", apigw.ResponseType.ACCESS_DENIED),
            ("Default4xx", apigw.ResponseType.DEFAULT_4_XX),
        ):
            self.api.add_gateway_response(name, type=response_type, templates={"application/json": body})
