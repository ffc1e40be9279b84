"""Shared test helpers (finite differences, ...)."""
