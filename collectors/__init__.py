"""Monitoring data and the work on it: servers, probe runs, scrapes, Celery tasks, retention."""
