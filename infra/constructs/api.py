"""The REST API: Cognito user-pool authorizer on every method, request validation, routes to two functions."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_cognito as cognito
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.nag import acknowledge


@dataclass(frozen=True)
class Route:
    """One method: path, verb, the function behind it and the body model (None: no body)."""

    path: str
    method: str
    function: str  # "api" or "followup"
    body: str | None = None


ROUTES: tuple[Route, ...] = (
    Route("/datasets", "POST", "api", "CreateDataset"),
    Route("/datasets", "GET", "api"),
    Route("/datasets/{id}", "GET", "api"),
    Route("/datasets/{id}/runs", "POST", "api", "StartRun"),
    Route("/datasets/{id}/schedule", "PUT", "api", "PutSchedule"),
    Route("/datasets/{id}/schedule", "DELETE", "api"),
    Route("/runs/{id}", "GET", "api"),
    Route("/runs/{id}", "DELETE", "api"),
    Route("/runs/{id}/issues", "GET", "api"),
    Route("/runs/{id}/report", "GET", "api"),
    Route("/issues/{id}/followup", "POST", "followup", "FollowupAnswer"),
)

# Gateway-level shape checks (JSON Schema draft 4, what API Gateway speaks): a body must be a JSON object
# of bounded size with the fields that route cannot work without. Field-level rules live once, in the
# functions' pydantic models, which answer 422 with the field at fault.
BODY_MODELS: dict[str, dict[str, object]] = {
    "CreateDataset": {
        "type": "object",
        "required": ["name"],
        "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 200}},
    },
    "StartRun": {
        "type": "object",
        "properties": {"instructions": {"type": ["string", "null"], "maxLength": 4000}},
    },
    "PutSchedule": {
        "type": "object",
        "required": ["expression"],
        "properties": {"expression": {"type": "string", "minLength": 6, "maxLength": 256}},
    },
    "FollowupAnswer": {"type": "object"},
}


class ApiConstruct(Construct):
    """RestApi + user pool; every route scoped to the caller by the functions, authenticated here."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        functions: dict[str, lambda_.IFunction],
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
        self.client = self.user_pool.add_client(
            "Client", auth_flows=cognito.AuthFlow(user_srp=True), generate_secret=False
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
        models = {
            name: self.api.add_model(
                f"{name}Model",
                content_type="application/json",
                model_name=name,
                schema=apigw.JsonSchema(
                    schema=apigw.JsonSchemaVersion.DRAFT4,
                    type=apigw.JsonSchemaType.OBJECT,
                    required=schema.get("required"),  # type: ignore[arg-type]
                    properties={
                        k: _property(v)
                        for k, v in schema.get("properties", {}).items()  # type: ignore[attr-defined]
                    },
                ),
            )
            for name, schema in BODY_MODELS.items()
        }
        integrations = {
            name: apigw.LambdaIntegration(fn, allow_test_invoke=False) for name, fn in functions.items()
        }
        for route in ROUTES:
            resource = self.api.root.resource_for_path(route.path)
            params = {"method.request.path.id": True} if "{id}" in route.path else None
            resource.add_method(
                route.method,
                integrations[route.function],
                request_validator=self.body_validator if route.body else self.params_validator,
                request_models={"application/json": models[route.body]} if route.body else None,
                request_parameters=params,
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


def _property(spec: object) -> apigw.JsonSchema:
    assert isinstance(spec, dict)
    kind = spec["type"]
    types = [kind] if isinstance(kind, str) else list(kind)
    mapped = [apigw.JsonSchemaType[t.upper()] for t in types]
    return apigw.JsonSchema(
        type=mapped[0] if len(mapped) == 1 else mapped,
        min_length=spec.get("minLength"),
        max_length=spec.get("maxLength"),
    )
