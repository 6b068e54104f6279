"""Lessons: loading lesson.md files, their markdown, the lesson checker and the lesson pages."""
