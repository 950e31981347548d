"""Routes of a thread as a whole: its turns and what retention kept of them."""

# No ``from __future__ import annotations``: FastAPI reads route annotations at runtime.
from fastapi import APIRouter

from ..history import retained_span
from .access import PROBLEMS, History, Thread
from .models import Turns
from .problems import RetainedTurns

__all__ = ["router"]

router = APIRouter(prefix="/threads", tags=["threads"])


@router.get("/{thread_id}/turns", responses=PROBLEMS, summary="Turns and retention")
async def list_turns(thread_id: str, present: Thread, history: History) -> Turns:
    index = await history.turns(thread_id)
    span = retained_span(index.retained)
    return Turns(
        thread_id=thread_id,
        total=index.total,
        retained=None if span is None else RetainedTurns(**span),
    )
