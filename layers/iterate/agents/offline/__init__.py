"""Offline agents: rule-based twins of the Claude agents, used with no key or when Claude fails."""
