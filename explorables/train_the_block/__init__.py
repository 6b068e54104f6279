"""Explorable "train-the-block" (in progress): race two floors on a tiny task. So far its runner only: races
train in worker processes (runner.py)."""
