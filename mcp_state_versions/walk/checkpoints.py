"""``CheckpointHistory``: a thread's past in turns, read from any LangGraph checkpointer.

This is the one place that knows what a checkpoint is. It answers the library's
:class:`~mcp_state_versions.walk.history.ThreadHistory` questions from a ``BaseCheckpointSaver``
alone, so it can be built from the checkpointer a host already passes in, before any graph
exists.

Three facts about LangGraph checkpoint history decide how it reads:

* **Forks.** ``alist(thread)`` returns the checkpoints of *every* branch of a thread, ordered by
  time. After ``update_state`` on an older checkpoint, a rule such as "the newest checkpoint with
  N human messages" reads values from the branch the thread abandoned, and does so only on
  reload, when nobody is watching. This walk never looks at the list: it starts at the thread's
  head and follows ``parent_checkpoint_id`` links, which contain exactly the current branch.
* **Cost.** Every checkpoint carries the whole message list, so reading every checkpoint of a
  long thread is roughly quadratic in its turns. The walk reads the *lineage* only (ids,
  parents and the turn stamp, no channel values) and then single ``tool_state`` channels, never
  a message list (:mod:`mcp_state_versions.backends` has one module per saver family doing
  that). Clock positions rise monotonically along the chain, so the end of turn N is found by
  binary search, reading O(log n) ``tool_state`` channels; when runs were started with
  :func:`mcp_state_versions.agent.build.run_turn`, the turn stamped in metadata steers the search
  and it reads one (two when a neighbour must confirm it). A saver the backends do not know is
  walked link by link from the head with ``aget_tuple``, which is correct and costs what it
  reads.
* **Storage.** ``tool_state`` is stored as writes with snapshots
  (:mod:`mcp_state_versions.storage.tool_state`), so a checkpoint's value is rebuilt: from the
  nearest whole value on its own parent chain and the writes after it (the backends do that), or,
  for a probe near one already rebuilt in the same read, from that one and the writes between.
  Either way only the checkpoint's own lineage contributes, never a branch a fork left.
* **Retention.** A pruned thread's chain starts later than its first turn. Turns whose end lies
  on the remaining chain are retained; earlier ones are not. The walk reports that
  instead of guessing, so a reader can say "no longer retained" rather than answer from
  whatever is left.

A checkpoint's turn is the turn clock in its ``tool_state`` (:mod:`mcp_state_versions.state.clock`):
turn N while N runs, "N, ended" once it has. The end of turn N is the last checkpoint on the
chain whose clock is at most N and still open, so an operator's edit saved after turn N ended
is never read as part of it. Checkpoints of threads written before the clock existed carry
none; for those the turn is their count of human messages (the documented fallback). Either
way the order along the chain is monotone, which is what the binary search needs.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from operator import itemgetter
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from ..backends import (
    COUNTER,
    ID,
    MAX_CHAIN,
    PARENT,
    SOURCE,
    STAMP,
    UNREAD,
    Backend,
    LinkRow,
    NeedsAsync,
    backend_for,
    missing_parent,
    parent_cycle,
    refused,
    stamp_turn,
    unreachable,
)
from ..state.clock import (
    POSITIONS_PER_TURN,
    clock_of,
    current_turn,
    end_of_turn,
    marked_index,
    past_end,
    position,
    turn_at,
    turn_of_tool_state,
)
from ..state.reducer import StateEntry, is_entry, stored_state_problem
from ..storage.tool_state import NOTHING_STORED, replay, stored_value
from .history import (
    DamagedState,
    HasEndedToolState,
    HasTurnStates,
    HasVersionEnd,
    HistoryError,
    StoreUnavailable,
    ThreadPresent,
    TurnIndex,
    TurnMessages,
    TurnSnapshot,
    gallop,
)

__all__ = ["CheckpointHistory", "history_for_run"]

_RUN_CHECKPOINTER = "__pregel_checkpointer"
"""Where LangGraph puts the checkpointer of a run into each task's ``configurable``: whichever
saver compiled, copied in (``graph.copy``) or attached (the Agent Server) is the one here."""
_RUN_DURABILITY = "__pregel_durability"
"""A task config's durability mode (absent: ``"async"``). The checkpoint a run named to
continue (a fork, time travel) is in the task config's ``metadata``, where LangGraph copies
the run's configurable for tracing."""


def _hint(link: LinkRow) -> int | None:
    """A checkpoint's clock position as its metadata stamp implies, when stamped.

    A run's ``input`` checkpoint still holds the end of the previous turn; its ``loop``
    checkpoints are in the stamped turn. Any other source (an update, a fork copy) is not
    trusted and is read. A hint only steers the search; the answer is confirmed against the
    clocks it lands on.
    """
    source = link[SOURCE]
    if source != "loop" and source != "input":
        return None
    stamp = stamp_turn(link[STAMP])
    if stamp is None:
        return None
    return end_of_turn(stamp - 1) if source == "input" else POSITIONS_PER_TURN * stamp


_NONE: Any = object()

_START_PAUSES = (0.001, 0.004, 0.015, 0.03, 0.05, 0.1, 0.2, 0.3, 0.3)
"""How long a read waits, a pause at a time, for its run's own checkpoint to be stored: about
a second in all (see :meth:`CheckpointHistory._read_chain`)."""

_INCREMENTAL_LINKS = 12
"""How far a state already rebuilt may be from the one asked for to be carried forward by the
writes between them rather than rebuilt from the snapshot."""

_WRITES_AHEAD = 8
"""Newer links whose writes come with a read of a stretch's, about two turns' worth (a turn
makes four or five checkpoints): a read probes around the turn it asks for (the end of the
turn, then the next turn's to confirm it), and each probe's writes would otherwise be a query
of their own."""


class _Chain:
    """The head's ancestor chain, newest first, with positions read as lazily as possible."""

    def __init__(
        self, history: CheckpointHistory, thread_id: str, links: Sequence[LinkRow]
    ) -> None:
        self._backend = history.backend
        self._namespace = history.namespace
        self._thread_id = thread_id
        self.links = list(links)
        self._positions: dict[int, int] = {}
        self._states: dict[int, Any] = {}
        self._stored: dict[int, Any] = {}  # what a link stores for tool_state, once read
        self._written: dict[str, list[Any]] = {}  # each checkpoint's writes, once read
        #: ``tool_state`` channels read (and full loads, for threads older than the clock).
        self.loads = 0

    async def tool_state(self, index: int) -> Any:
        if index not in self._states:
            with reading(self._thread_id):
                value, checked = await self._from_older(index)
                if value is _NONE:
                    value = await self._from_seed(index)
                if value is _NONE:
                    _, value = await self._backend.tool_state(
                        self._thread_id, self._namespace, self.links[index][ID]
                    )
            problem = stored_state_problem(value, checked)
            if problem is not None:
                raise DamagedState(self._thread_id, None, problem)
            self.loads += 1
            self._states[index] = value
        return self._states[index]

    async def _from_older(self, index: int) -> tuple[Any, Mapping[str, Any] | None]:
        """``tool_state`` at ``index`` from a state already read at an older link nearby and
        the writes stored between them, when there is one (else ``_NONE``): a read's probes
        cluster around the turn asked, and this saves each of them a replay from the snapshot.
        With it comes the state it was carried from when that one was already checked, so
        only what the writes changed needs checking (``None``: check it all).

        A link in between that stores a whole value starts the stretch instead: LangGraph
        stores one at a fork's first checkpoint, exactly because the writes stored at the
        checkpoint it forked from may belong to the branch it left.
        """
        older = [k for k in self._states if index < k <= index + _INCREMENTAL_LINKS]
        if not older:
            return _NONE, None
        base = min(older)
        state = self._states[base]
        for between in range(base - 1, index - 1, -1):
            if self._holds_no_value(between):
                continue
            stored = await self._stored_at(between)
            if stored is not None and stored is not NOTHING_STORED:
                base, state = between, stored_value(stored)
        if not isinstance(state, Mapping):
            return _NONE, None
        checked = state if base in self._states else None  # a value stored between: unchecked
        if base == index:
            return state, checked
        return await self._carried(state, index, base), checked

    def _holds_no_value(self, index: int) -> bool:
        """Whether the lineage says the link cannot store ``tool_state`` whole: it has a delta
        counter (see :data:`~mcp_state_versions.backends.COUNTER`)."""
        link = self.links[index]
        return len(link) > COUNTER and link[COUNTER] is not None

    async def _stored_at(self, index: int) -> Any:
        """What link ``index`` stores for ``tool_state`` (see :meth:`~mcp_state_versions.
        backends.Backend.stored_tool_state`), read once per chain."""
        if index not in self._stored:
            _, self._stored[index] = await self._backend.stored_tool_state(
                self._thread_id, self._namespace, self.links[index][ID]
            )
        return self._stored[index]

    async def _carried(self, state: Any, index: int, base: int) -> Any:
        """``state`` at link ``base`` carried to link ``index`` by the writes stored between.

        Each checkpoint's writes are read once per chain, and the few newer links' come with
        the first read (:data:`_WRITES_AHEAD`), so the probes of one read cost one query of
        writes, as a hand-written read would."""
        stretch = [link[ID] for link in self.links[index + 1 : base + 1]]
        if any(checkpoint_id not in self._written for checkpoint_id in stretch):
            ahead = self.links[max(0, index + 1 - _WRITES_AHEAD) : index + 1]
            wanted = [
                checkpoint_id
                for checkpoint_id in [link[ID] for link in ahead] + stretch
                if checkpoint_id not in self._written
            ]
            self._written.update(
                await self._backend.writes_of(self._thread_id, self._namespace, wanted)
            )
        # oldest checkpoint first: its writes made its child, the next one in the stretch
        written = self._written
        updates = [write for checkpoint_id in reversed(stretch) for write in written[checkpoint_id]]
        return replay(state, updates, self._backend.reducer) if updates else state

    async def _from_seed(self, index: int) -> Any:
        """``tool_state`` at ``index`` rebuilt from the lineage already read: the nearest link
        from it on that can store a whole value (no delta counter), that value, and the writes
        after it, in two reads. A chain that reaches the thread's first checkpoint without one
        (no snapshot taken yet) starts from nothing: the first checkpoint holds no value, and
        every write made since is stored on the chain, read in one. ``_NONE`` where the
        lineage carries no counters, or the chain holds no value where it should (the backend's
        own rebuild answers then)."""
        links = self.links
        if len(links[index]) <= COUNTER:  # rows without counters (a backend that reads none)
            return _NONE
        for seed in range(index, len(links)):
            if self._holds_no_value(seed):
                continue
            stored = await self._stored_at(seed)
            if stored is NOTHING_STORED:
                continue  # no counter and no value either: keep looking further back
            base = {} if stored is None else stored_value(stored)
            if seed == index:
                return None if stored is None else base
            return await self._carried(base, index, seed)
        if links[-1][PARENT] is None and self._holds_no_value(len(links) - 1):
            # The thread's first checkpoint: nothing before it, so nothing in it but the
            # writes stored at it (which apply after it). No write on the way: never written.
            oldest = len(links) - 1
            if index == oldest:
                return None
            carried = await self._carried({}, index, oldest)
            return carried or None
        return _NONE

    async def position(self, index: int, *, trust_stamps: bool = True) -> int:
        """Where checkpoint ``index`` stands on the clock (:func:`~mcp_state_versions.state.clock.
        position`); a trusted stamp stands in for it without reading anything."""
        if index in self._positions:
            return self._positions[index]
        if trust_stamps:
            if self.links[index][SOURCE] is UNREAD:
                self.links[index] = await self._backend.stamp(
                    self._thread_id, self._namespace, self.links[index]
                )
            hint = _hint(self.links[index])
            if hint is not None:
                return hint
        try:
            tool_state = await self.tool_state(index)
        except DamagedState:
            # A damaged checkpoint must not make every other turn unreadable: where its run
            # stamped it, the stamp places it, and a read that needs its value reports it.
            hint = _hint(self.links[index]) if self.links[index][SOURCE] is not UNREAD else None
            if hint is None:
                raise
            return hint
        if turn_of_tool_state(tool_state) is not None:
            found = position({"tool_state": tool_state})
        else:  # no clock in this checkpoint: count its human messages (the fallback)
            values = await self._backend.values(
                self._thread_id, self._namespace, self.links[index][ID]
            )
            self.loads += 1
            found = position(values or {})
        self._positions[index] = found
        return found

    async def end_of_turn(self, turn: int, *, trust_stamps: bool = True) -> int | None:
        """Index of the newest link at or below the end of ``turn``, if on the chain."""
        low, high = 0, len(self.links)
        while low < high:
            middle = (low + high) // 2
            if await self.position(middle, trust_stamps=trust_stamps) <= end_of_turn(turn):
                high = middle
            else:
                low = middle + 1
        return low if low < len(self.links) else None

    async def state_at_end_of(
        self, turn: int, *, newer_only: bool = False
    ) -> Mapping[str, StateEntry] | None:
        """``tool_state`` as ``turn`` ended, ``None`` when the chain does not reach that far
        back (not retained); damage on the way is reported as that turn's.

        With ``newer_only``, also ``None`` when the turn's end is the head: a newer checkpoint
        is what shows, by its clock, that the turn ended, so the head's own clock need not be
        read to count the thread's turns (see :meth:`CheckpointHistory.ended_tool_state`).
        """
        try:
            found = await self.end_of_turn_confirmed(turn)
            if found is None or (newer_only and found == 0):
                return None
            return await self.tool_state(found) or {}
        except DamagedState as damaged:
            raise DamagedState(self._thread_id, turn, damaged.detail) from damaged.__cause__

    async def end_of_turn_confirmed(self, turn: int) -> int | None:
        """:meth:`end_of_turn` steered by the stamps, searched again by the clocks alone when
        the clocks do not confirm where the stamps led (a stamp is only a caller's word)."""
        found = await self.end_of_turn(turn)
        if found is not None and not await self.confirmed(found, turn):
            found = await self.end_of_turn(turn, trust_stamps=False)
        return found

    async def confirmed(self, index: int, turn: int) -> bool:
        """Whether ``index`` really is the end of ``turn``, by the clocks, not the stamps.

        It is when its clock says turn N ended there with nothing written since, or when its
        clock is at most N and its newer neighbour's is past the end of N.
        """
        found = await self.position(index, trust_stamps=False)
        if found > end_of_turn(turn):
            return False
        if found == end_of_turn(turn):
            return True
        return index == 0 or await self.position(index - 1, trust_stamps=False) > end_of_turn(turn)

    async def index(self, *, planned: bool = False) -> TurnIndex:
        """The chain's turn index. ``planned``: the chain a prune would leave, whose oldest
        link it seals before it deletes the rest (not yet sealed, so not read as damage)."""
        if not self.links:
            return TurnIndex(total=0, retained=range(1, 1))
        # The head's own clock, not its stamp: metadata is whatever a caller passed, and a
        # wrong stamp on the head must not change how many turns the thread has had. (The
        # read is one ``tool_state``, and the one a recent turn's answer reads anyway.)
        total = turn_at(await self.position(0, trust_stamps=False))
        # The oldest checkpoint left says where retention begins: a whole chain starts before
        # any turn; a pruned one starts inside the first turn it kept, or just after the turn
        # before it ended. (A parent link to a deleted checkpoint is no signal: some savers
        # clear it when they prune.) By its clock too: a first run started with another
        # turn's stamp must not make the turns before it look pruned. The oldest link is the
        # thread's empty start, or a checkpoint retention left a snapshot on: cheap to read.
        last = len(self.links) - 1
        if (
            not planned
            and self.links[last][PARENT] is not None
            and self._holds_no_value(last)
            and await self._stored_at(last) is NOTHING_STORED  # (a snapshot at its version)
        ):
            # Held as writes since a snapshot its chain no longer reaches: no prune (a prune
            # seals the oldest checkpoint it keeps), but a parent link into another thread or
            # a row deleted by hand. Turns before it would read as pruned; they are damaged.
            raise missing_parent(
                self._thread_id, str(self.links[last][ID]), str(self.links[last][PARENT])
            )
        oldest = await self.position(last, trust_stamps=False)
        first = max(turn_at(oldest) + past_end(oldest), 1)
        return TurnIndex(total=total, retained=range(first, total + 1))


class CheckpointHistory(HasEndedToolState, HasVersionEnd, HasTurnStates):
    """:class:`~mcp_state_versions.walk.history.ThreadHistory` over a LangGraph checkpointer.

    Works with any ``BaseCheckpointSaver``; reads the lineage and single channels directly from
    ``InMemorySaver``, the SQLite savers and the PostgreSQL savers and their subclasses
    (:mod:`mcp_state_versions.backends`). ``namespace`` selects a persistent subgraph's history
    (``""``: the graph itself). ``checkpoint_id`` reads the branch that ends at that checkpoint
    instead of at the thread's head: what a run reads, since the newest checkpoint of a thread
    may be another run's (two runs at once on one thread, or a fork running beside the head).
    With ``sync=True`` it reads through the saver's synchronous API and its coroutines never
    suspend: a synchronous caller runs them with
    :func:`mcp_state_versions.backends.run_sync` (that is how ``inspect_state`` answers under
    ``graph.invoke``).
    """

    def __init__(
        self,
        saver: BaseCheckpointSaver,
        *,
        namespace: str = "",
        sync: bool = False,
        checkpoint_id: str | None = None,
    ) -> None:
        self.saver = saver
        self.namespace = namespace
        self.sync = sync
        #: Where the branch read ends: ``None`` for the thread's head, else a checkpoint id.
        self.checkpoint_id = checkpoint_id
        #: Whether ``checkpoint_id`` is stored while a run reads (``False`` under
        #: ``durability="exit"``, which stores nothing until the run ends: never waited for).
        self.start_stored = True
        #: The stored checkpoint a run continues, when it named one (a fork or time travel):
        #: where its branch ends while its own checkpoint is not stored.
        self.continues: str | None = None
        self.backend: Backend = backend_for(saver, sync=sync)
        self._last_chain: tuple[str, _Chain] | None = None

    async def present(self, thread_id: str, *, damage_ok: bool = False) -> ThreadPresent | None:
        """The thread's head (or ``checkpoint_id``): its ``tool_state`` and turn (``None``: no
        such thread, or no such checkpoint).

        A head that cannot be read raises :class:`~mcp_state_versions.walk.history.DamagedState`;
        with ``damage_ok=True`` it is returned as a present that carries the damage instead
        (see :attr:`~mcp_state_versions.walk.history.ThreadPresent.damage`), so that a read of an
        earlier turn can still be answered from history.

        This is what a reader outside the agent (the HTTP API, the command line) starts from,
        as the ``inspect_state`` tool starts from its runtime state.
        """
        try:
            return await self._present(thread_id)
        except DamagedState as damage:
            if not damage_ok:
                raise
            return await self._damaged_present(thread_id, damage)

    async def _present(self, thread_id: str) -> ThreadPresent | None:
        with reading(thread_id):
            head = self.checkpoint_id or await self.backend.head(thread_id, self.namespace)
            if head is None:
                return None
            found, tool_state = await self.backend.tool_state(thread_id, self.namespace, head)
            if not found:
                return None  # a checkpoint_id the thread does not have
            values: Mapping[str, Any] = {"tool_state": tool_state}
            if turn_of_tool_state(tool_state) is None:
                values = await self.backend.values(thread_id, self.namespace, head) or {}
        tool_state = values.get("tool_state")
        problem = stored_state_problem(tool_state)
        if problem is not None:
            raise DamagedState(thread_id, None, problem)
        return ThreadPresent(tool_state=tool_state or {}, turn=current_turn(values))

    async def _damaged_present(self, thread_id: str, damage: DamagedState) -> ThreadPresent:
        try:
            index = await self.turns(thread_id)
        except DamagedState:
            raise damage from None
        return ThreadPresent(tool_state={}, turn=index.total, damage=damage)

    async def turns(self, thread_id: str) -> TurnIndex:
        chain = await self._chain(thread_id)
        return await chain.index()

    async def tool_state_at(self, thread_id: str, turn: int) -> TurnSnapshot:
        chain = await self._chain(thread_id)
        # Kept for the version_end that may follow in the same resolution, which then reads
        # neither the lineage nor any tool_state already read again. Taken once.
        self._last_chain = (thread_id, chain)
        index = await chain.index()
        if turn < 1 or turn > index.total:
            return TurnSnapshot(turn=turn, index=index, tool_state=None)
        return TurnSnapshot(turn=turn, index=index, tool_state=await chain.state_at_end_of(turn))

    async def ended_tool_state(self, thread_id: str, turn: int) -> Mapping[str, StateEntry] | None:
        """``tool_state`` as ``turn`` ended, when a newer checkpoint on the branch shows that it
        did; ``None`` otherwise (the turn's end is the head, or not on the branch, or the turn
        never happened), and :meth:`tool_state_at` then tells which.

        This is :meth:`tool_state_at` without the thread's turn count, which costs a rebuild
        of the head's ``tool_state`` (its clock is part of it): about as much as the rest of a
        read of an older turn on a thread of a hundred turns. A turn whose end has a newer
        checkpoint after it, by the clocks (:meth:`_Chain.end_of_turn_confirmed`), ended, so
        it is within the count whatever the count is, and the answer is the one
        :meth:`tool_state_at` gives. :func:`~mcp_state_versions.walk.resolve.resolve_turn` asks
        this first.
        """
        chain = await self._chain(thread_id)
        self._last_chain = (thread_id, chain)  # for version_end, as in tool_state_at
        if turn < 1:
            return None
        return await chain.state_at_end_of(turn, newer_only=True)

    async def version_end(
        self, thread_id: str, key: str, since: int, turn: int, last_possible: int
    ) -> int | None:
        """The last turn whose end still held ``key``'s version begun in ``since``, known to
        hold at ``turn``; searched on one read of the lineage (see
        :func:`mcp_state_versions.walk.history.gallop`). ``None`` when history no longer tells."""
        last, self._last_chain = self._last_chain, None
        chain = last[1] if last is not None and last[0] == thread_id else None
        if chain is None:
            chain = await self._chain(thread_id)

        async def holds(probe: int) -> bool | None:
            found = await chain.end_of_turn_confirmed(probe)
            if found is None:
                return None
            entry = (await chain.tool_state(found) or {}).get(key)
            return is_entry(entry) and entry["since"] == since

        return await gallop(holds, turn, last_possible)

    async def turn_states(
        self, thread_id: str
    ) -> tuple[TurnIndex, AsyncIterator[tuple[int, Mapping[str, StateEntry] | None]]]:
        """The thread's turn index, and ``tool_state`` as each retained turn ended, oldest
        first, all on one read of the lineage: each turn's state is carried from the one
        before it by the writes stored between, so a thread's whole timeline costs its writes
        once, not a rebuild a turn."""
        chain = await self._chain(thread_id)
        index = await chain.index()

        async def states() -> AsyncIterator[tuple[int, Mapping[str, StateEntry] | None]]:
            for turn in index.retained:
                yield turn, await chain.state_at_end_of(turn)

        return index, states()

    async def turn_messages(self, thread_id: str, turn: int) -> TurnMessages:
        """The thread's messages at the checkpoint where the clock closed ``turn`` on this
        branch, with the clock record there and the turn index, on one read of the lineage
        (see :class:`~mcp_state_versions.walk.history.TurnMessages`)."""
        chain = await self._chain(thread_id)
        index = await chain.index()
        found = await chain.end_of_turn_confirmed(turn) if turn in index.retained else None
        if found is None:
            return TurnMessages(turn, index, None)
        messages = await self._messages_at(thread_id, chain, found)
        record = clock_of(await chain.tool_state(found))
        opening = None if record is None else record.get("message")
        if opening is not None and marked_index(messages, opening) is None:
            # Gone by the turn's end (a summary or trim in the turn): the turn's own
            # checkpoints before it still hold its opening message and what followed.
            earlier = await self._opened_with(thread_id, chain, found, turn, opening)
            held = {message.id for message in earlier}
            messages = [*earlier, *(m for m in messages if m.id not in held)]
        return TurnMessages(turn, index, messages, record)

    async def _messages_at(self, thread_id: str, chain: _Chain, index: int) -> list[Any]:
        values = await self.backend.values(thread_id, self.namespace, chain.links[index][ID])
        return list((values or {}).get("messages") or [])

    async def _opened_with(
        self, thread_id: str, chain: _Chain, end: int, turn: int, opening: str
    ) -> list[Any]:
        """The messages from ``turn``'s opening one on, at the newest of the turn's own
        checkpoints older than ``end`` that still holds it (``[]``: none does)."""
        for index in range(end + 1, len(chain.links)):
            if turn_at(await chain.position(index, trust_stamps=False)) < turn:
                break
            messages = await self._messages_at(thread_id, chain, index)
            found = marked_index(messages, opening)
            if found is not None:
                return messages[found:]
        return []

    async def branch_checkpoint_ids(self, thread_id: str) -> list[str]:
        """The checkpoints of the thread's current branch, newest (the head) first."""
        return [link[ID] for link in (await self._chain(thread_id)).links]

    async def checkpoint_ids(self, thread_id: str) -> list[str]:
        """Every checkpoint of the namespace, on any branch, in no set order."""
        return await self.backend.checkpoint_ids(thread_id, self.namespace)

    async def _chain(self, thread_id: str) -> _Chain:
        _, chain = await self._read_chain(thread_id)
        return _Chain(self, thread_id, chain)

    async def _read_chain(
        self, thread_id: str
    ) -> tuple[Sequence[LinkRow] | None, Sequence[LinkRow]]:
        """Every checkpoint of the namespace as one read (``None`` for a saver without a scan),
        and the chain of the branch read out of that same read.

        A run's own checkpoint may not be stored yet when its tools read: LangGraph saves a
        step's checkpoint in the background while the step runs (``durability="async"``, the
        default), which takes about a millisecond. The lineage is read again a few times,
        for about a second in all, until it holds the checkpoint. A run that saves only at
        its exit (``durability="exit"``) never stores it during the run, so it is not waited
        for: its branch ends at the stored checkpoint the run continues (:attr:`continues`)
        when the run named one, else at the newest checkpoint stored before it, which is the
        thread's head when the run began unless another run on the thread saved one meanwhile.
        """
        try:
            return await self._read_chain_of(thread_id)
        except _Cycle as cycle:
            raise parent_cycle(thread_id, str(cycle)) from None

    async def _read_chain_of(self, thread_id: str) -> tuple[Any, Sequence[LinkRow]]:
        start = self.checkpoint_id
        pauses = _START_PAUSES if self.start_stored else ()
        for pause in (*pauses, None):
            with reading(thread_id):
                links = await self.backend.lineage(thread_id, self.namespace)
            chain: Sequence[LinkRow]
            if links is None:
                chain = await self._walk_links(thread_id, start)
            else:
                chain = _chain_of(links, start)
            if chain or start is None or pause is None:
                break
            await self._pause(pause)
        if not chain and start is not None:  # not stored during the run (durability="exit")
            if self.continues is not None:
                if links is None:
                    chain = await self._walk_links(thread_id, self.continues)
                else:
                    chain = _chain_of(links, self.continues)
            elif links is None:
                whole = await self._walk_links(thread_id, None)
                chain = [link for link in whole if link[ID] < start]
            else:
                before = [link[ID] for link in links if link[ID] < start]
                chain = _chain_of(links, max(before)) if before else []
        return links, chain

    async def _pause(self, seconds: float) -> None:
        if self.sync:
            time.sleep(seconds)  # a synchronous read never suspends (see backends.run_sync)
        else:
            await asyncio.sleep(seconds)

    async def _walk_links(self, thread_id: str, start: str | None) -> list[LinkRow]:
        """A saver without a scan: follow parents from ``start`` (the head when ``None``), one
        checkpoint at a time."""
        chain: list[LinkRow] = []
        checkpoint_id = start or await self.backend.head(thread_id, self.namespace)
        while checkpoint_id is not None:
            link = await self.backend.parent_of(thread_id, self.namespace, checkpoint_id)
            if link is None:
                break
            if len(chain) >= MAX_CHAIN:
                raise _Cycle(checkpoint_id)
            chain.append(link)
            checkpoint_id = link[PARENT]
        return chain


def _chain_of(links: Sequence[LinkRow], start: str | None) -> Sequence[LinkRow]:
    """The chain that ends at ``start`` (the head when ``None``) out of every checkpoint of a
    namespace; ``[]`` when ``start`` is not among them.

    The head's chain is :func:`_from_head`. Another checkpoint's is its parents, followed.
    """
    from_head = _from_head(links)
    if start is None or (from_head and from_head[0][ID] == start):
        return from_head
    by_id = {link[ID]: link for link in links}
    return _parents(by_id, by_id.get(start))


def _from_head(links: Sequence[LinkRow]) -> Sequence[LinkRow]:
    """The head's chain out of every checkpoint of a namespace: follow parents from the newest.

    Checkpoint ids rise with time, so the newest is the head; whatever a fork abandoned is not
    on its chain. A thread that never forked, listed newest first, is already its chain: every
    row's parent is the next row. That is checked with one list comparison, after sorting the
    rows by id if they came in another order (PostgreSQL returns them as they lie on disk),
    because the lineage of a long thread is thousands of rows and this runs on every read
    beyond the ring: both are done in C, not a Python step per row. Otherwise (a fork)
    parents are followed.
    """
    if not links:
        return []
    ids = list(map(itemgetter(ID), links))
    if _unforked(links, ids):
        return links
    links = sorted(links, key=itemgetter(ID), reverse=True)
    ids = list(map(itemgetter(ID), links))
    if _unforked(links, ids):
        return links
    return _parents(dict(zip(ids, links, strict=True)), links[0])


def _parents(by_id: Mapping[str, LinkRow], link: LinkRow | None) -> list[LinkRow]:
    """``link`` and its ancestors among ``by_id``, newest first, as far as they go; raises
    :class:`_Cycle` where the parent links loop back (more links than there are)."""
    chain = []
    while link is not None:
        chain.append(link)
        if len(chain) > len(by_id):
            raise _Cycle(link[ID])
        link = by_id.get(link[PARENT]) if link[PARENT] else None
    return chain


class _Cycle(Exception):
    """Parent links that loop back, found at a checkpoint (reported as damage by the read)."""


def _unforked(links: Sequence[LinkRow], ids: list[str]) -> bool:
    """Whether every row's parent is the next row: then the first row is the head (a child is
    always newer than its parent) and the rows are its whole chain."""
    return list(map(itemgetter(PARENT), links[:-1])) == ids[1:]


@contextmanager
def reading(thread_id: str) -> Iterator[None]:
    """Report what goes wrong reading a thread from storage as the library's own errors: a
    store that does not answer as :class:`~mcp_state_versions.walk.history.StoreUnavailable`, and
    anything else that fails to decode or replay as :class:`~mcp_state_versions.walk.history.
    DamagedState`, naming the thread (callers that know the turn name it too)."""
    try:
        yield
    except (HistoryError, NeedsAsync):
        raise
    except Exception as error:
        detail = " ".join(str(error).split())[:200] or type(error).__name__
        if unreachable(error):
            raise StoreUnavailable(detail, refused=refused(error)) from error
        raise DamagedState(thread_id, None, f"{type(error).__name__}: {detail}") from error


def history_for_run(
    config: Mapping[str, Any] | None, *, sync: bool = False
) -> CheckpointHistory | None:
    """The history of the checkpointer the current run uses, from a task's config, read along
    the run's own branch.

    ``None`` when the run has no checkpointer (``compile()`` without one, or
    ``checkpointer=False``). This is what ``history=AUTO`` resolves to at every call, so the
    answer never comes from a saver captured when the graph was built.

    The branch ends at the checkpoint the task's step started from (its config's
    ``checkpoint_map``), not at the thread's newest checkpoint: with two runs at once on one
    thread, the newest may be the other run's, and its values are not this run's past.

    Inside a subgraph, the history is the root graph's when the root keeps ``tool_state``: a
    subgraph that shares ``tool_state`` with its parent hands every write back to it, so the
    parent's checkpoints hold all the turns, where the subgraph's own (a persistent subgraph,
    ``checkpointer=True``) hold only the steps it ran. Otherwise it is the subgraph's own,
    when it keeps one.
    """
    configurable = (config or {}).get("configurable") or {}
    saver = configurable.get(_RUN_CHECKPOINTER)
    if not isinstance(saver, BaseCheckpointSaver):
        return None
    history = _RunHistory(
        saver,
        str(configurable.get("checkpoint_ns") or ""),
        configurable.get("checkpoint_map") or {},
        sync=sync,
    )
    history.start_stored = configurable.get(_RUN_DURABILITY) != "exit"
    continues = ((config or {}).get("metadata") or {}).get("checkpoint_id")
    history.continues = continues if isinstance(continues, str) and continues else None
    return history


class _RunHistory(CheckpointHistory):
    """A run's history whose namespace is settled on first use (see :func:`history_for_run`)."""

    def __init__(
        self,
        saver: BaseCheckpointSaver,
        task_namespace: str,
        checkpoint_map: Mapping[str, Any],
        *,
        sync: bool,
    ) -> None:
        root = checkpoint_map.get("")
        super().__init__(saver, sync=sync, checkpoint_id=root if isinstance(root, str) else None)
        parts = task_namespace.split("|")[:-1]  # drop the tool node's own task
        self._candidate = "|".join(part.split(":")[0] for part in parts)
        own = checkpoint_map.get("|".join(parts))
        self._candidate_start = own if isinstance(own, str) else None
        self._settled = not self._candidate

    async def _chain(self, thread_id: str) -> _Chain:
        if not self._settled:
            self._settled = True
            if (
                not await self._root_keeps_tool_state(thread_id)
                and await self.backend.head(thread_id, self._candidate) is not None
            ):
                self.namespace = self._candidate
                self.checkpoint_id = self._candidate_start
                self.continues = None  # the run named a checkpoint of the root's, not this one
        return await super()._chain(thread_id)

    async def _root_keeps_tool_state(self, thread_id: str) -> bool:
        # the root's newest checkpoint, not the run's: the run's may not be stored yet, and
        # whether the root keeps tool_state at all is the same on every branch
        head = await self.backend.head(thread_id, "")
        if head is None:
            return False
        found, stored = await self.backend.stored_tool_state(thread_id, "", head)
        return found and stored is not None
