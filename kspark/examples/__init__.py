"""Bundled example applications."""
