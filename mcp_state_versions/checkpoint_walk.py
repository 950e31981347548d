"""``CheckpointHistory``: a thread's past in turns, read from any LangGraph checkpointer.

This is the one place that knows what a checkpoint is. It answers the library's
:class:`~mcp_state_versions.history.ThreadHistory` questions from a ``BaseCheckpointSaver``
alone, so it can be built from the checkpointer a host already passes in, before any graph
exists.

Three facts about LangGraph checkpoint history decide how it reads:

* **Forks.** ``alist(thread)`` returns the checkpoints of *every* branch of a thread, ordered by
  time. After ``update_state`` on an older checkpoint, a rule such as "the newest checkpoint with
  N human messages" reads values from the branch the thread abandoned, and does so only on
  reload, when nobody is watching. This walk never looks at the list: it starts at the thread's
  head and follows ``parent_checkpoint_id`` links, which contain exactly the current branch.
* **Cost.** Every checkpoint carries the whole message list, so reading every checkpoint of a
  long thread is roughly quadratic in its turns. The walk first reads the *lineage* only (ids,
  parents and two metadata fields, no channel values) where the saver allows it: a direct query
  on SQLite and PostgreSQL, the in-memory saver's own storage otherwise. Human-message counts
  decrease monotonically along the chain, so the end of turn N is found by binary search,
  loading O(log n) checkpoints instead of n; when runs were started with
  :func:`mcp_state_versions.agent.run_turn`, the turn stamped in metadata usually makes it a
  single load. Any other saver is walked link by link from the head with ``aget_tuple``, which
  is correct and costs what it reads.
* **Retention.** A pruned thread's chain starts later than its first turn. Turns whose end lies
  on the remaining chain are retained; earlier ones are not. The walk reports that
  instead of guessing, so a reader can say "no longer retained" rather than answer from
  whatever is left.

A *turn* is the number of human messages in ``messages``; the end of turn N is the last
checkpoint on the chain holding at most N of them. A checkpoint written when a run starts holds
the new human message in the ``__start__`` channel, not yet in ``messages``, so it still counts
as the previous turn, which is what "end of the previous turn" means.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.checkpoint.memory import InMemorySaver

from .history import ThreadPresent, TurnIndex, TurnSnapshot
from .state import TURN_METADATA_KEY, StateEntry, count_turns

__all__ = ["CheckpointHistory"]


@dataclass(frozen=True, slots=True)
class _Link:
    """One checkpoint on a chain, without its values."""

    checkpoint_id: str
    parent_id: str | None
    stamped_turn: int | None
    source: str | None
    metadata_read: bool = True

    def turn_hint(self) -> int | None:
        """Human messages in this checkpoint as its metadata stamp implies, when stamped.

        A run's ``input`` checkpoint still holds the previous turn's messages; its ``loop``
        checkpoints hold the new one. Any other source (an update, a fork copy) is not trusted
        and is counted from its messages.
        """
        if self.stamped_turn is None or self.source not in ("input", "loop"):
            return None
        return self.stamped_turn - 1 if self.source == "input" else self.stamped_turn


class _Chain:
    """The head's ancestor chain, newest first, with human counts read as lazily as possible."""

    def __init__(self, history: CheckpointHistory, thread_id: str, links: list[_Link]) -> None:
        self._history = history
        self._thread_id = thread_id
        self.links = links
        self._turns: dict[int, int] = {}
        self._values: dict[int, Mapping[str, Any]] = {}
        self.loads = 0

    async def values(self, index: int) -> Mapping[str, Any]:
        if index not in self._values:
            found = await self._history._load(self._thread_id, self.links[index].checkpoint_id)
            self.loads += 1
            self._values[index] = found.checkpoint.get("channel_values", {}) if found else {}
            self._turns[index] = count_turns(self._values[index].get("messages"))
        return self._values[index]

    async def turn(self, index: int, *, trust_stamps: bool = True) -> int:
        if index in self._turns:
            return self._turns[index]
        if trust_stamps and not self.links[index].metadata_read:
            self.links[index] = await self._history._read_metadata(
                self._thread_id, self.links[index]
            )
        hint = self.links[index].turn_hint() if trust_stamps else None
        if hint is not None:
            return hint
        await self.values(index)
        return self._turns[index]

    async def end_of_turn(self, turn: int, *, trust_stamps: bool = True) -> int | None:
        """Index of the newest link holding at most ``turn`` human messages, if on the chain."""
        low, high = 0, len(self.links)
        while low < high:
            middle = (low + high) // 2
            if await self.turn(middle, trust_stamps=trust_stamps) <= turn:
                high = middle
            else:
                low = middle + 1
        return low if low < len(self.links) else None

    async def index(self) -> TurnIndex:
        if not self.links:
            return TurnIndex(total=0, retained=())
        total = await self.turn(0)
        # The oldest checkpoint left says where retention begins: a whole chain starts before
        # any human message; a pruned one starts inside the first turn it kept. (A parent link
        # to a deleted checkpoint is no signal: some savers clear it when they prune.)
        first = max(await self.turn(len(self.links) - 1), 1)
        return TurnIndex(total=total, retained=tuple(range(first, total + 1)))


class CheckpointHistory:
    """:class:`~mcp_state_versions.history.ThreadHistory` over a LangGraph checkpointer.

    Works with any ``BaseCheckpointSaver`` that implements the async API; reads the lineage
    directly (without channel values) from ``InMemorySaver``, ``AsyncSqliteSaver`` and
    ``AsyncPostgresSaver`` and their subclasses. Only the root namespace (the graph itself, not
    subgraphs) is read.
    """

    def __init__(self, saver: BaseCheckpointSaver) -> None:
        self.saver = saver

    async def present(self, thread_id: str) -> ThreadPresent | None:
        """The thread's head: its ``tool_state`` and turn count (``None``: no such thread).

        This is what a reader outside the agent (the HTTP API, the command line) starts from,
        as the ``inspect_state`` tool starts from its runtime state.
        """
        head = await self._load(thread_id, None)
        if head is None:
            return None
        values = head.checkpoint.get("channel_values", {})
        return ThreadPresent(
            tool_state=values.get("tool_state") or {}, turn=count_turns(values.get("messages"))
        )

    async def turns(self, thread_id: str) -> TurnIndex:
        chain = await self._chain(thread_id)
        return await chain.index()

    async def tool_state_at(self, thread_id: str, turn: int) -> TurnSnapshot:
        chain = await self._chain(thread_id)
        index = await chain.index()
        if turn < 1 or turn > index.total:
            return TurnSnapshot(turn=turn, index=index, tool_state=None)
        position = await chain.end_of_turn(turn)
        if position is not None and await self._stamps_misled(chain, position, turn):
            position = await chain.end_of_turn(turn, trust_stamps=False)
        if position is None:
            return TurnSnapshot(turn=turn, index=index, tool_state=None)
        values = await chain.values(position)
        tool_state: Mapping[str, StateEntry] = values.get("tool_state") or {}
        return TurnSnapshot(turn=turn, index=index, tool_state=tool_state)

    async def _stamps_misled(self, chain: _Chain, position: int, turn: int) -> bool:
        """Check a stamp-guided answer against the checkpoint's own messages.

        Stamps are a hint written by the runner; messages are the definition. A position is
        right when it holds at most ``turn`` human messages and its newer neighbour more.
        """
        if await chain.turn(position, trust_stamps=False) > turn:
            return True
        return position > 0 and await chain.turn(position - 1, trust_stamps=False) <= turn

    async def branch_checkpoint_ids(self, thread_id: str) -> list[str]:
        """The checkpoints of the thread's current branch, newest (the head) first."""
        return [link.checkpoint_id for link in (await self._chain(thread_id)).links]

    async def checkpoint_ids(self, thread_id: str) -> list[str]:
        """Every root-namespace checkpoint of the thread, on any branch, in no set order."""
        rows = await _scan(self.saver, thread_id)
        if rows is not None:
            return [row.checkpoint_id for row in rows]
        config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        return [
            found.config["configurable"]["checkpoint_id"]
            async for found in self.saver.alist(config)
        ]

    # -- lineage ------------------------------------------------------------------------------

    async def _chain(self, thread_id: str) -> _Chain:
        links = await self._lineage(thread_id)
        if links is None:
            links = await self._walk_links(thread_id)
        return _Chain(self, thread_id, links)

    async def _lineage(self, thread_id: str) -> list[_Link] | None:
        """The head's chain from a values-free scan, or ``None`` where the saver has no scan."""
        rows = await _scan(self.saver, thread_id)
        if rows is None:
            return None
        if not rows:
            return []
        by_id = {row.checkpoint_id: row for row in rows}
        chain = []
        link: _Link | None = by_id[max(by_id)]
        while link is not None:
            chain.append(link)
            link = by_id.get(link.parent_id) if link.parent_id else None
        return chain

    async def _walk_links(self, thread_id: str) -> list[_Link]:
        """Any saver: follow parents from the head with ``aget_tuple`` (loads each link)."""
        chain = []
        found = await self._load(thread_id, None)
        while found is not None:
            configurable = found.config["configurable"]
            parent = (found.parent_config or {}).get("configurable", {}).get("checkpoint_id")
            metadata = found.metadata or {}
            chain.append(
                _Link(
                    configurable["checkpoint_id"],
                    parent,
                    _as_int(metadata.get(TURN_METADATA_KEY)),
                    metadata.get("source"),
                )
            )
            found = await self._load(thread_id, parent) if parent else None
        return chain

    async def _read_metadata(self, thread_id: str, link: _Link) -> _Link:
        """Read a stamp the lineage scan left out (SQLite: see ``_scan_sqlite``)."""
        stamp, source = await _sqlite_stamp(self.saver, thread_id, link.checkpoint_id)
        return _Link(link.checkpoint_id, link.parent_id, stamp, source)

    async def _load(self, thread_id: str, checkpoint_id: str | None) -> CheckpointTuple | None:
        configurable: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ""}
        if checkpoint_id is not None:
            configurable["checkpoint_id"] = checkpoint_id
        return await self.saver.aget_tuple({"configurable": configurable})


def _as_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


async def _scan(saver: BaseCheckpointSaver, thread_id: str) -> list[_Link] | None:
    if isinstance(saver, InMemorySaver):
        return _scan_memory(saver, thread_id)
    try:
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
    except ImportError:  # pragma: no cover - a hard dependency, but keep the seam honest
        AsyncSqliteSaver = None  # type: ignore[assignment,misc]
    if AsyncSqliteSaver is not None and isinstance(saver, AsyncSqliteSaver):
        return await _scan_sqlite(saver, thread_id)
    try:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    except ImportError:
        return None
    if isinstance(saver, AsyncPostgresSaver):
        return await _scan_postgres(saver, thread_id)
    return None


def _scan_memory(saver: InMemorySaver, thread_id: str) -> list[_Link]:
    stored = saver.storage.get(thread_id, {}).get("", {})
    links = []
    for checkpoint_id, (_, metadata, parent_id) in list(stored.items()):
        meta = saver.serde.loads_typed(metadata) if metadata else {}
        links.append(
            _Link(
                checkpoint_id, parent_id, _as_int(meta.get(TURN_METADATA_KEY)), meta.get("source")
            )
        )
    return links


async def _scan_sqlite(saver: Any, thread_id: str) -> list[_Link]:
    """Ids and parents only. SQLite stores ``metadata`` after the whole serialized checkpoint in
    each row, so reading it means reading the row's overflow pages: for every row that is most
    of a long thread's file. Stamps are read per link instead, for the few the search visits."""
    await saver.setup()
    query = (
        "SELECT checkpoint_id, parent_checkpoint_id FROM checkpoints "
        "WHERE thread_id = ? AND checkpoint_ns = ''"
    )
    async with saver.lock, saver.conn.execute(query, (thread_id,)) as cursor:
        rows = await cursor.fetchall()
    return [_Link(row[0], row[1], None, None, metadata_read=False) for row in rows]


async def _sqlite_stamp(saver: Any, thread_id: str, checkpoint_id: str) -> tuple[int | None, Any]:
    query = (
        f"SELECT json_extract(CAST(metadata AS TEXT), '$.{TURN_METADATA_KEY}'), "
        "json_extract(CAST(metadata AS TEXT), '$.source') FROM checkpoints "
        "WHERE thread_id = ? AND checkpoint_ns = '' AND checkpoint_id = ?"
    )
    async with saver.lock, saver.conn.execute(query, (thread_id, checkpoint_id)) as cursor:
        row = await cursor.fetchone()
    return (_as_int(row[0]), row[1]) if row else (None, None)


async def _scan_postgres(saver: Any, thread_id: str) -> list[_Link]:
    query = (
        "SELECT checkpoint_id, parent_checkpoint_id, "
        f"metadata -> '{TURN_METADATA_KEY}' AS turn, metadata ->> 'source' AS source "
        "FROM checkpoints WHERE thread_id = %s AND checkpoint_ns = ''"
    )
    async with saver._cursor() as cursor:
        await cursor.execute(query, (thread_id,))
        rows = await cursor.fetchall()
    return [
        _Link(
            row["checkpoint_id"], row["parent_checkpoint_id"], _as_int(row["turn"]), row["source"]
        )
        for row in rows
    ]
