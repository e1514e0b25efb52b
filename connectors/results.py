"""An MCP tool result as the text the model reads (and the `output` or `error` the client sees)."""

from __future__ import annotations

import json

from mcp_types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)


def result_text(result: CallToolResult) -> str:
    """Text content as is; structured content as JSON when no text carries it; embedded text resources
    inline; images, audio, binary resources and links described, since the model reads only text."""
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, TextContent):
            parts.append(block.text)
        elif isinstance(block, ImageContent):
            parts.append(f"[image: {block.mime_type}, {len(block.data) * 3 // 4} bytes]")
        elif isinstance(block, AudioContent):
            parts.append(f"[audio: {block.mime_type}, {len(block.data) * 3 // 4} bytes]")
        elif isinstance(block, EmbeddedResource):
            resource = block.resource
            if isinstance(resource, TextResourceContents):
                parts.append(f"[resource {resource.uri}]\n{resource.text}")
            elif isinstance(resource, BlobResourceContents):
                parts.append(f"[resource {resource.uri}: {resource.mime_type or 'binary'}, {len(resource.blob) * 3 // 4} bytes]")
        elif isinstance(block, ResourceLink):
            parts.append(f"[resource link {block.uri}{': ' + block.name if block.name else ''}]")
    if result.structured_content is not None and not any(isinstance(b, TextContent) for b in result.content):
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts)
