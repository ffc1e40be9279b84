"""Evaluators: the reference tree-walking machine over the resolved IR."""
