"""The web face, one module per page (STYLE 10): fleet, server, probe run, probe now, server forms."""
