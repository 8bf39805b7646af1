"""MemoryWatch: the process's memory in each step's metrics, one warning near the limit."""

from __future__ import annotations

import io
import mmap
import platform
import time

from webagent_r1.train.metrics import MemoryWatch, release_free_memory, total_memory_bytes


def test_metrics_follow_an_allocation() -> None:
    watch = MemoryWatch(out=io.StringIO())
    before = watch.metrics()
    assert 0 < before["sys/rss_gb"] <= before["sys/peak_rss_gb"]
    # 300 MB above the process's high-water mark (earlier tests may have raised it), touched
    # so it is resident: the peak must rise too
    above_peak = max(0.0, before["sys/peak_rss_gb"] - before["sys/rss_gb"]) * 1e9
    # an anonymous mapping of its own, so freeing it is an munmap whatever malloc does with
    # a freed block (an allocator may keep it for reuse)
    block = mmap.mmap(-1, int(above_peak) + 300 * 1024 * 1024)
    for i in range(0, len(block), 4096):
        block[i] = 1
    after = watch.metrics()
    assert after["sys/rss_gb"] >= before["sys/rss_gb"] + 0.25
    assert after["sys/peak_rss_gb"] >= before["sys/peak_rss_gb"] + 0.25
    block.close()  # the pages go back to the system; the high-water mark stays
    for _ in range(20):  # the kernel's RSS counter can lag a loaded machine's unmapping
        freed = watch.metrics()
        if freed["sys/rss_gb"] <= after["sys/rss_gb"] - 0.25:
            break
        time.sleep(0.1)
    assert freed["sys/rss_gb"] <= after["sys/rss_gb"] - 0.25
    assert freed["sys/peak_rss_gb"] >= after["sys/peak_rss_gb"] - 0.05  # kernel counters lag


def test_warns_once_past_the_fraction_and_never_below_it() -> None:
    assert total_memory_bytes() and total_memory_bytes() > 10**8
    quiet = io.StringIO()
    MemoryWatch(warn_fraction=1.0, out=quiet).metrics()
    assert quiet.getvalue() == ""
    loud = io.StringIO()
    watch = MemoryWatch(warn_fraction=1e-9, out=loud)
    watch.metrics()
    watch.metrics()
    text = loud.getvalue()
    assert text.count("warning:") == 1
    assert "train.token_budget" in text and "gradient_checkpointing" in text
    muted = io.StringIO()
    MemoryWatch(warn_fraction=1e-9, out=muted, enabled=False).metrics()
    assert muted.getvalue() == ""


def test_release_free_memory_hands_freed_heap_pages_back() -> None:
    watch = MemoryWatch(out=io.StringIO())
    before = watch.metrics()["sys/rss_gb"]
    # 64 KB blocks sit on the C heap (below glibc's mmap threshold); the last one, kept,
    # pins the heap's top, so freeing the others leaves their pages resident.
    blocks = [bytearray(b"x" * 65536) for _ in range(5000)]
    keep = blocks[-1]
    del blocks
    held = watch.metrics()["sys/rss_gb"]
    trimmed = release_free_memory()
    if platform.libc_ver()[0] != "glibc":
        assert trimmed is False  # nothing to call: a no-op, not an error
        return
    assert trimmed is True
    assert release_free_memory() is True  # the library is loaded once, then reused
    if held - before >= 0.25:  # glibc kept them (another allocator may have freed them)
        released = watch.metrics()["sys/rss_gb"]
        assert released <= held - 0.2, (before, held, released)
    assert keep[0] == ord("x")
