"""A websocket client that reads only when told to (for tests of a tab that stops reading).

Browsers' and tornado's clients read every message as it comes; this one speaks the protocol
(RFC 6455) over a plain asyncio stream, so that a test decides when, and whether, it reads.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import struct
from typing import Any
from urllib.parse import urlsplit


class RawSocket:
    """One websocket connection: ``send`` a JSON message, ``read`` a frame when asked."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def connect(cls, url: str, token: str) -> RawSocket:
        """Open ``url`` (``ws://host:port/path``) with the Jupyter token."""
        parts = urlsplit(url)
        reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
        key = base64.b64encode(os.urandom(16)).decode()
        writer.write(
            (
                f"GET {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
                "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                f"Authorization: token {token}\r\n\r\n"
            ).encode()
        )
        head = await reader.readuntil(b"\r\n\r\n")
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise ConnectionError(head.decode(errors="replace"))
        return cls(reader, writer)

    async def send(self, message: dict[str, Any]) -> None:
        """Send a text frame (masked, as a client must)."""
        payload = json.dumps(message).encode()
        mask = os.urandom(4)
        size = len(payload)
        if size < 126:
            header = struct.pack("!BB", 0x81, 0x80 | size)
        elif size < 1 << 16:
            header = struct.pack("!BBH", 0x81, 0x80 | 126, size)
        else:
            header = struct.pack("!BBQ", 0x81, 0x80 | 127, size)
        masked = bytes(byte ^ mask[i % 4] for i, byte in enumerate(payload))
        self.writer.write(header + mask + masked)
        await self.writer.drain()

    async def read(self) -> tuple[int, bytes]:
        """The next frame: its opcode and payload (``(-1, b"")`` at the end of the stream)."""
        try:
            first, second = await self.reader.readexactly(2)
            size = second & 0x7F
            if size == 126:
                (size,) = struct.unpack("!H", await self.reader.readexactly(2))
            elif size == 127:
                (size,) = struct.unpack("!Q", await self.reader.readexactly(8))
            return first & 0x0F, await self.reader.readexactly(size)
        except (asyncio.IncompleteReadError, ConnectionError):
            return -1, b""

    def close(self) -> None:
        """Drop the connection."""
        self.writer.close()
