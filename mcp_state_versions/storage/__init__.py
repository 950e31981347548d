"""How the library's two channels are stored: as each step's writes, with a whole snapshot now
and then.

``tool_state`` (:mod:`.tool_state`) and ``messages`` (:mod:`.messages`) are LangGraph
``DeltaChannel``\\ s (:mod:`.channels`): a checkpoint stores what a step changed, and a reader
rebuilds a value by replaying the writes after the nearest snapshot through the channel's
reducer. The snapshot cadence, the replay and its memory live here, once.

It imports only :mod:`mcp_state_versions.state`.
"""
