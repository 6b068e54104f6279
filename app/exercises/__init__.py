"""Exercises done on the student's own laptop: a download, `blocktrace check`, a result the server checks."""
