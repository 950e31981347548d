"""Sweeping: retention over every thread of a saver, by age and by turns, with a dry run.

:func:`~mcp_state_versions.retention.prune.prune_thread` works on one thread. A deployment wants a
policy applied to all of them, left running: threads nobody has written to for a while go
whole, the others keep their last N turns. :func:`sweep` is that, built so it can run beside
agents that are writing:

* **In pages.** Threads are listed a page at a time, in id order, and each thread is pruned on
  its own, so no statement covers more than one thread and no lock is held for long.
* **Resumable.** The report names the last thread done (``resume_after``); passing it back as
  ``after=`` goes on from there after an interruption. A thread swept twice loses nothing the
  first sweep kept: the policy is the same, so the second finds nothing more to remove.
* **Safe beside writers.** Pruning has the guarantees of :func:`prune_thread` (one read of the
  thread, the head and anything saved after that read kept, other branches sealed). A thread
  is deleted for idleness only if its newest checkpoint is older than ``idle_for`` when it is
  listed *and* is still the newest when it goes, checked and deleted as one step with the
  writers held off (:meth:`~mcp_state_versions.backends.Backend.delete_idle_thread`): a run
  that stored a checkpoint meanwhile makes it active again, and it stays.
* **A dry run tells the truth.** ``dry_run=True`` changes nothing and reports the figures the
  same sweep would: the same threads, checkpoints and bytes.

A thread's age is that of its newest checkpoint in the root namespace, by the store's clock
where the store keeps one: on PostgreSQL with ``track_commit_timestamp = on``, the time the
row was committed, against the server's ``now()``. A writer whose clock is days behind then
cannot make a thread it just wrote look idle. Elsewhere it is read from the checkpoint id
(LangGraph's ids are version-6 UUIDs, which carry the writer's time they were made) or, for
an id that carries none, from the checkpoint's own ``ts``, against the server's ``now()`` on
PostgreSQL and this machine's clock otherwise.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from ..backends import Backend, backend_for, checkpoint_time
from .prune import prune_thread

__all__ = [
    "ENV_PREFIX",
    "SweepPolicy",
    "SweepProgress",
    "SweepReport",
    "SweepSchedule",
    "parse_duration",
    "reclaim",
    "sweep",
    "sweeping",
]

logger = logging.getLogger(__name__)

ENV_PREFIX = "MCP_STATE_VERSIONS_SWEEP_"
"""Environment variables of a background sweeper: ``..._EVERY`` (a duration; none: no
sweeper), ``..._KEEP_TURNS``, ``..._IDLE_FOR`` (a duration), ``..._DROP_ABANDONED``."""

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str) -> float:
    """``30d``, ``12h``, ``90m``, ``45s``, ``2w`` (or plain seconds) as seconds; ``ValueError``
    naming the forms otherwise."""
    text = text.strip()
    number, unit = text[:-1], text[-1:].lower()
    if unit.isdigit() or unit == ".":
        number, unit = text, "s"
    try:
        seconds = float(number) * _UNITS[unit]
    except (KeyError, ValueError):
        raise ValueError(
            f"a duration is a number and a unit (30d, 12h, 90m, 45s), not {text!r}"
        ) from None
    if not seconds > 0:
        raise ValueError(f"a duration must be more than zero, not {text!r}")
    return seconds


@dataclass(frozen=True, slots=True)
class SweepPolicy:
    """What a sweep removes: threads idle longer than ``idle_for`` (seconds) whole; from the
    others, turns older than their last ``keep_turns``, and with ``drop_abandoned`` the
    branches forks left behind. At least one of them must be given."""

    keep_turns: int | None = None
    idle_for: float | None = None
    drop_abandoned: bool = False

    def __post_init__(self) -> None:
        if self.keep_turns is not None and self.keep_turns < 1:
            raise ValueError(f"keep_turns must be at least 1, got {self.keep_turns}")
        if self.idle_for is not None and self.idle_for <= 0:
            raise ValueError(f"idle_for must be a positive number of seconds, got {self.idle_for}")
        if self.keep_turns is None and self.idle_for is None and not self.drop_abandoned:
            raise ValueError("say what to sweep: keep_turns=N, idle_for=SECONDS, drop_abandoned")

    @property
    def prunes(self) -> bool:
        return self.keep_turns is not None or self.drop_abandoned


@dataclass(frozen=True, slots=True)
class SweepReport:
    """What a sweep removed (a dry run: would remove). ``resume_after`` is the last thread it
    finished when it stopped early (``limit``), for ``sweep(..., after=)``; ``None`` once every
    thread was seen. ``bytes_removed`` is about what storage held for what went."""

    threads_seen: int = 0
    threads_deleted: int = 0
    threads_pruned: int = 0
    checkpoints_removed: int = 0
    bytes_removed: int = 0
    dry_run: bool = False
    resume_after: str | None = None
    seconds: float = 0.0
    deleted: tuple[str, ...] = field(default=(), repr=False)
    pruned: tuple[str, ...] = field(default=(), repr=False)


@dataclass(frozen=True, slots=True)
class SweepProgress:
    """Where a running sweep is: handed to ``progress`` after each thread."""

    thread_id: str
    action: str
    report: SweepReport


async def sweep(
    saver: BaseCheckpointSaver,
    *,
    keep_turns: int | None = None,
    idle_for: float | timedelta | None = None,
    drop_abandoned: bool = False,
    dry_run: bool = False,
    after: str | None = None,
    limit: int | None = None,
    page: int = 200,
    now: Callable[[], float] | None = None,
    progress: Callable[[SweepProgress], None] | None = None,
) -> SweepReport:
    """Apply a retention policy to every thread of ``saver`` (see the module docstring).

    ``idle_for`` (seconds or a ``timedelta``): a thread whose newest checkpoint is older is
    deleted whole. ``keep_turns``/``drop_abandoned``: every other thread is pruned as
    :func:`~mcp_state_versions.retention.prune.prune_thread` does. ``after`` resumes after a thread
    id; ``limit`` stops after that many threads (the report's ``resume_after`` says where);
    ``page`` is how many threads are listed at a time. ``now`` is the clock a thread's age is
    measured by (``None``: the store's own where it has one, as PostgreSQL has, else this
    machine's). Works on ``InMemorySaver``, the SQLite savers and the PostgreSQL savers (and
    their subclasses).
    """
    if isinstance(idle_for, timedelta):
        idle_for = idle_for.total_seconds()
    policy = SweepPolicy(keep_turns=keep_turns, idle_for=idle_for, drop_abandoned=drop_abandoned)
    backend = backend_for(saver)
    started = time.monotonic()
    report = SweepReport(dry_run=dry_run)
    deleted: list[str] = []
    pruned: list[str] = []
    cursor = after
    while limit is None or report.threads_seen < limit:
        size = page if limit is None else min(page, limit - report.threads_seen)
        listed = await backend.threads(cursor, size)
        if not listed:
            cursor = None
            break
        for thread_id, head in listed:
            action, removed, freed = await _sweep_one(
                saver, backend, thread_id, head, policy, dry_run=dry_run, now=now
            )
            if action == "deleted":
                deleted.append(thread_id)
            elif action == "pruned":
                pruned.append(thread_id)
            report = replace(
                report,
                threads_seen=report.threads_seen + 1,
                threads_deleted=len(deleted),
                threads_pruned=len(pruned),
                checkpoints_removed=report.checkpoints_removed + removed,
                bytes_removed=report.bytes_removed + freed,
            )
            cursor = thread_id
            if progress is not None:
                progress(SweepProgress(thread_id, action, report))
        if len(listed) < size:
            cursor = None
            break
    more = cursor is not None and bool(await backend.threads(cursor, 1))
    return replace(
        report,
        resume_after=cursor if more else None,
        seconds=time.monotonic() - started,
        deleted=tuple(deleted),
        pruned=tuple(pruned),
    )


async def _sweep_one(
    saver: BaseCheckpointSaver,
    backend: Backend,
    thread_id: str,
    head: str,
    policy: SweepPolicy,
    *,
    dry_run: bool,
    now: Callable[[], float] | None,
) -> tuple[str, int, int]:
    """``(action, checkpoints removed, bytes removed)`` for one thread."""
    if policy.idle_for is not None:
        made, current = await _age(backend, thread_id, head, now)
        if made is not None and current - made > policy.idle_for:
            removed = len(await backend.checkpoint_ids(thread_id, ""))
            freed = await backend.stored_bytes(thread_id, None, None)
            if dry_run:
                return "deleted", removed, freed
            # Written to since it was listed: a run is going on, and the thread stays.
            if await backend.delete_idle_thread(thread_id, head):
                return "deleted", removed, freed
            return "kept", 0, 0
    if not policy.prunes:
        return "kept", 0, 0
    result = await prune_thread(
        saver,
        thread_id,
        keep_turns=policy.keep_turns,
        drop_abandoned=policy.drop_abandoned,
        dry_run=dry_run,
    )
    if result.deleted == 0:
        return "kept", 0, 0
    return "pruned", result.deleted, result.bytes_removed


async def _age(
    backend: Backend, thread_id: str, head: str, now: Callable[[], float] | None
) -> tuple[float | None, float]:
    """When the thread's head was written, and the time now, on one clock: the store's where
    it keeps commit times, else the writer's (in the head's id) against ``now`` or the
    store's time or this machine's."""
    committed, store_now = await backend.written_at(thread_id, head)
    made = committed if committed is not None else await _head_time(backend, thread_id, head)
    current = now() if now is not None else store_now if store_now is not None else time.time()
    return made, current


async def _head_time(backend: Backend, thread_id: str, head: str) -> float | None:
    made = checkpoint_time(head)
    if made is not None:
        return made
    saved = await backend._tuple(thread_id, "", head)
    stamp = (saved.checkpoint or {}).get("ts") if saved is not None else None
    try:
        return datetime.fromisoformat(stamp).timestamp() if isinstance(stamp, str) else None
    except ValueError:
        return None


async def reclaim(saver: BaseCheckpointSaver) -> int | None:
    """Give the space a sweep freed back to the system where the store leaves it to be asked:
    SQLite's ``VACUUM``, returning the bytes the file shrank by. ``None`` for stores that
    reclaim space themselves (PostgreSQL's autovacuum reuses it; the in-memory saver frees it
    at once)."""
    from ..backends.sqlite import SqliteBackend

    backend = backend_for(saver)
    if not isinstance(backend, SqliteBackend):
        return None
    return await backend.vacuum()


@dataclass(frozen=True, slots=True)
class SweepSchedule:
    """A background sweeper's settings: a sweep with ``policy`` every ``every`` seconds."""

    every: float
    policy: SweepPolicy

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> SweepSchedule | None:
        """The schedule the environment sets (see :data:`ENV_PREFIX`), or ``None`` when
        ``MCP_STATE_VERSIONS_SWEEP_EVERY`` is unset. A value that does not parse raises
        ``ValueError`` naming the variable: a sweeper that deletes must not guess."""
        environ = os.environ if environ is None else environ
        every = environ.get(ENV_PREFIX + "EVERY", "").strip()
        if not every:
            return None

        def read(name: str, parse: Callable[[str], Any]) -> Any:
            raw = environ.get(ENV_PREFIX + name, "").strip()
            if not raw:
                return None
            try:
                return parse(raw)
            except ValueError as error:
                raise ValueError(f"{ENV_PREFIX}{name}: {error}") from None

        interval = read("EVERY", parse_duration)
        drop = read("DROP_ABANDONED", _flag) or False
        try:
            policy = SweepPolicy(read("KEEP_TURNS", int), read("IDLE_FOR", parse_duration), drop)
        except ValueError as error:
            raise ValueError(f"{ENV_PREFIX}*: {error}") from None
        return cls(interval, policy)


def _flag(text: str) -> bool:
    if text.lower() in ("1", "true", "yes", "on"):
        return True
    if text.lower() in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"say true or false, not {text!r}")


@asynccontextmanager
async def sweeping(
    checkpointer: BaseCheckpointSaver | Callable[[], BaseCheckpointSaver],
    schedule: SweepSchedule | None = None,
) -> AsyncIterator[None]:
    """A lifespan that runs a sweeper in the background while it is entered.

    ``schedule`` defaults to :meth:`SweepSchedule.from_env` (no variable set: no sweeper).
    ``checkpointer`` is a saver or a function returning one, called at each sweep (the Agent
    Server attaches its checkpointer after the app starts). Each sweep is logged on the
    ``mcp_state_versions.retention.sweep`` logger with what it removed; a sweep that fails is logged
    and the next one runs on schedule.
    """
    schedule = schedule if schedule is not None else SweepSchedule.from_env()
    if schedule is None:
        yield
        return
    task = asyncio.create_task(_sweep_forever(checkpointer, schedule))
    try:
        yield
    finally:
        task.cancel()
        with suppress(asyncio.CancelledError):
            await task


async def _sweep_forever(
    checkpointer: BaseCheckpointSaver | Callable[[], BaseCheckpointSaver],
    schedule: SweepSchedule,
) -> None:
    policy = schedule.policy
    logger.info(
        "sweeping every %gs: keep_turns=%s idle_for=%s drop_abandoned=%s",
        schedule.every,
        policy.keep_turns,
        policy.idle_for,
        policy.drop_abandoned,
    )
    while True:
        try:
            saver = (
                checkpointer if isinstance(checkpointer, BaseCheckpointSaver) else checkpointer()
            )
            report = await sweep(
                saver,
                keep_turns=policy.keep_turns,
                idle_for=policy.idle_for,
                drop_abandoned=policy.drop_abandoned,
            )
            logger.info(
                "swept %d threads: deleted %d idle, pruned %d, removed %d checkpoints "
                "(%d bytes) in %.2fs",
                report.threads_seen,
                report.threads_deleted,
                report.threads_pruned,
                report.checkpoints_removed,
                report.bytes_removed,
                report.seconds,
            )
        except Exception:  # the sweeper outlives a failed sweep; the next one runs on time
            logger.exception("a sweep failed; the next runs in %gs", schedule.every)
        await asyncio.sleep(schedule.every)
