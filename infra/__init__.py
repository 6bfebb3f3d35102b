"""The CDK app for Iterate: one stack composed of constructs per concern."""
