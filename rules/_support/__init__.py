"""Helpers shared by the bundled rules (not rules themselves)."""
