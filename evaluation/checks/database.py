"""Checks of the database configuration."""
