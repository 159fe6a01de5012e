"""The lab's layers, one ComponentResource per module."""
