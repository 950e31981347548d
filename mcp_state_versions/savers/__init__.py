"""The library's savers: LangGraph's savers with pruning, fast run starts, and notes of what
they store.

One module a saver family (:mod:`.memory`, :mod:`.sqlite`, :mod:`.postgres`) over what they
share (:mod:`.base`), and the write hooks they run as they store: turn stamps settled from the
parent (:mod:`.stamps`) and refused concurrent resumes (:mod:`.resumes`). :mod:`.specs` opens
one from a short spec (``memory``, ``sqlite:PATH``, ``postgres:DSN``). A stock saver works
with every read of the library; these make it cheaper.

It imports the layers below it: the state model, storage, the backends, the walk's contract
and retention (a prune seals before it deletes).
"""
