"""A ``ByteSource`` (a local file read with pread, or an http(s) URL read with Range requests) as a
read-only, seekable binary file, for readers written against file objects such as ``zipfile``.

A torch ``.ckpt`` is a zip: its directory sits at the end and each tensor's bytes are found through
it, so a reader that can seek reads a 2-7 GB checkpoint at a URL without it ever being copied to the
SD card. Every read is a ``read_at`` of the source, so a dropped connection is retried where it
stopped (``HttpSource``'s own retries) rather than failing the read.
"""

from __future__ import annotations

import io

from frame.engine.io.sources import ByteSource

# Reads larger than this are split, so that a 250 MB tensor read into its own buffer never also
# holds a second copy of itself as one answer.
MAX_READ_BYTES = 8 << 20
BUFFER_BYTES = 1 << 20


class SourceFile(io.RawIOBase):
    """``source`` as a raw binary file. Closing it leaves the source open (several files may share
    one source; its owner closes it)."""

    def __init__(self, source: ByteSource) -> None:
        super().__init__()
        self.source = source
        self.name = source.location
        self._size = source.size()
        self._position = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self._size}[whence]
        if base + offset < 0:
            raise ValueError(f"{self.name}: a seek to {base + offset}, before the file's start")
        self._position = base + offset
        return self._position

    def readinto(self, buffer) -> int:  # type: ignore[override]
        view = memoryview(buffer).cast("B")
        length = min(len(view), MAX_READ_BYTES, max(0, self._size - self._position))
        if length == 0:
            return 0
        data = self.source.read_at(self._position, length)
        view[:length] = memoryview(data).cast("B")
        self._position += length
        return length


def open_source(source: ByteSource) -> io.BufferedReader:
    """``source`` as a buffered, seekable binary file (what ``zipfile.ZipFile`` takes)."""
    return io.BufferedReader(SourceFile(source), BUFFER_BYTES)
