"""Backends: interchangeable evaluators behind one protocol (``base.Backend``)."""
