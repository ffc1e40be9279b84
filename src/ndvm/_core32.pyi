"""Stubs for the float32 core: the same API as ``ndvm._core`` (Real = float)."""

from ndvm._core import *  # noqa: F403
