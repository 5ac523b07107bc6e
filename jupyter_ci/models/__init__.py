"""Access to language models: one small interface, implemented through litellm (imported lazily)."""

from .base import Model, ModelReply, TokenUsage, ToolCallRequest

__all__ = ["Model", "ModelReply", "TokenUsage", "ToolCallRequest"]
