"""What the SQL backends share: the loop that reads a delta history a statement at a time.

SQLite and PostgreSQL keep their own SQL (:mod:`.sqlite`, :mod:`.postgres`); what a chain's
end means (a seed, the history a run start remembered, or a gap to walk past), the order a
replay applies stored writes in, and the queries every SQL saver answers alike
(:class:`SqlBackend`) are decided here, once.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Sequence
from typing import Any, NamedTuple

from ..storage.tool_state import NOTHING_STORED
from .base import MAX_CHAIN, Backend, Link, _cursor_parts, missing_parent, parent_cycle
from .known import (
    TOOL_STATE,
    Known,
    caught_up,
    known_history,
    remember_history,
    remembers_run_starts,
)


class SqlBackend(Backend):
    """A backend over a SQL saver: a subclass runs its queries in :meth:`_rows` (its driver,
    its placeholders) and names the ones that find a namespace's newest checkpoint
    (``head_sql``: thread, namespace), a page of threads in id order (``threads_sql``: after,
    limit) and newest first (``recent_sql``: contains, the cursor's head three times, its
    thread, limit; ``''`` for none)."""

    head_sql: str
    threads_sql: str
    recent_sql: str
    link_sql: str
    """A namespace's links (thread, namespace), their first four columns those of :class:`Link`:
    a condition on ``checkpoint_id`` or an order is appended to it."""
    mark: str
    """The driver's placeholder."""

    async def _rows(self, sql: str, params: Sequence[Any]) -> list[Any]:
        raise NotImplementedError

    def _chain_read(self, thread_id: str, namespace: str, channel: str) -> ChainReader:
        """The backend's one-statement read of ``channel``'s chain in a namespace (see
        :func:`chained_history`): its SQL, its driver."""
        raise NotImplementedError

    async def _chained(
        self,
        thread_id: str,
        namespace: str,
        checkpoint_id: str | None,
        *,
        remember: bool,
        channel: str = TOOL_STATE,
    ) -> tuple[dict[str, Any], Link | None]:
        """:func:`chained_history` of ``channel`` at ``checkpoint_id`` (``None``: the head),
        with the backend's one-statement read (:meth:`_chain_read`)."""
        read = self._chain_read(thread_id, namespace, channel)
        return await chained_history(
            self.saver,
            thread_id,
            namespace,
            checkpoint_id,
            read,
            remember=remember,
            channel=channel,
        )

    async def delta_history(
        self,
        thread_id: str,
        namespace: str,
        checkpoint_id: str,
        *,
        remember: bool = False,
        channel: str = TOOL_STATE,
    ) -> dict[str, Any]:
        """``channel``'s delta history at a checkpoint (``tool_state``'s, or ``messages``'), in
        LangGraph's form (a ``DeltaChannelHistory``: the seed, and the writes after it, oldest
        first), read in one statement that stops at the nearest checkpoint that can hold the
        value whole, or at the checkpoint whose history a run start read last
        (:func:`known_history`), whose writes it then need not read again. ``remember``: keep
        this one as that (a run start)."""
        history, _ = await self._chained(
            thread_id, namespace, checkpoint_id, remember=remember, channel=channel
        )
        return history

    async def _delta_history(
        self, thread_id: str, namespace: str, checkpoint_id: str, channel: str = TOOL_STATE
    ) -> Any:
        # Every reader of a delta history (a rebuild, retention's seal, a walk) gets the
        # one-statement read, ``messages``' as ``tool_state``'s.
        return await self.delta_history(thread_id, namespace, checkpoint_id, channel=channel)

    async def run_start(self, thread_id: str, namespace: str) -> Link | None:
        """The head's link; on a saver whose run starts remember the history they read
        (:func:`remembers_run_starts`), read in the same statement as the history at the head,
        which is remembered: the run's own read at its start then needs no round trip."""
        if not remembers_run_starts(self.saver):
            return await self.link(thread_id, namespace)
        _, head = await self._chained(thread_id, namespace, None, remember=True)
        return head

    async def link(
        self, thread_id: str, namespace: str, checkpoint_id: str | None = None
    ) -> Link | None:
        if checkpoint_id is not None:
            return await self.parent_of(thread_id, namespace, checkpoint_id)
        # The head's link in one query, not the head's id and then its link: a run start asks
        # for it, and on PostgreSQL each query is a round trip.
        newest = " ORDER BY checkpoint_id DESC LIMIT 1"
        rows = await self._rows(self.link_sql + newest, (thread_id, namespace))
        return Link(*rows[0][:4]) if rows else None

    async def parent_of(self, thread_id: str, namespace: str, checkpoint_id: str) -> Link | None:
        chosen = f" AND checkpoint_id = {self.mark}"
        rows = await self._rows(self.link_sql + chosen, (thread_id, namespace, checkpoint_id))
        return Link(*rows[0][:4]) if rows else None

    async def head(self, thread_id: str, namespace: str) -> str | None:
        rows = await self._rows(self.head_sql, (thread_id, namespace))
        return rows[0][0] if rows else None

    async def threads(self, after: str | None, limit: int) -> list[tuple[str, str]]:
        rows = await self._rows(self.threads_sql, ("" if after is None else after, limit))
        return [(str(row[0]), str(row[1])) for row in rows]

    async def recent_threads(
        self, before: str | None, limit: int, contains: str | None = None
    ) -> list[tuple[str, str]]:
        head, thread = _cursor_parts(before)
        params = (contains or "", head, head, head, thread, limit)
        return [(str(row[0]), str(row[1])) for row in await self._rows(self.recent_sql, params)]


def pending_writes(
    rows: Sequence[Sequence[Any]],
    chain: Sequence[str],
    loads: Callable[[Any], Any],
    channel: str = TOOL_STATE,
) -> list[tuple[str, str, Any]]:
    """Stored write rows of ``chain`` (see :func:`in_applied_order`) as LangGraph's
    ``PendingWrite`` tuples of ``channel``, in the order a replay applies them."""
    return [(r[2], channel, loads((r[4], r[5]))) for r in in_applied_order(rows, chain)]


def writes_by_checkpoint(
    rows: Sequence[Sequence[Any]], checkpoint_ids: Sequence[str], loads: Callable[[Any], Any]
) -> dict[str, list[Any]]:
    """Stored write rows as :meth:`Backend.writes_of` answers: each checkpoint's values in
    the order its step applied them (every id present, with no writes or some)."""
    found: dict[str, list[Any]] = {checkpoint_id: [] for checkpoint_id in checkpoint_ids}
    for r in in_applied_order(rows, checkpoint_ids):
        found[r[0]].append(loads((r[4], r[5])))
    return found


def assembled(
    saver: Any,
    thread_id: str,
    namespace: str,
    checkpoint_id: str,
    *,
    known: Known | None,
    chain: Sequence[str],
    rows: Sequence[Sequence[Any]],
    seed: Any,
    remember: bool,
    counted: bool | None = None,
    channel: str = TOOL_STATE,
) -> dict[str, Any]:
    """``channel``'s delta history from what a backend's read found: the write ``rows`` at
    ``chain`` (the links above the checkpoint, newest first) on ``seed``; or, where the chain
    ended at the remembered checkpoint ``known`` (one that holds no seed itself), the
    remembered writes, then these, on its seed. ``remember``: keep it as the thread's (see
    :func:`known_history`), with ``counted``, whether the checkpoint holds a delta counter."""
    loads = saver.serde.loads_typed
    size = sum(len(row[5] or b"") for row in rows)
    if known is not None:  # the chain ended at it
        history = known.copied()
        history["writes"] += pending_writes(rows, chain, loads, channel)
        size += known.stored_bytes
    else:
        history = {"writes": pending_writes(rows, chain, loads, channel)}
        if seed is not NOTHING_STORED:
            history["seed"] = seed
    if remember:
        remember_history(
            saver,
            thread_id,
            namespace,
            checkpoint_id,
            history,
            size,
            counted=counted,
            channel=channel,
        )
    return history


class ChainRead(NamedTuple):
    """What one statement of a backend's delta-history read found (see :func:`chained_history`).

    ``links``: ``(checkpoint id, parent id, has a delta counter)`` of the parent chain it
    walked, the checkpoint it started at first, to the first without a counter (one that can
    hold ``tool_state`` whole) or the remembered one; ``writes``: the stored write rows of the
    links after the first; ``seed``: the value the last link stores, decoded only when asked
    (:data:`~mcp_state_versions.storage.tool_state.NOTHING_STORED` where it stores none); ``start``:
    the link of the checkpoint it started at, stamp and source included, where the read returns it
    (a read from the head does)."""

    links: Sequence[tuple[str, str | None, bool]]
    writes: Sequence[Sequence[Any]]
    seed: Callable[[], Any]
    start: Link | None = None


ChainReader = Callable[[str | None, str], Coroutine[Any, Any, ChainRead]]
"""``read(start, stop)``: a backend's one statement reading a chain from ``start`` (the head
when ``None``) up to ``stop`` (see :func:`chained_history`)."""


def start_link(rows: Sequence[Sequence[Any]]) -> Link | None:
    """The link of the checkpoint a backend's delta-history statement started at, from its row
    ``('h', id, parent, turn stamp, depth, source, …)``, which both SQL backends' statements
    return in that layout; ``None`` when the statement found no such checkpoint."""
    return next((Link(r[1], r[2], r[3], r[5]) for r in rows if r[0] == "h"), None)


async def chained_history(
    saver: Any,
    thread_id: str,
    namespace: str,
    checkpoint_id: str | None,
    read: ChainReader,
    *,
    remember: bool,
    channel: str = TOOL_STATE,
) -> tuple[dict[str, Any], Link | None]:
    """``channel``'s delta history at a checkpoint (``None``: the head), and the link of
    that checkpoint where the read returned it, from a backend's one-statement ``read``
    (``read(start, stop)``: the chain from ``start``, the head when ``None``, up to ``stop``,
    the checkpoint whose history a run start read last, or ``""``), read again from where a
    chain without a counter stored no value (a checkpoint written before the channel was); see
    :func:`assembled`. A namespace without checkpoints has no writes and nothing to remember.

    The database backends share this loop, so what a chain's end means (a seed, the known
    history, or a gap to walk past) is decided in one place; their SQL stays their own. A run
    start (``remember``) first extends the remembered history by what the saver stored since
    (:func:`~mcp_state_versions.backends.known.caught_up`): continuing the thread this process
    wrote, it then reads no writes, only the head's link where it starts from the head."""
    known = caught_up(saver, thread_id, namespace, checkpoint_id, channel) if remember else None
    known = known or known_history(saver, thread_id, namespace, channel)
    if known is not None and known.checkpoint_id == checkpoint_id:
        return known.copied(), None
    chain: list[str] = []
    rows: list[Sequence[Any]] = []
    seed: Any = NOTHING_STORED
    start: str | None = checkpoint_id
    stop = "" if known is None else known.checkpoint_id
    reached = False
    first: Link | None = None
    own_counter: bool | None = None  # whether the checkpoint itself holds a delta counter
    while start is not None or checkpoint_id is None:
        found = await read(start, stop)
        if not found.links:
            break
        if own_counter is None:
            own_counter = found.links[0][2]
        if checkpoint_id is None:  # read from the head: now it has an id
            checkpoint_id, first = found.links[0][0], found.start
            if known is not None and known.checkpoint_id == checkpoint_id:
                return known.copied(), first
        chain.extend(link[0] for link in found.links[1:])
        if len(chain) >= MAX_CHAIN:
            raise parent_cycle(thread_id, chain[-1])
        rows += found.writes
        (last, parent, counted), start = found.links[-1], None
        reached = last == stop and counted  # known, and no seed itself
        if len(found.links) > 1 and not reached:
            # it stopped at a checkpoint without a counter, or a missing parent
            stored = found.seed()
            if stored is not NOTHING_STORED:
                seed = stored
            elif not counted and parent is not None:
                start = last  # no value where one could be: keep walking
        if counted and parent is not None and seed is NOTHING_STORED and not (reached or remember):
            # A checkpoint held as writes whose parent is not in the thread (a prune seals the
            # oldest checkpoint it keeps, so this is no prune): the value cannot be rebuilt.
            raise missing_parent(thread_id, last, parent)
    if checkpoint_id is None:
        return {"writes": []}, None
    history = assembled(
        saver,
        thread_id,
        namespace,
        checkpoint_id,
        known=known if reached else None,
        chain=chain,
        rows=rows,
        seed=seed,
        remember=remember,
        counted=own_counter,
        channel=channel,
    )
    return history, first


def in_applied_order(rows: Sequence[Sequence[Any]], chain: Sequence[str]) -> list[Sequence[Any]]:
    """Stored write rows ``(checkpoint_id, task_path, task_id, idx, type, blob)`` of the
    checkpoints in ``chain`` (newest first), oldest checkpoint first and, within one, in the
    order its step applied them (LangGraph's ``writes_sort_key``): the order a replay needs."""
    from langgraph.checkpoint.base import writes_sort_key

    order = {checkpoint_id: position for position, checkpoint_id in enumerate(chain)}
    return sorted(rows, key=lambda r: (-order[r[0]], writes_sort_key(r[1] or "", r[2], r[3])))
