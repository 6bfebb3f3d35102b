"""Iterate: the data-quality engine shared by the CLI and every Lambda function."""

__version__ = "0.1.0"
