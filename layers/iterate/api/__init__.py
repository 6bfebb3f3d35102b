"""The REST API: request/response models, owner-scoped routes, and the exported OpenAPI document."""
