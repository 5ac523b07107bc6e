"""Images of a cell's outputs for an MCP client: bounded in bytes, never unbounded base64.

Agent clients put a tool result's image into their model's context; a plot of 100 KB of base64
overflows some of them. An image within :data:`MAX_IMAGE_BYTES` goes as it is; a larger one is
downscaled (Pillow, when the server has it) until it fits; one that still does not fit, or
cannot be downscaled here, is kept in memory and sent as a resource link the client may read
(``resources/read``) if it wants the whole image.
"""

from __future__ import annotations

import base64
import binascii
import io
import secrets
from collections import OrderedDict
from dataclasses import dataclass

#: The largest image sent as image content, in decoded bytes (about 64 KB of base64).
MAX_IMAGE_BYTES = 48_000
#: Images sent with one result; further ones are only named in the outputs' text.
MAX_IMAGES = 4
#: Images kept for resource links (the oldest are forgotten first).
KEPT_IMAGES = 64
#: The URI template of a kept image.
IMAGE_URI = "jupyter-ci://image/{key}"
#: Tries at downscaling, each to about this share of the previous size in pixels.
_SHRINK_TRIES = 6
_SHRINK = 0.6


@dataclass(frozen=True)
class BoundedImage:
    """An image within the bound (``data`` base64), or a link to a kept one (``uri``)."""

    mime: str
    data: str | None = None
    uri: str | None = None
    size: int = 0
    #: Whether the image was made smaller to fit.
    downscaled: bool = False


class ImageStore:
    """Images too large to send, kept for their resource links."""

    def __init__(self, limit: int = KEPT_IMAGES) -> None:
        self.limit = limit
        self._images: OrderedDict[str, tuple[str, bytes]] = OrderedDict()

    def keep(self, mime: str, data: bytes) -> str:
        """Keep an image; returns its URI."""
        key = secrets.token_urlsafe(12)
        self._images[key] = (mime, data)
        while len(self._images) > self.limit:
            self._images.popitem(last=False)
        return IMAGE_URI.format(key=key)

    def get(self, key: str) -> tuple[str, bytes] | None:
        """A kept image's type and bytes (None when forgotten or never kept)."""
        return self._images.get(key)


def bound_image(
    mime: str, b64: str, store: ImageStore, max_bytes: int = MAX_IMAGE_BYTES
) -> BoundedImage | None:
    """``b64`` (an nbformat image output's data) as image content within ``max_bytes``, or a
    link to it once kept in ``store``; None when it is not valid base64."""
    try:
        raw = base64.b64decode("".join(b64.split()), validate=True)
    except (binascii.Error, ValueError):
        return None
    if len(raw) <= max_bytes:
        return BoundedImage(mime, base64.b64encode(raw).decode("ascii"), size=len(raw))
    smaller = downscale(raw, max_bytes)
    if smaller is not None:
        shrunk_mime, shrunk = smaller
        encoded = base64.b64encode(shrunk).decode("ascii")
        return BoundedImage(shrunk_mime, encoded, size=len(shrunk), downscaled=True)
    return BoundedImage(mime, uri=store.keep(mime, raw), size=len(raw))


def downscale(raw: bytes, max_bytes: int) -> tuple[str, bytes] | None:
    """The image made smaller (PNG, or JPEG for photos) until it fits ``max_bytes``; None
    when Pillow is not installed, the bytes are not an image it reads, or it never fits."""
    try:
        from PIL import Image, UnidentifiedImageError
    except ImportError:
        return None
    try:
        with Image.open(io.BytesIO(raw)) as opened:
            image = opened.convert("RGBA") if opened.mode not in ("RGB", "RGBA") else opened.copy()
    except (UnidentifiedImageError, OSError, ValueError):
        return None
    scale = (max_bytes / len(raw)) ** 0.5
    for _ in range(_SHRINK_TRIES):
        width = max(1, int(image.width * scale))
        height = max(1, int(image.height * scale))
        resized = image.resize((width, height), Image.Resampling.LANCZOS)
        for mime, encoded in (("image/png", _png(resized)), ("image/jpeg", _jpeg(resized))):
            if len(encoded) <= max_bytes:
                return mime, encoded
        scale *= _SHRINK
    return None


def _png(image: object) -> bytes:
    out = io.BytesIO()
    image.save(out, format="PNG", optimize=True)  # type: ignore[attr-defined]
    return out.getvalue()


def _jpeg(image: object) -> bytes:
    out = io.BytesIO()
    flat = image.convert("RGB")  # type: ignore[attr-defined]
    flat.save(out, format="JPEG", quality=80)
    return out.getvalue()
