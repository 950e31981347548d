"""The walk: a thread's past in turns, read from its checkpoints along the branch being read.

:mod:`.history` is the contract (the ``ThreadHistory`` protocol and every answer a read can
give, the errors included), which the backends below it may import too. :mod:`.checkpoints`
answers it from any LangGraph saver; :mod:`.resolve` turns "this key, as of that turn" into
one answer for every reader; :mod:`.conversation` reads what was said in a turn;
:mod:`.threads` lists a saver's threads.

It imports the state model, storage and the backends; nothing above them.
"""
