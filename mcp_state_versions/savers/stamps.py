"""Turn stamps settled as a run's checkpoints are stored, so a run need not read its thread's
head before it starts.

:func:`~mcp_state_versions.agent.build.run_turn` stamps a run's checkpoints with the turn the run
opens (checkpoint metadata under :data:`~mcp_state_versions.state.reducer.TURN_METADATA_KEY`), a
hint the checkpoint walk steers by and checks against the clocks. The turn is the one after the
stamp of the checkpoint the run continues, so the stamp was read before the run: on
PostgreSQL a round trip a plain agent does not make, about a twentieth of a small turn.

A saver that stores through this module (the library's database savers,
:mod:`mcp_state_versions.savers`) settles the stamp itself. ``run_turn`` passes
:data:`NEXT_TURN` instead of a number, and the saver, about to store a checkpoint, replaces it:

* the run's first checkpoint (source ``input``) continues its parent, the checkpoint the run
  read as it started, through this same saver (``aget_tuple``), so the parent's stamp is
  known without a read: the run opens the turn after it, or turn 1 on a new thread;
* every later checkpoint of the run takes its parent's stamp, which the saver settled a step
  before.

The parent is the checkpoint the run really continues, so the stamp is right even when another
run stored a checkpoint between a caller's read of the head and its run's start, where a stamp
read beforehand was off. Where the parent carries no stamp a run could continue from (a run
invoked without ``run_turn``, an operator's edit, another process's checkpoint this one never
read), the run is stored unstamped, and the walk places its checkpoints by their clocks, as it
does any unstamped run. :func:`continues_stamped` tells ``run_turn`` when to expect that and
read the clock first instead, as before.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from ..state.reducer import TURN_METADATA_KEY

__all__ = ["NEXT_TURN", "continues_stamped", "note_stamp", "settle", "stamps_at_put"]

NEXT_TURN = "mcp_state_versions:next"
"""The stamp :func:`~mcp_state_versions.agent.build.run_turn` passes to a saver that settles stamps
(:func:`stamps_at_put`): "the turn after the checkpoint this run continues". It never reaches
storage: the saver replaces it with a turn, or leaves the run unstamped."""

SEEN_PER_THREAD = 4
"""Checkpoints a saver keeps the stamp of, per thread namespace: a run asks only for the parent
of the checkpoint it stores, which is the one it read or stored last."""

SEEN_THREADS = 4096
"""Thread namespaces a saver keeps stamps for, the least recently used giving way first (a few
megabytes at most). A run whose parent's stamp gave way meanwhile is stored unstamped from
there on, which costs the walk reads, not answers."""

_SEEN = "_mcp_state_versions_stamps"
_LOCK = threading.Lock()

_Stamp = tuple[int | None, Any, int | None]
"""A checkpoint's turn stamp (``None``: none), its ``source`` and its ``step``."""


def stamps_at_put(saver: Any) -> bool:
    """Whether ``saver`` settles :data:`NEXT_TURN` as it stores a checkpoint: the library's
    database savers say so with a class attribute."""
    return getattr(saver, "stamps_at_put", False) is True


def _seen(saver: Any) -> OrderedDict[tuple[str, str], OrderedDict[str, _Stamp]]:
    return saver.__dict__.setdefault(_SEEN, OrderedDict())


def note_stamp(
    saver: Any, thread_id: str, namespace: str, checkpoint_id: str, metadata: Any
) -> None:
    """``saver`` read or is storing ``checkpoint_id`` with ``metadata``: keep its stamp."""
    if not isinstance(metadata, Mapping):
        return
    stamp, step = metadata.get(TURN_METADATA_KEY), metadata.get("step")
    entry = (
        stamp if type(stamp) is int else None,
        metadata.get("source"),
        step if type(step) is int else None,
    )
    key = (thread_id, namespace)
    with _LOCK:
        seen = _seen(saver)
        per_thread = seen.pop(key, None) or OrderedDict()
        seen[key] = per_thread  # the most recently used last
        per_thread.pop(checkpoint_id, None)
        per_thread[checkpoint_id] = entry
        while len(per_thread) > SEEN_PER_THREAD:
            per_thread.popitem(last=False)
        while len(seen) > SEEN_THREADS:
            seen.popitem(last=False)


def _stamp_of(saver: Any, thread_id: str, namespace: str, checkpoint_id: str) -> _Stamp | None:
    with _LOCK:
        per_thread = _seen(saver).get((thread_id, namespace))
        return None if per_thread is None else per_thread.get(checkpoint_id)


def continues_stamped(saver: Any, thread_id: str, namespace: str) -> bool:
    """Whether the checkpoint ``saver`` read or stored last on the thread ended a stamped run:
    a run continuing it would be stamped at its put (see the module's docstring). Another
    process may have stored a newer one since; its run is then stored unstamped, and the next
    ``run_turn`` here reads the head first."""
    with _LOCK:
        per_thread = _seen(saver).get((thread_id, namespace))
        if not per_thread:
            return False
        stamp, source, _ = next(reversed(per_thread.values()))
    return stamp is not None and source == "loop"


def settle(
    saver: Any, config: Mapping[str, Any], metadata: Mapping[str, Any]
) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    """``config`` and ``metadata`` of a checkpoint about to be stored, with :data:`NEXT_TURN`
    replaced by the turn it stands for, or removed where the parent tells none (see the
    module's docstring). A turn the run passed itself is copied into ``metadata``, where it is
    stored the same, so that the saver notes it.

    The savers merge ``config``'s metadata into the checkpoint's, so a settled turn goes into
    ``metadata`` and the placeholder comes out of ``config`` either way: it is never stored,
    whichever of the two a saver lets win."""
    given = config.get("metadata")
    stamp = given.get(TURN_METADATA_KEY) if isinstance(given, Mapping) else None
    if stamp != NEXT_TURN:
        if type(stamp) is int and TURN_METADATA_KEY not in metadata:
            metadata = {**metadata, TURN_METADATA_KEY: stamp}  # as stored: noted as it is
        return config, metadata
    turn = _turn_of(saver, config["configurable"], metadata)
    rest = {name: value for name, value in (given or {}).items() if name != TURN_METADATA_KEY}
    if turn is not None:
        metadata = {**metadata, TURN_METADATA_KEY: turn}
    return {**config, "metadata": rest}, metadata


def _turn_of(
    saver: Any, configurable: Mapping[str, Any], metadata: Mapping[str, Any]
) -> int | None:
    """The turn a checkpoint of a run passed :data:`NEXT_TURN` stands in, from the stamp of
    its parent (``None``: it tells none).

    The parent is the run's own previous checkpoint when it is the step before; otherwise
    the checkpoint is the first the run stores, and the parent is the one it continues. That
    is usually the run's ``input`` checkpoint, but a run that stores only at its exit
    (``durability="exit"``) stores one ``loop`` checkpoint, a few steps after its parent."""
    thread_id = str(configurable["thread_id"])
    namespace = str(configurable.get("checkpoint_ns") or "")
    if namespace:  # a subgraph's: the turn of the root checkpoint its task started from
        root = (configurable.get("checkpoint_map") or {}).get("")
        found = _stamp_of(saver, thread_id, "", root) if isinstance(root, str) else None
        return None if found is None else found[0]
    parent_id = configurable.get("checkpoint_id")
    if parent_id is None:
        return 1  # a new thread's first run
    parent = _stamp_of(saver, thread_id, namespace, parent_id)
    turn, source, step = parent if parent is not None else (None, None, None)
    if turn is None:
        return None
    if metadata.get("source") != "input" and step is not None and step + 1 == metadata.get("step"):
        return turn  # a later checkpoint of the same run
    return turn + 1 if source == "loop" else None  # the run's first: the turn after the last
