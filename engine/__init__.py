"""The bundled DDTree speculative-decoding engine (DESIGN §7)."""

__version__ = "0.1.0"
