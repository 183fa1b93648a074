"""Checks of a production deployment (`check --deploy`)."""
