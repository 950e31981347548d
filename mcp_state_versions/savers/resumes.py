"""Two runs storing on one checkpoint at once: the one that would read the other's writes is
refused, and takes its own back, never left as a branch that reads another run's past.

A run stores its writes on checkpoints it stored itself, with two exceptions. A run resuming an
interrupted task stores the task's result on the paused checkpoint, under the task's id; and
under ``durability="exit"`` a run stores every write of the run on the checkpoint it started
from, at its end. Two runs doing so on one checkpoint at once (an approval submitted twice, two
replicas without a per-thread queue, two exit-mode runs continuing one head) meet there:

* under the same task id and index storage keeps the first run's write and drops the
  second's;
* under other ids both are kept, and a reader of either branch replays both.

A channel stored whole (LangGraph's default) still holds each run's own value in its own
checkpoint. A channel stored as writes (``tool_state`` and ``messages`` here) is rebuilt from
them, so on the next reload one branch reads the other run's answer, or both read a mix, and
every run after goes on from a past that never was.

So the library's savers (:mod:`mcp_state_versions.savers`) check what the database cannot.
A saver notes each checkpoint it reads (a run reads the one it continues through
``aget_tuple``) with the tasks that had written there (:func:`note_start`). When it stores a
write on such a checkpoint, it reads back what the checkpoint holds (:func:`check_resume`):

* a task of this run whose stored writes are another run's;
* or writes of a task that neither this run stored nor were there when it started.

Either way it removes the writes this run stored there and raises :class:`ConcurrentResume`,
naming the thread and the checkpoint. The run then stores no checkpoint after it (LangGraph
stores a step's checkpoint only once its writes are stored). Runs whose writes on the shared
checkpoint are equal (one answer submitted twice) both go on.

Only a write on a checkpoint a run started from is read back: that is a resumed task's result,
or an exit-mode run's writes at its end, one read each. Every other write costs nothing.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, NamedTuple

from langchain_core.messages import BaseMessage
from langgraph.checkpoint.base import WRITES_IDX_MAP

from ..backends.known import note_read

__all__ = ["ConcurrentResume", "check_resume", "check_resume_sync", "note_start"]

NOTED_CHECKPOINTS = 256
"""Checkpoints a saver remembers having read as a run's start, and runs it remembers the writes
of there, the oldest giving way first."""

_NOTED = "_mcp_state_versions_started"
_RUNS = "_mcp_state_versions_runs"
_LOCK = threading.Lock()

INTERRUPT = "__interrupt__"
"""The channel of an interrupted task's write (LangGraph's own name, whose constant is
private: it is the key of ``WRITES_IDX_MAP`` a test checks)."""

_Where = tuple[str, str, str]
"""A checkpoint: its thread, namespace and id."""

_READING_BACK: ContextVar[bool] = ContextVar("mcp_state_versions_reading_back", default=False)
"""Set while a check reads back what a checkpoint holds: that read is no run's start."""

_RUNTIME = "__pregel_runtime"
"""The configurable key under which LangGraph hands a run's runtime to the saver with every
write: one object a run, so it tells two runs writing on one checkpoint apart."""


class ConcurrentResume(RuntimeError):
    """Another run stored its writes on the checkpoint this run continues, at the same time
    (the same interrupt resumed twice, or two exit-mode runs continuing one checkpoint); this
    run's writes were taken back and its branch was not stored."""

    def __init__(self, thread_id: str, checkpoint_id: str) -> None:
        self.thread_id, self.checkpoint_id = thread_id, checkpoint_id
        super().__init__(
            f"thread {thread_id!r}: another run stored its result on checkpoint "
            f"{checkpoint_id} first (a run continuing it at the same time: the same interrupt "
            "resumed twice, with another answer, or two runs with durability='exit'; or an "
            "earlier run that failed there), and a reload would read that one; this run's "
            "result was not stored. Read the thread's state again (get_state): resume a call "
            "that still waits for an answer, or, where every call has its result, go on with "
            "a run that sends no new input (invoke(None)); then, if this answer is still "
            "wanted, run again from there"
        )


def _where(config: Any) -> _Where | None:
    configurable = (config or {}).get("configurable") or {}
    checkpoint_id = configurable.get("checkpoint_id")
    if checkpoint_id is None:
        return None
    return (
        str(configurable.get("thread_id")),
        str(configurable.get("checkpoint_ns") or ""),
        str(checkpoint_id),
    )


def _remembered(saver: Any, name: str) -> OrderedDict[Any, Any]:
    found: OrderedDict[Any, Any] | None = getattr(saver, name, None)
    if found is None:
        found = OrderedDict()
        setattr(saver, name, found)
    return found


def _remember(table: OrderedDict[Any, Any], key: Any, value: Any) -> None:
    table[key] = value
    table.move_to_end(key)
    while len(table) > NOTED_CHECKPOINTS:
        table.popitem(last=False)


def note_start(saver: Any, found: Any) -> None:
    """Note a checkpoint ``saver`` just read (a ``CheckpointTuple``, or ``None``), with the
    tasks whose writes it holds: a run may continue it, and store writes on it."""
    where = None if found is None or _READING_BACK.get() else _where(found.config)
    if where is None:
        return
    pending = found.pending_writes or ()
    note_read(saver, where, pending)  # another process's writes there: the notes no longer tell all
    tasks = frozenset(task for task, channel, _ in pending if _kept(channel))
    waiting = frozenset(task for task, channel, _ in pending if channel == INTERRUPT) - tasks
    with _LOCK:
        _remember(_remembered(saver, _NOTED), where, _Started(tasks, waiting))


class _Started(NamedTuple):
    """What a checkpoint held when a run read it as its start: the tasks whose results were
    stored there (``done``), and the interrupted tasks still waiting for an answer
    (``waiting``), which any run resuming it may store a result for."""

    done: frozenset[str]
    waiting: frozenset[str]


def _kept(channel: str) -> bool:
    """Whether a write is part of a task's result (not its interrupt, error or resume mark)."""
    return channel not in WRITES_IDX_MAP


def _comparable(value: Any) -> Any:
    """A written value as two runs agree on it: messages without their ids (a tool's result
    message gets a fresh id in each run that makes it, which changes nothing a reader sees)."""
    if isinstance(value, BaseMessage):
        return value.model_dump(exclude={"id"})
    if isinstance(value, list) and any(isinstance(item, BaseMessage) for item in value):
        return [_comparable(item) for item in value]
    return value


def _results(writes: Sequence[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """A task's writes as compared: by channel (a saver may give them back in another order),
    each channel's in the order written."""
    found = [(channel, _comparable(value)) for channel, value in writes if _kept(channel)]
    return sorted(found, key=lambda write: write[0])


def _exact(writes: Sequence[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """A task's writes as stored, ids included: whose they are, not only what they say."""
    return sorted(((c, v) for c, v in writes if _kept(c)), key=lambda write: write[0])


_Results = dict[str, tuple[list[tuple[str, Any]], list[tuple[str, Any]]]]
"""A run's results on a checkpoint: task id to its writes as compared and as stored."""


def _ours(
    saver: Any, config: Any, writes: Sequence[tuple[str, Any]], task_id: str
) -> tuple[_Where, _Started, _Results] | None:
    """Where the writes go, the tasks that were there when the run read it, and this run's
    results there so far (these writes' included), when the writes go on a checkpoint the
    saver read as a run's start; ``None`` otherwise (nothing to check)."""
    noted = getattr(saver, _NOTED, None)
    where = _where(config) if noted else None
    if where is None or where not in noted or not any(_kept(c) for c, _ in writes):  # type: ignore[operator]
        return None
    runtime = ((config or {}).get("configurable") or {}).get(_RUNTIME)
    with _LOCK:
        runs = _remembered(saver, _RUNS)
        key = (where, id(runtime if runtime is not None else config))
        ours: _Results = runs.get(key) or {}
        ours[task_id] = (_results(writes), _exact(writes))
        _remember(runs, key, ours)
        return where, noted[where], ours  # type: ignore[index]


def _taken_back(found: Any, started: _Started, ours: _Results) -> list[str] | None:
    """``None`` when the checkpoint holds this run's results as the run stored them (or equal
    ones another run stored first) and no other run's; else the tasks whose writes this run
    takes back.

    Taken back are only writes that are this run's own, ids and all, and not the result of
    a task that was waiting for an answer. Such a result is stored once, by whichever run
    got there first; another run that goes on from the checkpoint either stored it or found
    it equal to its own and reads it, so removing it would take a result from that run's
    branch. (When every run is refused, the results stored stay, each an answer given to
    its own call, and the thread goes on from them with a run that sends no new input.)
    """
    by_task: dict[str, list[tuple[str, Any]]] = {}
    for task, channel, value in found.pending_writes if found is not None else ():
        by_task.setdefault(task, []).append((channel, value))
    stored = {task: _results(writes) for task, writes in by_task.items()}
    stored = {task: writes for task, writes in stored.items() if writes}
    lost = any(stored.get(task) != results for task, (results, _) in ours.items())
    foreign = any(
        task not in started.done and task not in started.waiting and task not in ours
        for task in stored
    )
    if not lost and not foreign:
        return None
    return [
        task
        for task, (_, exact) in ours.items()
        if task not in started.waiting and _exact(by_task.get(task, [])) == exact
    ]


@contextmanager
def _reading_back() -> Iterator[None]:
    """While a check reads back a checkpoint: that read notes no run's start."""
    token = _READING_BACK.set(True)
    try:
        yield
    finally:
        _READING_BACK.reset(token)


async def check_resume(
    saver: Any, config: Any, writes: Sequence[tuple[str, Any]], task_id: str
) -> None:
    """After ``saver`` stored ``writes`` of task ``task_id``: when they went on a checkpoint
    a run started from and another run's writes are there too, take this run's back and raise
    :class:`ConcurrentResume`."""
    ours = _ours(saver, config, writes, task_id)
    if ours is None:
        return
    where, started, results = ours
    with _reading_back():
        found = await saver.aget_tuple(config)
    mine = _taken_back(found, started, results)
    if mine is None:
        return
    if mine:
        from ..backends import backend_for

        await backend_for(saver).delete_writes(*where, mine)
    raise ConcurrentResume(where[0], where[2])


def check_resume_sync(
    saver: Any, config: Any, writes: Sequence[tuple[str, Any]], task_id: str
) -> None:
    """:func:`check_resume` for the in-memory saver, whose writes are taken back in place."""
    ours = _ours(saver, config, writes, task_id)
    if ours is None:
        return
    where, started, results = ours
    with _reading_back():
        found = saver.get_tuple(config)
    mine = _taken_back(found, started, results)
    if mine is None:
        return
    if mine:
        from ..backends.memory import delete_writes

        delete_writes(saver, *where, mine)
    raise ConcurrentResume(where[0], where[2])
