"""AWS adapters' plumbing: cached boto3 clients, observability, secrets, step payloads and step services."""
