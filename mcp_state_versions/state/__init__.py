"""The state model: what one ``tool_state`` entry is and how writes change it.

An entry's value, its count of versions and its bounded ring of earlier ones
(:mod:`.versions`), the turn clock kept beside the entries (:mod:`.clock`), the reducer that
merges a step's writes into them (:mod:`.reducer`), and the names a credential goes by, which
the reducer refuses to store (:mod:`.credentials`).

Everything here is a pure function of values: nothing reads storage, a saver or a graph, so
the reducer can be replayed anywhere and property-tested against itself. It imports no other
layer of the package.
"""
