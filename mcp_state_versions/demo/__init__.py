"""The demo: a rewritten-key conversation run through the real agent loop (:mod:`.run`), a
chat model that follows a script (:mod:`.scripted`), and a tiny gazetteer MCP server
(:mod:`.gazetteer`). Nothing in the library imports it; the CLI runs it.
"""
