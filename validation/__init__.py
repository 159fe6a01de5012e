"""Checks a running kamaji-hami-lab against its Pulumi stack outputs.

Run it as ``python -m validation --help``.
"""
