"""Constructs per concern: storage, network, layers, functions, orchestration, triggers, api, monitoring."""
