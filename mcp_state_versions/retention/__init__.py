"""Retention: removing history a deployment no longer keeps, without changing what the history
it keeps answers.

:mod:`.prune` prunes one thread by turns (sealing the oldest checkpoint it keeps first) and
:mod:`.sweep` applies a policy to every thread of a saver. It imports the state model, storage,
the backends and the walk.
"""
