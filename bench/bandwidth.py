"""Measure this machine's memory read bandwidth: the physical floor for the vector scan.

A numba sum over a float64 array much larger than the caches reads every byte once, as
``kernels.cosine`` does, so its rate is the bandwidth the cosine kernel is judged against
(targets.md: "at least 70 % of the measured memory bandwidth"). The probe uses ``fastmath`` (a
measuring tool may reassociate the sum; the kernels may not) so it is limited by memory, not by
the add latency. It reports one thread and all numba threads; quote the larger.

Usage::

    python bench/bandwidth.py [--mib 1024] [--repeats 15]

or ``from bench.bandwidth import measure_bandwidth``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import numba
import numpy as np

# Same threading layer as kernels._jit, unless the user chose one (NUMBA_THREADING_LAYER).
if numba.config.THREADING_LAYER == "default":
    numba.config.THREADING_LAYER = "workqueue"


@numba.njit(fastmath=True, nogil=True, cache=True)
def _sum_serial(a):  # type: ignore[no-untyped-def]
    s = 0.0
    for i in range(a.shape[0]):
        s += a[i]
    return s


@numba.njit(fastmath=True, nogil=True, parallel=True, cache=True)
def _sum_parallel(a):  # type: ignore[no-untyped-def]
    s = 0.0
    for i in numba.prange(a.shape[0]):
        s += a[i]
    return s


def _median_seconds(func: Any, arr: np.ndarray, repeats: int) -> float:
    func(arr)  # compile / warm the pages
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        func(arr)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def measure_bandwidth(array: np.ndarray | None = None, mib: int = 1024, repeats: int = 15) -> dict[str, float]:
    """Return median read bandwidth in GB/s (1e9 bytes/s) for one thread and for all threads.

    Parameters
    ----------
    array : optional float64 array to read (e.g. the benchmark's vector matrix); by default a
        fresh ``mib`` MiB array of ones.
    mib : size of the default array in MiB; choose well above the last-level cache.
    repeats : timed passes per mode (the median is reported).

    Returns
    -------
    dict with ``serial_gbs``, ``parallel_gbs``, ``best_gbs``, ``bytes``, ``threads``.
    """
    if array is None:
        array = np.ones(mib * 1024 * 1024 // 8, dtype=np.float64)
    flat = np.ascontiguousarray(array, dtype=np.float64).reshape(-1)
    nbytes = float(flat.nbytes)
    serial = nbytes / _median_seconds(_sum_serial, flat, repeats) / 1e9
    parallel = nbytes / _median_seconds(_sum_parallel, flat, repeats) / 1e9
    return {
        "serial_gbs": serial,
        "parallel_gbs": parallel,
        "best_gbs": max(serial, parallel),
        "bytes": nbytes,
        "threads": float(numba.get_num_threads()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=1024, help="array size in MiB (default 1024)")
    parser.add_argument("--repeats", type=int, default=15, help="timed passes per mode (default 15)")
    args = parser.parse_args()
    result = measure_bandwidth(mib=args.mib, repeats=args.repeats)
    print(f"array {result['bytes'] / 2**20:.0f} MiB, numba {numba.__version__}, threads {int(result['threads'])}")
    print(f"read bandwidth, 1 thread:   {result['serial_gbs']:6.1f} GB/s")
    print(f"read bandwidth, {int(result['threads'])} threads:  {result['parallel_gbs']:6.1f} GB/s")


if __name__ == "__main__":
    main()
