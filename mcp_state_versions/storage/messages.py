"""How ``messages`` is stored: the writes of each step, with a whole snapshot now and then.

LangGraph's ``add_messages`` channel stores the whole message list at every checkpoint, about
four times a turn, so a thread's storage grows with the square of its length and each turn
costs more than the one before. Stored as writes (LangGraph's ``DeltaChannel``, the mechanism
:mod:`mcp_state_versions.storage.tool_state` uses for ``tool_state``), a turn stores the messages it
added and, now and then, one snapshot of the list.

A ``DeltaChannel`` rebuilds the list by replaying stored writes through its reducer in whatever
batches it likes, so the reducer must be pure, deterministic and batching-invariant
(``r(r(s, xs), ys) == r(s, xs + ys)``). :func:`merge_messages` is ``add_messages`` applied write
by write, which makes it batching-invariant by construction, with two differences a replay
needs, and a property test checks it against ``add_messages`` itself:

* **Ids are given at the write, the same on every replay.** ``add_messages`` gives a message
  without an id a random one, which a replay would give anew. LangGraph's loop already gives
  message objects and message dicts an id before their write is stored; a string or a
  ``(role, content)`` tuple it leaves alone, and that one gets an id derived from the message
  before it and its own content (:func:`derived_id`), so every replay derives the same.
* **A ``RemoveMessage`` of an unknown id fails at the write, never in a replay.** Live, the
  channel's update raises as ``add_messages`` does; a replay skips it, since a stored write
  was merged, or refused, live already.

Snapshots follow the list's size (:class:`~mcp_state_versions.storage.channels.MessagesChannel`): an
append-only list takes one each time it has grown to :data:`GROWTH` times its size at the
last, so snapshots together store at most about half again what was written, and a run start
replays at most twice the last snapshot's messages. A running process replays nothing it
replayed before (:data:`~mcp_state_versions.storage.tool_state.REPLAYS`), and the library's savers
remember the history they read (:mod:`mcp_state_versions.backends.known`), so what a turn
stores and reads does not grow with the thread.
"""

from __future__ import annotations

import bisect
import operator
import threading
import uuid
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Literal

from langchain_core.messages import (
    AnyMessage,
    BaseMessage,
    BaseMessageChunk,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
    message_chunk_to_message,
)

__all__ = [
    "GROWTH",
    "MESSAGES",
    "MESSAGE_INDEXES",
    "MIN_SNAPSHOT_MESSAGES",
    "REMOVE_ALL_MESSAGES",
    "MessagesOption",
    "calling_several",
    "derived_id",
    "merge_messages",
    "replay_messages",
    "storable_writes",
]

MESSAGES = "messages"
"""The channel's name in every schema the library builds."""

MessagesOption = Literal["delta", "whole"]
"""How ``messages`` is stored: ``"delta"`` (writes with snapshots, the default) or ``"whole"``
(LangGraph's stock ``add_messages`` channel, the whole list at every checkpoint)."""

GROWTH = 3
"""How many times its size at the last snapshot the list grows to before the next one. The
snapshots of an append-only list then hold ``1 + 1/3 + 1/9 + …`` times its final size, at most
1.5 times what was written; a larger growth stores less and replays more after a restart."""

MIN_SNAPSHOT_MESSAGES = 16
"""The fewest messages a cycle writes before a snapshot (a new thread's first ones)."""

DEFAULT_MESSAGES_SNAPSHOT_CAP = 100_000
"""LangGraph's own cap on a cycle's updates of ``messages``; the size rule decides first."""

REMOVE_ALL_MESSAGES = "__remove_all__"
"""The id of a ``RemoveMessage`` that removes every message before it: LangGraph's own
constant (a test checks they are equal), written here because the module LangGraph keeps it in
imports its whole runtime, and a reader of stored messages needs none of it."""


_ID_NAMESPACE = uuid.UUID("6f1d3c8e-5b0a-4d7e-9c2a-4b8e1f0a7d31")


def derived_id(anchor: str, position: int, message: BaseMessage) -> str:
    """The id given to a message written without one: a UUID derived from the id of the
    message it follows (``anchor``, ``""`` at the list's start), its position in its write,
    its type and its content. A pure function, so a replay gives every such message the id it
    got live."""
    content = message.content if isinstance(message.content, str) else repr(message.content)
    return str(uuid.uuid5(_ID_NAMESPACE, f"{anchor}\x1f{position}\x1f{message.type}\x1f{content}"))


def _as_messages(write: Any) -> list[BaseMessage]:
    """A write as ``add_messages`` reads it: a list (one message-like alone is a list of
    one), coerced to messages, chunks made whole."""
    items = write if isinstance(write, list) else [write]
    if all(  # by type, once a type (a long list holds a handful of them)
        issubclass(kind, BaseMessage) and not issubclass(kind, BaseMessageChunk)
        for kind in set(map(type, items))
    ):
        return items
    return [message_chunk_to_message(m) for m in convert_to_messages(items)]  # type: ignore[arg-type]


class _Indexed:
    """What :class:`_IndexCache` keeps of one list: the list itself, each id's position, the
    length and last message it was indexed at, and the positions of the messages calling
    several tools (see :func:`calling_several`)."""

    __slots__ = ("conversation", "index", "items", "last", "length", "several")

    def __init__(self, items: list[Any], index: dict[str, int], several: tuple[int, ...]) -> None:
        self.items, self.index, self.several = items, index, several
        self.length, self.last = len(items), items[-1] if items else None
        # Which conversation the list is a state of: the lists a thread's merges return all
        # begin with its first message (a remove-all starts another, as it starts over).
        self.conversation: str | None = getattr(items[0], "id", None) if items else None


class _IndexCache:
    """Each id's position in a message list this module returned, for the next merge into it.

    A cache of pure functions of a list (its index, and which of its messages call several
    tools), so that a merge into a 4,000-message list copies an index instead of building one
    from every message's id, and a model call's look for calls to several tools
    (:func:`calling_several`) is a lookup, kept up by each merge: the channel merges
    each step's writes into the list it got from the step before, and a run start replays into
    the list the process last replayed (:data:`~mcp_state_versions.storage.tool_state.REPLAYS`).
    Keyed by the list itself, which the cache holds, so its identity cannot pass to another list
    while cached; checked on every use against the list's length and last message, so a list changed
    in place since is looked at afresh; bounded to :attr:`LIMIT` lists and to :attr:`LIMIT_IDS`
    ids in all, the least recently used out first, but for each conversation's newest list and
    the one its last run start replayed into, which go only when every list left is one: a
    process serving many conversations runs turns of others between two of one, each turn
    makes about ten lists, and a plain least-recently-used order pushed out the very list a
    waiting conversation's next turn merges into, which then indexed its whole conversation
    again. Only lists whose ids are all distinct (every list a merge returns but a remove-all's
    tail, which is indexed afresh) are cached.
    """

    LIMIT = 256
    """Lists: a turn makes about ten (a merge a step, and the copies LangGraph reads ahead
    with), and a run start merges into the one the last run left; each conversation's newest
    is kept over the others' older ones."""
    LIMIT_IDS = 250_000
    """Ids of all the lists together (under 10 MB of index), so long threads keep fewer lists
    (a 40,000-message conversation keeps six). The lists share their messages with the
    conversations' states and the process's last replays, but for conversations no longer
    running, whose messages this keeps alive until other lists push theirs out: this bounds
    them too."""

    def __init__(self) -> None:
        self._lists: OrderedDict[int, _Indexed] = OrderedDict()
        self._newest: dict[str, int] = {}  # a conversation's newest list (its key in _lists)
        self._replayed: dict[str, int] = {}  # and the one its last run start replayed into
        self._held = 0  # the lengths of the lists held, together
        self._lock = threading.Lock()  # sync graph runs merge in worker threads
        self.rebuilt = 0
        """Merges into a list of messages that had to index it afresh (a miss): what the
        benchmarks count to tell whether the cache serves a process's conversations."""

    def get(self, items: Sequence[Any]) -> _Indexed | None:
        """What is remembered of ``items``, or ``None``; a caller copies the index before
        changing it."""
        with self._lock:
            found = self._lists.get(id(items))
            if found is None:
                return None
            length = found.length
            if (
                found.items is not items
                or len(items) != length
                or (length and items[-1] is not found.last)
            ):
                self._drop(id(items))
                return None
            self._lists.move_to_end(id(items))
            return found

    def put(
        self,
        items: list[Any],
        index: dict[str, int],
        several: tuple[int, ...] = (),
    ) -> None:
        with self._lock:
            if id(items) in self._lists:
                self._drop(id(items))
            found = self._lists[id(items)] = _Indexed(items, index, several)
            self._held += found.length
            if found.conversation is not None:
                self._newest[found.conversation] = id(items)
            while len(self._lists) > 1 and (
                len(self._lists) > self.LIMIT or self._held > self.LIMIT_IDS
            ):
                self._drop(self._victim())

    def _victim(self) -> int:
        """The least recently used list that is not its conversation's newest, or else the
        least recently used."""
        newest = self._newest
        replayed = self._replayed
        for key, found in self._lists.items():
            conversation = found.conversation
            if conversation is None or key not in (
                newest.get(conversation),
                replayed.get(conversation),
            ):
                return key
        return next(iter(self._lists))

    def _drop(self, key: int) -> int:
        """Forget one list; its length."""
        found = self._lists.pop(key)
        self._held -= found.length
        conversation = found.conversation
        if conversation is not None:
            for kept in (self._newest, self._replayed):
                if kept.get(conversation) == key:
                    del kept[conversation]
        return found.length

    def replayed(self, items: list[Any]) -> None:
        """``items`` is what a run start replayed its conversation into, which the process's
        replay memory (:data:`~mcp_state_versions.storage.tool_state.REPLAYS`) goes on from at the
        conversation's next run start: kept, as its newest list is, while others give way."""
        with self._lock:
            found = self._lists.get(id(items))
            if found is not None and found.items is items and found.conversation is not None:
                self._replayed[found.conversation] = id(items)

    def copied(self, source: Sequence[Any], copy: list[Any]) -> None:
        """``copy`` (a shallow copy of ``source``, made by a channel's ``copy``) has what
        ``source`` has, if it is remembered: LangGraph copies channels to read a step's writes
        ahead (its branches' ``local_read``), and each copy is merged into."""
        found = self.get(source)
        if found is not None:
            self.put(copy, found.index, found.several)

    def clear(self) -> None:
        with self._lock:
            self._lists.clear()
            self._newest.clear()
            self._replayed.clear()
            self._held = 0


MESSAGE_INDEXES = _IndexCache()
"""What is remembered of each message list a merge returned (:class:`_IndexCache`)."""


def calling_several(
    messages: Sequence[Any], stored: Sequence[Any] | None = None
) -> tuple[int, ...]:
    """The positions, in order, of the messages in ``messages`` that call two or more tools.

    Asked at every model call (:func:`~mcp_state_versions.agent.publish.noted_messages`), over the
    whole conversation. A merge keeps the answer with the list it returns
    (:data:`MESSAGE_INDEXES`), looking only at the messages it adds or replaces, so for such a
    list this is a lookup; any other list is looked at whole. ``stored``: the list in state
    that ``messages`` may be a copy of (LangChain's ``create_agent`` hands its middleware a
    copy of the stored list), whose remembered answer serves when it holds the very same
    messages."""
    found = MESSAGE_INDEXES.get(messages)
    if (
        found is None
        and stored is not None
        and stored is not messages
        and len(stored) == len(messages)
        and all(map(operator.is_, stored, messages))
    ):
        found = MESSAGE_INDEXES.get(stored)
    if found is None:
        return tuple(i for i, message in enumerate(messages) if _calls_several(message))
    return found.several


_NO_CALLS = (HumanMessage, ToolMessage, SystemMessage, RemoveMessage)


def _calls_several(message: Any) -> bool:
    # Only a model's message calls tools: any other message is told by its type at once
    # (asking it for ``tool_calls`` costs a failed attribute lookup).
    if isinstance(message, _NO_CALLS):
        return False
    calls = getattr(message, "tool_calls", None)
    return isinstance(calls, list | tuple) and len(calls) > 1


class _Merging:
    """A message list being merged into, write by write: the list with holes where messages
    were removed, and each id's position (the last one where an id occurs twice, as
    ``add_messages``'s own index has it). A list holding an id twice (only ``add_messages``'
    remove-all keeps such a list) is compacted after every write, so its index never points
    past a hole."""

    __slots__ = ("doubled", "holes", "index", "items", "several")

    def __init__(self, state: Sequence[Any]) -> None:
        self.holes = 0
        known = MESSAGE_INDEXES.get(state) if state else None
        if known is not None:  # a list a merge returned: messages, ids distinct
            self.items: list[BaseMessage | None] = list(state)
            self.index: dict[str, int] = dict(known.index)
            self.several = list(known.several)
            self.doubled = False
            return
        # (a list of its own either way: the copy made here, or the coerced one)
        if state:
            MESSAGE_INDEXES.rebuilt += 1
        self.items = _as_messages(list(state)) if state else []  # type: ignore[assignment]
        self.index = {m.id: i for i, m in enumerate(self.items)}  # type: ignore[union-attr,misc]
        self.several = [i for i, m in enumerate(self.items) if _calls_several(m)]
        self.doubled = len(self.index) != len(self.items)

    def anchor(self) -> str:
        for message in reversed(self.items):
            if message is not None:
                return message.id or ""
        return ""

    def listed(self) -> list[BaseMessage]:
        """The merged list, its index remembered for the next merge into it."""
        if self.holes or self.doubled:
            return [m for m in self.items if m is not None]
        merged: list[BaseMessage] = self.items  # type: ignore[assignment]
        MESSAGE_INDEXES.put(merged, self.index, tuple(self.several))
        return merged

    def merge(self, write: Any, *, strict: bool) -> None:
        right = _as_messages(write)
        if any(m.id is None for m in right):
            right = self._with_ids(right)
        for position in range(len(right) - 1, -1, -1):
            found = right[position]
            if isinstance(found, RemoveMessage) and found.id == REMOVE_ALL_MESSAGES:
                # as add_messages: the messages after it, as they are
                self.__init__(right[position + 1 :])  # type: ignore[misc]
                return
        removed: set[str] = set()
        items, index = self.items, self.index
        for message in right:
            held_at = index.get(message.id)  # type: ignore[arg-type]
            if held_at is not None:
                if isinstance(message, RemoveMessage):
                    removed.add(message.id)  # type: ignore[arg-type]
                else:
                    removed.discard(message.id)  # type: ignore[arg-type]
                    items[held_at] = message
                    self._replaced(held_at, message)
            elif isinstance(message, RemoveMessage):
                if strict:
                    raise ValueError(
                        "Attempting to delete a message with an ID that doesn't exist "
                        f"('{message.id}')"
                    )
            else:
                index[message.id] = len(items)  # type: ignore[index]
                if _calls_several(message):
                    self.several.append(len(items))
                items.append(message)
        if self.doubled:  # an id held twice: add_messages removes every message holding it
            self.__init__([m for m in items if m is not None and m.id not in removed])  # type: ignore[misc]
            return
        for message_id in removed:
            items[index.pop(message_id)] = None
        self.holes += len(removed)

    def _replaced(self, position: int, message: BaseMessage) -> None:
        """The message at ``position`` is now ``message``: whether it calls several tools."""
        at = bisect.bisect_left(self.several, position)
        held = at < len(self.several) and self.several[at] == position
        calls = _calls_several(message)
        if calls and not held:
            self.several.insert(at, position)
        elif held and not calls:
            del self.several[at]

    def _with_ids(self, right: list[BaseMessage]) -> list[BaseMessage]:
        taken = {m.id for m in right if m.id is not None}
        anchor = self.anchor()
        given: list[BaseMessage] = []
        for position, message in enumerate(right):
            if message.id is None:
                new_id = derived_id(anchor, position, message)
                while new_id in self.index or new_id in taken:  # never another's id
                    new_id = str(uuid.uuid5(_ID_NAMESPACE, new_id))
                taken.add(new_id)
                message = message.model_copy(update={"id": new_id})
            given.append(message)
        return given


def storable_writes(writes: Sequence[tuple[str, Any]]) -> Sequence[tuple[str, Any]]:
    """``writes`` as a saver should store them: a lone tuple written to ``messages`` (a node
    returning ``{"messages": ("ai", "hello")}``) wrapped in a list of one.

    ``add_messages`` reads a lone ``(role, content)`` tuple as one message, and a list of one
    such tuple the same way, with the same derived id (:func:`derived_id`: position 0
    either way). The savers' serializer stores a tuple as a list, though, and a stored
    ``["ai", "hello"]`` replays as two human messages, "ai" and "hello". LangGraph gives
    such a write a message of its own only for its private delta reducer, so the library's
    savers wrap it before storing; the list of one survives the serializer as it is.
    """
    if not any(channel == MESSAGES and isinstance(value, tuple) for channel, value in writes):
        return writes
    return [
        (channel, [value] if channel == MESSAGES and isinstance(value, tuple) else value)
        for channel, value in writes
    ]


def merge_messages(state: Sequence[Any] | None, writes: Sequence[Any]) -> list[AnyMessage]:
    """``add_messages`` over a batch of writes, ``(state, [write, ...]) -> state``.

    Each write is merged as ``add_messages(state, write)`` merges it (replace by id, remove by
    id, ``REMOVE_ALL_MESSAGES``, dicts, tuples, strings and chunks coerced), so any batching
    gives the same list. A message without an id gets :func:`derived_id`'s; a
    ``RemoveMessage`` of an id the list does not hold raises ``ValueError``, as
    ``add_messages`` does. Neither ``state`` nor the writes are changed.
    """
    return _merged(state, writes, strict=True)


def replay_messages(state: Sequence[Any] | None, writes: Sequence[Any]) -> list[AnyMessage]:
    """:func:`merge_messages` for stored writes being replayed: a ``RemoveMessage`` of an
    unknown id is skipped, since the write it came in was refused live (its step failed) and
    a replay must never fail where the live run went on."""
    return _merged(state, writes, strict=False)


def _merged(state: Sequence[Any] | None, writes: Sequence[Any], *, strict: bool) -> list[Any]:
    merging = _Merging(state or [])
    for write in writes:
        merging.merge(write, strict=strict)
    return merging.listed()


merge_messages.replayed = replay_messages  # type: ignore[attr-defined]
