"""Adapters for crawl frameworks, one module each, named after its host framework.

They are outer shells: they call the Deduplicator and never hold dedup logic of their own.
"""
