"""OpenAI-compatible serving of finished adapters: /v1/chat/completions and /v1/models."""

from __future__ import annotations

from fastapi import APIRouter

__all__ = ["router"]

router = APIRouter()
