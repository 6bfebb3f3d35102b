"""Network for the sandbox: a VPC with isolated subnets only, an S3 gateway endpoint that lets through only the
run's data GET and its result PUT, and a DNS firewall that answers NXDOMAIN for every name but the bucket's."""

from __future__ import annotations

from aws_cdk import Fn, RemovalPolicy, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_route53resolver as route53resolver
from aws_cdk import aws_s3 as s3
from constructs import Construct

# Where the sandbox may PUT a result too large to return (iterate.aws.steps.result_key, under a run's prefix).
SANDBOX_RESULT_OBJECTS = "artifacts/*/investigations/*.result.json"
# The DNS firewall's rule priorities (lower first): the one name the sandbox resolves, then everything else.
DNS_ALLOW_PRIORITY = 100
DNS_BLOCK_PRIORITY = 200
# The rule group's place among the groups associated with the VPC (100-9900; there is no other group).
DNS_FIREWALL_ASSOCIATION_PRIORITY = 1000


class SandboxNetworkConstruct(Construct):
    """No NAT, no internet gateway: the sandbox's only way out is GetObject on the artifacts prefix."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        bucket: s3.IBucket,
        readable_prefix: str,
        log_retention: logs.RetentionDays,
        removal_policy: RemovalPolicy,
    ) -> None:
        super().__init__(scope, construct_id)
        self.vpc = ec2.Vpc(
            self,
            "Vpc",
            max_azs=2,
            nat_gateways=0,
            subnet_configuration=[
                ec2.SubnetConfiguration(
                    name="sandbox", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED, cidr_mask=24
                )
            ],
        )
        flow_logs = logs.LogGroup(self, "FlowLogs", retention=log_retention, removal_policy=removal_policy)
        self.vpc.add_flow_log(
            "FlowLog",
            destination=ec2.FlowLogDestination.to_cloud_watch_logs(flow_logs),
            traffic_type=ec2.FlowLogTrafficType.ALL,
        )
        self.s3_endpoint = self.vpc.add_gateway_endpoint(
            "S3",
            service=ec2.GatewayVpcEndpointAwsService.S3,
            subnets=[ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)],
        )
        # Adding a statement replaces the endpoint's default allow-all policy. The sandbox holds only a presigned
        # GET URL for its run's data.parquet; this keeps stolen credentials or other buckets unreachable anyway.
        self.s3_endpoint.add_to_policy(
            iam.PolicyStatement(
                principals=[iam.AnyPrincipal()],
                actions=["s3:GetObject"],
                resources=[bucket.arn_for_objects(f"{readable_prefix}*")],
            )
        )
        # The one write: a sandbox result too large for the state is PUT through the presigned URL the
        # investigate function made for exactly that attempt's result object (the state then carries its key).
        self.s3_endpoint.add_to_policy(
            iam.PolicyStatement(
                principals=[iam.AnyPrincipal()],
                actions=["s3:PutObject"],
                resources=[bucket.arn_for_objects(SANDBOX_RESULT_OBJECTS)],
            )
        )
        self.sandbox_sg = ec2.SecurityGroup(
            self,
            "SandboxSg",
            vpc=self.vpc,
            description="Sandbox Lambda: no inbound; HTTPS out, which only the S3 gateway endpoint can route",
            allow_all_outbound=False,
        )
        # Isolated subnets have no route to the internet; the S3 prefix-list id is regional and cannot be
        # resolved at synth without an AWS call, so egress is 443 to anywhere and the route table does the rest.
        self.sandbox_sg.add_egress_rule(ec2.Peer.any_ipv4(), ec2.Port.tcp(443), "S3 via the gateway endpoint")
        self._dns_firewall(bucket)

    def _dns_firewall(self, bucket: s3.IBucket) -> None:
        """Route 53 Resolver DNS Firewall on the VPC: the resolver answers only the bucket's regional name.

        The sandbox resolves exactly one name: the host of its presigned URLs, `<bucket>.s3.<region>.<suffix>`
        (virtual-hosted, regional: iterate.aws.clients). A gateway endpoint has no private DNS; the name resolves
        to S3's public addresses and the route table sends them through the endpoint. Every other query gets
        NXDOMAIN, so queries for names of one's choosing cannot carry data out through the resolver even if the
        OS sandbox were off. The allowed name's CNAME chain (S3's own names) is trusted, not matched again.
        """
        stack = Stack.of(self)
        self.dns_allowed_domain = Fn.join(".", [bucket.bucket_name, "s3", stack.region, stack.url_suffix])
        allowed = route53resolver.CfnFirewallDomainList(
            self, "DnsAllowedDomains", domains=[self.dns_allowed_domain]
        )
        every_domain = route53resolver.CfnFirewallDomainList(self, "DnsEveryDomain", domains=["*"])
        self.dns_rule_group = route53resolver.CfnFirewallRuleGroup(
            self,
            "DnsFirewall",
            firewall_rules=[
                route53resolver.CfnFirewallRuleGroup.FirewallRuleProperty(
                    priority=DNS_ALLOW_PRIORITY,
                    action="ALLOW",
                    firewall_domain_list_id=allowed.attr_id,
                    firewall_domain_redirection_action="TRUST_REDIRECTION_DOMAIN",
                ),
                route53resolver.CfnFirewallRuleGroup.FirewallRuleProperty(
                    priority=DNS_BLOCK_PRIORITY,
                    action="BLOCK",
                    block_response="NXDOMAIN",
                    firewall_domain_list_id=every_domain.attr_id,
                ),
            ],
        )
        route53resolver.CfnFirewallRuleGroupAssociation(
            self,
            "DnsFirewallAssociation",
            firewall_rule_group_id=self.dns_rule_group.attr_id,
            vpc_id=self.vpc.vpc_id,
            priority=DNS_FIREWALL_ASSOCIATION_PRIORITY,
        )
