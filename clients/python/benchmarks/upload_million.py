"""Uploads 1,000,000 anchors from a DataFrame to a real judgecal (started here on embedded
SQLite, or JUDGECAL_URL with JUDGECAL_API_KEY) and prints the wall time, the client's peak
memory beside the frame's own size, and the service's acknowledged count.

    scripts/python-client bench      # from the repository root; needs target/debug/judgecal
"""

from __future__ import annotations

import os
import resource
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from judgecal import Client  # noqa: E402
from judgecal.frames import upload_frame  # noqa: E402

N = int(os.environ.get("ROWS", 1_000_000))


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    rng = np.random.default_rng(0)
    j = rng.uniform(1, 5, N).round(3)
    frame = pd.DataFrame(
        {
            "item_id": [f"item-{i:07d}" for i in range(N)],
            "judge_score": j,
            "reference_score": np.clip(0.5 + 0.8 * j + rng.normal(0, 0.4, N), 1, 5).round(3),
            "group": [f"sys{i % 11}" for i in range(N)],
        }
    )
    frame_mib = frame.memory_usage(deep=True).sum() / 2**20
    with tempfile.TemporaryDirectory() as work:
        server = None
        url, key = os.environ.get("JUDGECAL_URL"), os.environ.get("JUDGECAL_API_KEY")
        if not url:
            from conftest import start

            server = start("sqlite", Path(work))
            url, key = server.url, server.key
        try:
            before = rss_mib()
            tracemalloc.start()
            started = time.monotonic()
            with Client(url, key, timeout=600) as jc:
                totals = upload_frame(jc, frame, judge="bench", rubric="coherence", progress=False)
                cell = next(c for c in jc.cells().cells if c.judge == "bench")
            seconds = time.monotonic() - started
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
        finally:
            if server:
                server.process.terminate()
                server.process.wait(timeout=30)
    print(
        f"{N:,} anchors from a DataFrame ({frame_mib:.0f} MiB in memory): {seconds:.1f} s, "
        f"{N / seconds:,.0f} anchors/s; client allocations during the upload peaked at "
        f"{peak / 2**20:.0f} MiB (tracemalloc), process RSS {before:.0f} MiB before and "
        f"{rss_mib():.0f} MiB at its peak; acknowledged {totals['inserted'] + totals['unchanged']:,} "
        f"(inserted {totals['inserted']:,}), the cell holds {cell.anchor_count:,}"
    )
    assert totals["inserted"] + totals["unchanged"] == N == cell.anchor_count


if __name__ == "__main__":
    main()
