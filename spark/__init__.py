"""Spark adapters for colmz: sessions, grouped UDFs, the sink and the ``colmz`` CLI."""
