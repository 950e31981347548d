"""Wording: every answer as the model that will act on it reads it, and values as lines.

:mod:`.answers` words each answer of a read (with what to do next); :mod:`.render` shapes
values into one-line summaries, paths and outlines, with credentials redacted. Nothing here
reads storage; it imports the state model and the walk's answers.
"""
