"""Pruning: removing checkpoint history a deployment no longer wants to keep, by turn.

LangGraph's ``aprune(thread_ids, strategy=...)`` removes whole threads or all but their heads
(the library's savers implement it where LangGraph's open-source ones do not:
:mod:`mcp_state_versions.savers`).

:func:`prune_thread` prunes *by turn*, which is what a conversation's retention
policy is written in: keep the last N turns of the thread's current branch, and optionally drop
branches a fork abandoned. The thread stays resumable (its head is always kept), and readers
keep telling the truth: a turn read of a removed turn answers "no longer retained", unless the
key's own ring still holds that version, in which case it answers it.

``tool_state`` is stored as writes with periodic snapshots
(:mod:`mcp_state_versions.storage.tool_state`), so a checkpoint's value is rebuilt from the nearest
snapshot before it and the writes after. A naive keep-latest would leave the kept checkpoint nothing
to rebuild from, and its state would read back empty. Every prune here first makes the oldest
checkpoint it keeps rebuildable on its own: where it stores no value, the value is rebuilt while its
ancestors still exist and stored in it as a snapshot (:func:`seal`). Only then are the ancestors
deleted.
"""

from __future__ import annotations

from dataclasses import dataclass

from langgraph.checkpoint.base import BaseCheckpointSaver

from ..backends import ID, PARENT, Backend
from ..backends.known import (
    MESSAGES,
)
from ..state.clock import turn_at
from ..storage.tool_state import NOTHING_STORED

__all__ = ["PruneResult", "prune_thread", "seal"]


async def seal(backend: Backend, thread_id: str, namespace: str, checkpoint_id: str) -> None:
    """Make ``checkpoint_id`` rebuild its ``tool_state`` without its ancestors.

    Called before a prune deletes the ancestors: where the checkpoint stores no value (it is
    held as writes since the last snapshot), the value is rebuilt now and stored in it as a
    snapshot. A checkpoint that stores one already, or never had ``tool_state``, is left as is.
    """
    found, stored = await backend.stored_tool_state(thread_id, namespace, checkpoint_id)
    if found and stored is NOTHING_STORED:
        value = await backend.rebuild(thread_id, namespace, checkpoint_id)
        await backend.write_snapshot(thread_id, namespace, checkpoint_id, value)
    # messages stored as writes too (the default): a kept checkpoint with no snapshot of its
    # own would read back an empty conversation once its ancestors are gone
    found, stored = await backend.stored_tool_state(
        thread_id, namespace, checkpoint_id, channel=MESSAGES
    )
    if found and stored is NOTHING_STORED:
        value = await backend.rebuild_messages(thread_id, namespace, checkpoint_id)
        await backend.write_snapshot(thread_id, namespace, checkpoint_id, value, channel=MESSAGES)


@dataclass(frozen=True, slots=True)
class PruneResult:
    """What :func:`prune_thread` removed (or, in a dry run, would remove) and what the
    thread's history holds after it. ``bytes_removed`` is about what storage held for the
    checkpoints removed: their rows, their writes, and values no kept checkpoint shares."""

    deleted: int
    retained_turns: range
    total_turns: int
    bytes_removed: int = 0
    dry_run: bool = False


async def prune_thread(
    saver: BaseCheckpointSaver,
    thread_id: str,
    *,
    keep_turns: int | None = None,
    drop_abandoned: bool = False,
    dry_run: bool = False,
) -> PruneResult:
    """Remove a thread's history older than its last ``keep_turns`` turns, and/or abandoned
    branches.

    ``keep_turns=N`` keeps every checkpoint of the current branch from the first checkpoint of
    turn ``total - N + 1`` on (so turns ``total - N + 1 .. total`` stay readable), and deletes
    the older ones with their writes and blobs. ``drop_abandoned=True`` deletes every
    checkpoint that is not on the current branch (left behind by a fork). Only the root
    namespace is pruned. The head is never removed, so the thread can go on, and the oldest
    checkpoint kept is sealed first (:func:`seal`), so every retained turn still rebuilds; so
    is the first checkpoint of any other branch whose parent goes.

    ``dry_run=True`` changes nothing and reports the same figures the real prune would.

    Both read the thread once, and a checkpoint saved after that read is never deleted. A
    branch that forked off and is still running is, to ``drop_abandoned``, a branch like any
    other: drop abandoned branches where no run is going on beside the current one.
    """
    from ..walk.checkpoints import CheckpointHistory, _Chain

    if keep_turns is not None and keep_turns < 1:
        raise ValueError(f"keep_turns must be at least 1 (the current turn), got {keep_turns}")
    if keep_turns is None and not drop_abandoned:
        raise ValueError("say what to prune: keep_turns=N, drop_abandoned=True, or both")
    history = CheckpointHistory(saver)
    everything, links = await history._read_chain(thread_id)
    chain = _Chain(history, thread_id, links)
    on_branch = [link[ID] for link in chain.links]
    doomed: list[str] = []
    if keep_turns is not None and chain.links:
        total = turn_at(await chain.position(0, trust_stamps=False))
        cut = total - keep_turns + 1
        if cut > 1:
            boundary = await chain.end_of_turn(cut - 1, trust_stamps=False)
            if boundary is not None:
                boundary = max(boundary, 1)  # the head stays, whatever its clock says
                doomed.extend(on_branch[boundary:])
                if not dry_run:
                    await seal(
                        history.backend, thread_id, history.namespace, on_branch[boundary - 1]
                    )
    if drop_abandoned and on_branch:
        # From the same read as the chain, and only what is older than the head it was read
        # from: a checkpoint saved meanwhile (the next step of a run, a run beside it on
        # another branch) is not abandoned, and was never in this read to be counted so.
        head = on_branch[0]
        if everything is None:
            everything_ids = await history.checkpoint_ids(thread_id)
        else:
            everything_ids = [link[ID] for link in everything]
        kept = set(on_branch)
        doomed.extend(sorted(c for c in everything_ids if c not in kept and c < head))
    doomed = [checkpoint for checkpoint in doomed if checkpoint != on_branch[0]]  # never the head
    removed = await history.backend.stored_bytes(thread_id, history.namespace, doomed)
    if dry_run:
        gone = set(doomed)
        index = await _Chain(history, thread_id, [c for c in links if c[ID] not in gone]).index(
            planned=True
        )
        return PruneResult(len(doomed), index.retained, index.total, removed, dry_run=True)
    if doomed:
        gone = set(doomed)
        # Another branch (a fork, or a run beside this one) may start from a checkpoint about
        # to go: its first checkpoint is sealed too, or it would rebuild from nothing.
        for link in everything or ():
            if link[ID] not in gone and link[PARENT] in gone:
                await seal(history.backend, thread_id, history.namespace, link[ID])
        await history.backend.delete(thread_id, history.namespace, doomed)
    index = await history.turns(thread_id)
    return PruneResult(len(doomed), index.retained, index.total, removed)
