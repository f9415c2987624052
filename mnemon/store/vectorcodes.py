"""The int8 coding of vector rows: each row is ``scale · codes`` up to a residual whose relative norm
is kept, which bounds how far a coded cosine can be from the exact one (``kernels.quantized``).
Derived row by row like the norms, so an index codes its rows as it appends them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

CODE_MAX = 127  # int8 codes in [-127, 127]: symmetric, so negating a row negates its codes exactly
QUANTIZE_BLOCK = 16_384  # rows coded at once: bounds the float64 temporaries (~100 MB at d = 768)


def quantize(vectors: NDArray[np.float64]) -> tuple[NDArray[np.int8], NDArray[np.float64], NDArray[np.float64]]:
    """Code float64 rows ``vectors`` (m, d): ``(codes, scale_over_norm, residual)``.

    ``codes`` int8 (m, d) with ``vectors[i] ≈ scale_i · codes[i]`` (``scale_i = max|v_i| / 127``);
    ``scale_over_norm`` float64 (m,), ``scale_i / |v_i|`` (0 for a zero row); ``residual`` float64
    (m,), ``|v_i - scale_i·codes[i]| / |v_i|`` rounded up by two ulps (0 for a zero row): the
    ``r`` of ``kernels.quantized``'s bound. Each row depends on itself alone (no blocking effect).
    """
    import numpy as np

    vectors = np.asarray(vectors, dtype=np.float64)
    m, d = vectors.shape
    codes = np.empty((m, d), dtype=np.int8)
    mult = np.zeros(m, dtype=np.float64)
    resid = np.zeros(m, dtype=np.float64)
    for lo in range(0, m, QUANTIZE_BLOCK):
        block = vectors[lo : lo + QUANTIZE_BLOCK]
        hi = lo + len(block)
        scale = (np.max(np.abs(block), axis=1) if d else np.zeros(len(block))) / CODE_MAX
        inv = np.zeros_like(scale)
        np.divide(1.0, scale, out=inv, where=scale > 0.0)
        scaled = np.clip(np.rint(block * inv[:, None]), -CODE_MAX, CODE_MAX)
        codes[lo:hi] = scaled.astype(np.int8)
        error = block - scaled * scale[:, None]
        norm = np.sqrt(np.einsum("ij,ij->i", block, block))
        nonzero = norm > 0.0
        np.divide(scale, norm, out=mult[lo:hi], where=nonzero)
        part = np.zeros(len(block))
        np.divide(np.sqrt(np.einsum("ij,ij->i", error, error)), norm, out=part, where=nonzero)
        # the square root and the division round: the bound must not shrink by an ulp
        resid[lo:hi] = np.where(nonzero, np.nextafter(np.nextafter(part, np.inf), np.inf), 0.0)
    return codes, mult, resid

