"""Stream callbacks and asyncio, as with Numba: stream.add_callback(fn, arg) and
`await stream.async_done()` while several streams scale their own chunk of an array."""
import asyncio
import threading

import numpy as np

import devarray as cuda

SRC = """
DV_KERNEL(scale, DV_ARRAY(float, a), float f, int n) {
  DV_BIND(float, a);
  int i = (int)dv_global_id(0);
  if (i < n) a[i] *= f;
}
"""
scale = cuda.Module(SRC, name="scale.dvk").get("scale")
CHUNKS, N = 4, 1 << 16
host = np.arange(CHUNKS * N, dtype=np.float32)
out = cuda.pinned_array(host.shape, np.float32)
finished = []  # (chunk, status), appended by the callbacks
lock = threading.Lock()


def chunk_done(stream, status, chunk):
    # Runs on a library thread once the work queued before it is done: keep it short and
    # do not call devarray here (no synchronize, no new work, no array released).
    with lock:
        finished.append((chunk, status))


async def process(stream, chunk):
    """Queue one chunk's copy in, kernel and copy out on `stream`, then await it."""
    part = slice(chunk * N, (chunk + 1) * N)
    d = cuda.to_device(host[part], stream=stream)
    scale[(N + 255) // 256, 256, stream](d, np.float32(chunk + 1), N)
    d.copy_to_host(out[part], stream=stream)
    stream.add_callback(chunk_done, chunk)
    # the event loop runs other coroutines meanwhile; the future resolves with the stream
    assert await stream.async_done() is stream
    # the callback queued before async_done has run, and the copy before it is complete
    assert (chunk, 0) in finished
    assert (out[part] == host[part] * (chunk + 1)).all()
    return chunk


async def main():
    streams = [cuda.stream() for _ in range(CHUNKS)]
    done = await asyncio.gather(*(process(s, i) for i, s in enumerate(streams)))
    assert done == list(range(CHUNKS))


asyncio.run(main())
assert sorted(finished) == [(i, 0) for i in range(CHUNKS)]
expected = host * np.repeat(np.arange(1, CHUNKS + 1, dtype=np.float32), N)
assert (out == expected).all()
print("%d streams, callbacks and asyncio on %s: ok" % (CHUNKS, cuda.current_context().backend))
