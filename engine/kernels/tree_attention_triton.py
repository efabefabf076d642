"""Triton kernels behind `engine.kernels.tree_attention` (imported only when the Triton path runs).

Layout of the work:
- One program owns BLOCK_M "rows" of one KV head: the G = H / KV query heads that share that KV head
  are packed into the row dimension (row r -> node t0 + r // G, head kv * G + r % G), so every K/V
  block is loaded once for the whole group and small head counts still fill a tensor-core tile.
- The key range [0, past + T) may be split over several programs (grid axis 2) (flash-decoding) when there are too few
  row blocks to fill the GPU; each split writes its normalised partial output with its running max and
  sum, and `_combine` merges them in one more launch.
- Past keys need no mask (every query sees them). Tree keys test one bit of the packed ancestor mask:
  bits[t, c // 32] >> (c % 32) & 1 (int32 words, row-major [T, W]; BLOCK_N a multiple of 32, so key
  blocks in the tree part cover whole words); tree columns after a block's last
  node are skipped, since nodes come in topological order (the mask is lower-triangular).
- TREE = False (no mask given): the queries see rows [0, past) only, and the tree loop is empty.
- `past` is either a runtime int (PAST_IS_PTR = False) or read from a 0-dim int device tensor
  (PAST_IS_PTR = True), so one captured CUDA graph can serve every context length.

The functions are plain definitions: tree_attention.py wraps them with `triton.jit` on first use, once per
mode (compiled, or interpreted under TRITON_INTERPRET=1), because `triton.jit` decides at decoration time.
"""

import triton.language as tl


def tree_attention_fwd(
    Q, K, V, Bits, Past, Out, PartO, PartML,
    past_int, T, W, qk_scale,
    sqn, sqt, sqh, sqd,
    skn, sks, skh, skd,
    svn, svs, svh, svd,
    son, sot, soh, sod,
    HEADS: tl.constexpr, KV_HEADS: tl.constexpr, G: tl.constexpr, HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
    SPLIT: tl.constexpr, PAST_IS_PTR: tl.constexpr, IEEE: tl.constexpr, TREE: tl.constexpr, GDC: tl.constexpr,
):
    if GDC:  # programmatic dependent launch (engine/kernels/pdl.py)
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    pid_m = tl.program_id(0)
    pid_nkv = tl.program_id(1)
    split = tl.program_id(2)
    splits = tl.num_programs(2)
    n = pid_nkv // KV_HEADS
    kvh = pid_nkv % KV_HEADS

    if PAST_IS_PTR:
        past = tl.load(Past).to(tl.int32)
    else:
        past = past_int
    if TREE:
        total = past + T
    else:  # no tree columns: rows [0, past) are all there is
        total = past

    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    t = rows // G
    h = kvh * G + rows % G
    row_ok = t < T
    d = tl.arange(0, BLOCK_D)
    d_ok = d < HEAD_DIM

    q_ptrs = Q + n * sqn + t[:, None] * sqt + h[:, None] * sqh + d[None, :] * sqd
    q = tl.load(q_ptrs, mask=row_ok[:, None] & d_ok[None, :], other=0.0)

    # This split's share of the keys, in whole BLOCK_N blocks.
    chunk = tl.cdiv(tl.cdiv(total, splits), BLOCK_N) * BLOCK_N
    lo = split * chunk
    hi = tl.minimum(lo + chunk, total)

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    cols = tl.arange(0, BLOCK_N)
    k_base = K + n * skn + kvh * skh
    v_base = V + n * svn + kvh * svh

    # Past keys: visible to every row, only the range end needs a mask.
    past_hi = tl.minimum(hi, past)
    for start in range(lo, past_hi, BLOCK_N):
        j = start + cols
        j_ok = j < past_hi
        k = tl.load(k_base + j[None, :] * sks + d[:, None] * skd, mask=j_ok[None, :] & d_ok[:, None], other=0.0)
        if IEEE:
            qk = tl.dot(q, k, input_precision="ieee")
        else:
            qk = tl.dot(q, k)
        qk = tl.where(j_ok[None, :], qk * qk_scale, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        p = tl.exp2(qk - m_safe[:, None])
        alpha = tl.exp2(m_i - m_safe)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_base + j[:, None] * svs + d[None, :] * svd, mask=j_ok[:, None] & d_ok[None, :], other=0.0)
        if IEEE:
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision="ieee")
        else:
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new

    # Tree keys: one bit of the packed ancestor mask per (node, tree column). Ancestors come before their
    # descendants (parents[i] < i), so no row of this block sees a tree column past its last node.
    # Blocks start at tree columns that are multiples of BLOCK_N (itself a multiple of 32), so a block
    # covers whole words: each row loads its BLOCK_N // 32 words once instead of one word per column.
    if TREE:  # (without a mask there are no tree columns)
        t_last = tl.minimum((pid_m * BLOCK_M + BLOCK_M - 1) // G, T - 1)
        tree_lo = tl.maximum(lo, past)
        tree_hi = tl.minimum(hi, past + t_last + 1)
        c_lo = ((tree_lo - past) // BLOCK_N) * BLOCK_N
        c_hi = tree_hi - past
        for c0 in range(c_lo, c_hi, BLOCK_N):
            j = past + c0 + cols
            j_ok = (j >= tree_lo) & (j < tree_hi)
            word = tl.zeros([BLOCK_M, BLOCK_N], tl.int32)
            for i in tl.static_range(BLOCK_N // 32):
                w_i = tl.load(Bits + t * W + c0 // 32 + i, mask=row_ok & (c0 // 32 + i < W), other=0)
                word = tl.where((cols // 32 == i)[None, :], w_i[:, None], word)
            vis = (((word >> (cols % 32)[None, :]) & 1) != 0) & j_ok[None, :]
            k = tl.load(k_base + j[None, :] * sks + d[:, None] * skd, mask=j_ok[None, :] & d_ok[:, None], other=0.0)
            if IEEE:
                qk = tl.dot(q, k, input_precision="ieee")
            else:
                qk = tl.dot(q, k)
            qk = tl.where(vis, qk * qk_scale, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(qk, 1))
            m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
            p = tl.exp2(qk - m_safe[:, None])
            alpha = tl.exp2(m_i - m_safe)
            l_i = l_i * alpha + tl.sum(p, 1)
            v = tl.load(v_base + j[:, None] * svs + d[None, :] * svd, mask=j_ok[:, None] & d_ok[None, :], other=0.0)
            if IEEE:
                acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision="ieee")
            else:
                acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
            m_i = m_new

    out = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]
    if not SPLIT:
        o_ptrs = Out + n * son + t[:, None] * sot + h[:, None] * soh + d[None, :] * sod
        tl.store(o_ptrs, out.to(Out.dtype.element_ty), mask=row_ok[:, None] & d_ok[None, :])
    else:
        # Partials are contiguous [splits, N, T, H, (hd | 2)]: PartO holds outputs, PartML (max, sum).
        flat = (split * (tl.num_programs(1) // KV_HEADS) + n) * T * HEADS + t * HEADS + h
        tl.store(PartO + flat[:, None] * HEAD_DIM + d[None, :], out, mask=row_ok[:, None] & d_ok[None, :])
        tl.store(PartML + flat * 2, m_i, mask=row_ok)
        tl.store(PartML + flat * 2 + 1, l_i, mask=row_ok)


def combine(
    PartO, PartML, Out, R, T, splits,
    son, sot, soh, sod,
    HEADS: tl.constexpr, HEAD_DIM: tl.constexpr,
    BLOCK_R: tl.constexpr, BLOCK_D: tl.constexpr, GDC: tl.constexpr,
):
    """Merge the `splits` partial outputs of R = N * T * H rows (log-sum-exp weights, base 2)."""
    if GDC:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    row_ok = rows < R
    d = tl.arange(0, BLOCK_D)
    d_ok = d < HEAD_DIM
    m_max = tl.full([BLOCK_R], float("-inf"), tl.float32)
    for s in range(splits):
        m_max = tl.maximum(m_max, tl.load(PartML + (s * R + rows) * 2, mask=row_ok, other=float("-inf")))
    m_safe = tl.where(m_max == float("-inf"), 0.0, m_max)
    acc = tl.zeros([BLOCK_R, BLOCK_D], tl.float32)
    l_sum = tl.zeros([BLOCK_R], tl.float32)
    for s in range(splits):
        m_s = tl.load(PartML + (s * R + rows) * 2, mask=row_ok, other=float("-inf"))
        l_s = tl.load(PartML + (s * R + rows) * 2 + 1, mask=row_ok, other=0.0)
        w = tl.exp2(m_s - m_safe) * l_s
        o_ptrs = PartO + (s * R + rows)[:, None] * HEAD_DIM + d[None, :]
        o_s = tl.load(o_ptrs, mask=row_ok[:, None] & d_ok[None, :], other=0.0)
        acc += w[:, None] * o_s
        l_sum += w
    out = acc / tl.where(l_sum == 0.0, 1.0, l_sum)[:, None]
    n = rows // (T * HEADS)
    t = (rows // HEADS) % T
    h = rows % HEADS
    o_ptrs = Out + n[:, None] * son + t[:, None] * sot + h[:, None] * soh + d[None, :] * sod
    tl.store(o_ptrs, out.to(Out.dtype.element_ty), mask=row_ok[:, None] & d_ok[None, :])
