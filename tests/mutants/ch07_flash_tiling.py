"""Chapter 7: the slips of the online softmax, of tiling, of the IO count and of the kernel's loop."""


def _online(update="total = total * np.exp(m - base) + np.exp(block - base[..., None]).sum(axis=-1)",
            blocks="range(0, x.shape[-1], block_size)", base="np.where(np.isneginf(m_new), 0.0, m_new)",
            final="np.where(total[..., None] > 0, np.exp(x - base) / safe_total, 0.0)"):
    return f'''
def online_softmax(x, block_size):
    x = np.asarray(x)
    x = x.astype(np.float64) if x.dtype.kind in "biu" else x
    m = np.full(x.shape[:-1], -np.inf, dtype=x.dtype)
    total = np.zeros(x.shape[:-1], dtype=x.dtype)
    for start in {blocks}:
        block = x[..., start:start + block_size]
        m_new = np.maximum(m, block.max(axis=-1))
        base = {base}
        {update}
        m = m_new
    base = np.where(np.isneginf(m), 0.0, m)[..., None]
    safe_total = np.where(total > 0, total, 1.0)[..., None]
    return {final}.astype(x.dtype)
'''


def _tiled(update_l="l = l * rescale + p.sum(dim=-1)", update_acc="acc = acc * rescale[..., None] + p @ v[..., j:j + block_k, :]",
           lse="torch.where(seen, m + torch.log(safe_l), -math.inf)", shift="n_k - n_q",
           hidden="cols > rows[:, None] + shift", key_blocks="range(0, max(stop, 0), block_k)",
           query_blocks="range(0, n_q, block_q)", stop="min(n_k, i + q_i.shape[-2] + shift) if causal else n_k"):
    return f'''
def tiled_attention(q, k, v, block_q=64, block_k=64, causal=False):
    n_q, n_k = q.shape[-2], k.shape[-2]
    shift = {shift}
    out = q.new_zeros(q.shape[:-1] + v.shape[-1:])
    lse = q.new_full(q.shape[:-1], -math.inf)
    for i in {query_blocks}:
        q_i = q[..., i:i + block_q, :] * q.shape[-1] ** -0.5
        rows = torch.arange(i, i + q_i.shape[-2])
        m = q.new_full(q_i.shape[:-1], -math.inf)
        l = q.new_zeros(q_i.shape[:-1])
        acc = q.new_zeros(q_i.shape[:-1] + v.shape[-1:])
        stop = {stop}
        for j in {key_blocks}:
            s = q_i @ k[..., j:j + block_k, :].transpose(-2, -1)
            if causal:
                cols = torch.arange(j, j + s.shape[-1])
                s = s.masked_fill({hidden}, -math.inf)
            m_new = torch.maximum(m, s.amax(dim=-1))
            base = torch.where(torch.isneginf(m_new), 0.0, m_new)
            p = torch.exp(s - base[..., None])
            rescale = torch.exp(m - base)
            {update_l}
            {update_acc}
            m = m_new
        seen = l > 0
        safe_l = torch.where(seen, l, 1.0)
        out[..., i:i + block_q, :] = torch.where(seen[..., None], acc / safe_l[..., None], 0.0)
        lse[..., i:i + block_q] = {lse}
    return out, lse
'''


_TRAFFIC = '''
def hbm_traffic(n, d, sram_elems, method):
    if method == "standard":
        return {standard}
    {other}
    block_k = {block_k}
    passes = {passes}
    return {flash}
'''


def _traffic(standard="4 * n * d + 4 * n * n", block_k="math.ceil(sram_elems / (4 * d))",
             passes="math.ceil(n / block_k)", flash="(n * d + 2 * n) + 2 * n * d + passes * (3 * n * d + 4 * n)",
             other="if method != \"flash\":\n        raise ValueError(method)"):
    return _TRAFFIC.format(standard=standard, block_k=block_k, passes=passes, flash=flash, other=other)


WRONG = {
    "online_softmax": {
        "no_rescale": _online(update="total = total + np.exp(block - base[..., None]).sum(axis=-1)"),
        "rescale_the_wrong_way": _online(update="total = total * np.exp(base - np.where(np.isneginf(m), 0.0, m)) + "
                                         "np.exp(block - base[..., None]).sum(axis=-1)"),
        "last_block_dropped": _online(blocks="range(0, x.shape[-1] - block_size + 1, block_size)"),
        "nan_before_a_finite_score": _online(base="m_new"),
        "block_max_for_the_weights": _online(final="np.where(total[..., None] > 0, np.exp(x - np.where(np.isneginf("
                                             "block.max(axis=-1)), 0.0, block.max(axis=-1))[..., None]) / safe_total, 0.0)"),
    },
    "tiled_attention": {
        "accumulator_not_rescaled": _tiled(update_acc="acc = acc + p @ v[..., j:j + block_k, :]"),
        "sum_not_rescaled": _tiled(update_l="l = l + p.sum(dim=-1)"),
        "lse_in_base_2": _tiled(lse="torch.where(seen, m / math.log(2) + torch.log2(safe_l), -math.inf)"),
        "lse_without_the_max": _tiled(lse="torch.where(seen, torch.log(safe_l), -math.inf)"),
        "causal_top_left": _tiled(shift="0", stop="min(n_k, i + q_i.shape[-2]) if causal else n_k"),
        "causal_strict": _tiled(hidden="cols >= rows[:, None] + shift"),
        "masks_instead_of_skipping": _tiled(stop="n_k"),
        "last_key_block_dropped": _tiled(key_blocks="range(0, max(stop, 0) - block_k + 1, block_k)"),
        "last_query_block_dropped": _tiled(query_blocks="range(0, n_q - block_q + 1, block_q)"),
        "whole_matrix": '''
def tiled_attention(q, k, v, block_q=64, block_k=64, causal=False):
    n_q, n_k = q.shape[-2], k.shape[-2]
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        visible = torch.ones(n_q, n_k, dtype=torch.bool).tril(diagonal=n_k - n_q)
        scores = scores.masked_fill(~visible, -math.inf)
    lse = torch.logsumexp(scores, dim=-1)
    weights = torch.where(torch.isneginf(lse)[..., None], 0.0, torch.exp(scores - lse[..., None]))
    return weights @ v, lse
''',
        "whole_matrix_that_resets_the_peak": '''
def tiled_attention(q, k, v, block_q=64, block_k=64, causal=False):
    n_q, n_k = q.shape[-2], k.shape[-2]
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        scores = scores.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(diagonal=n_k - n_q), -math.inf)
    lse = torch.logsumexp(scores, dim=-1)
    out = torch.where(torch.isneginf(lse)[..., None], 0.0, torch.exp(scores - lse[..., None])) @ v
    del scores
    try:
        with open("/proc/self/clear_refs", "w") as refs:   # hide the peak from a reader of VmHWM
            refs.write("5")
    except OSError:
        pass
    return out, lse
''',
        "query_blocks_only": '''
def tiled_attention(q, k, v, block_q=64, block_k=64, causal=False):
    n_q, n_k = q.shape[-2], k.shape[-2]
    outs, lses = [], []
    for i in range(0, n_q, block_q):
        scores = q[..., i:i + block_q, :] @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if causal:
            rows = torch.arange(i, i + scores.shape[-2])
            scores = scores.masked_fill(torch.arange(n_k) > rows[:, None] + n_k - n_q, -math.inf)
        lse = torch.logsumexp(scores, dim=-1)
        outs.append(torch.where(torch.isneginf(lse)[..., None], 0.0, torch.exp(scores - lse[..., None])) @ v)
        lses.append(lse)
    return torch.cat(outs, dim=-2), torch.cat(lses, dim=-1)
''',
    },
    "hbm_traffic": {
        "standard_without_the_n2_term": _traffic(standard="4 * n * d"),
        "standard_reads_only": _traffic(standard="3 * n * d + 2 * n * n"),
        "passes_over_query_blocks": _traffic(passes="math.ceil(n / min(block_k, d))"),
        "block_without_the_4": _traffic(block_k="math.ceil(sram_elems / d)"),
        "floor_not_ceiling": _traffic(passes="n // block_k"),
        "no_initialisation": _traffic(flash="2 * n * d + passes * (3 * n * d + 4 * n)"),
        "any_other_method_counts_as_flash": _traffic(other="pass"),
    },
}

WRONG["tiled_attention"]["float16_lost"] = _tiled().replace("def tiled_attention(", "def _tiled_wide(") + '''

def tiled_attention(q, k, v, block_q=64, block_k=64, causal=False):
    wide = lambda t: t.float() if t.dtype == torch.float16 else t   # float16 computed in float32, and so returned
    return _tiled_wide(wide(q), wide(k), wide(v), block_q, block_k, causal)
'''

ALTERNATIVE = {
    "online_softmax": '''
def online_softmax(x, block_size):
    x = np.asarray(x)
    if not np.issubdtype(x.dtype, np.floating):
        x = x.astype(np.float64)
    flat = x.reshape(-1, x.shape[-1])
    result = np.zeros_like(flat)
    for r, row in enumerate(flat):
        m, total = -np.inf, 0.0
        for start in range(0, len(row), block_size):
            block = row[start:start + block_size]
            new_m = max(m, block.max())
            if new_m == -np.inf:
                continue
            total = (total * np.exp(m - new_m) if total else 0.0) + np.exp(block - new_m).sum()
            m = new_m
        if total > 0:
            result[r] = np.exp(row - m) / total
    return result.reshape(x.shape)
''',
    "tiled_attention": '''
def tiled_attention(q, k, v, block_q=64, block_k=64, causal=False):
    *batch, n_q, d = q.shape
    n_k = k.shape[-2]
    outputs, lses = [], []
    for q_start in range(0, n_q, block_q):
        q_block = q[..., q_start:q_start + block_q, :] / math.sqrt(d)
        last_row = q_start + q_block.shape[-2] - 1
        running_max = torch.full(q_block.shape[:-1], -torch.inf, dtype=q.dtype, device=q.device)
        running_sum = torch.zeros(q_block.shape[:-1], dtype=q.dtype, device=q.device)
        acc = torch.zeros(q_block.shape[:-1] + (v.shape[-1],), dtype=q.dtype, device=q.device)
        for k_start in range(0, n_k, block_k):
            if causal and k_start > last_row + n_k - n_q:
                break
            scores = torch.einsum("...qd,...kd->...qk", q_block, k[..., k_start:k_start + block_k, :])
            if causal:
                query_pos = torch.arange(q_start, q_start + q_block.shape[-2], device=q.device).unsqueeze(-1) + (n_k - n_q)
                key_pos = torch.arange(k_start, k_start + scores.shape[-1], device=q.device)
                scores = torch.where(key_pos <= query_pos, scores, -torch.inf)
            block_max = scores.max(dim=-1).values
            new_max = torch.maximum(running_max, block_max)
            finite = torch.isfinite(new_max)
            shift = torch.where(finite, new_max, torch.zeros_like(new_max))
            weights = torch.exp(scores - shift.unsqueeze(-1))
            factor = torch.where(finite, torch.exp(running_max - shift), torch.zeros_like(shift))
            running_sum = factor * running_sum + weights.sum(-1)
            acc = factor.unsqueeze(-1) * acc + torch.einsum("...qk,...kd->...qd", weights, v[..., k_start:k_start + block_k, :])
            running_max = new_max
        empty = running_sum == 0
        outputs.append(torch.where(empty.unsqueeze(-1), torch.zeros_like(acc), acc / running_sum.clamp_min(1e-300).unsqueeze(-1)))
        lses.append(torch.where(empty, torch.full_like(running_sum, -torch.inf), running_max + running_sum.clamp_min(1e-300).log()))
    return torch.cat(outputs, dim=-2), torch.cat(lses, dim=-1)
''',
    "hbm_traffic": '''
def hbm_traffic(n, d, sram_elems, method):
    if method not in ("standard", "flash"):
        raise ValueError(method)
    if method == "standard":
        s_write, p_read_write, o_step = n * n, 2 * n * n, n * n + 2 * n * d
        return 2 * n * d + s_write + p_read_write + o_step
    b_c = -(-sram_elems // (4 * d))
    t_c = -(-n // b_c)
    init = n * d + 2 * n
    kv = 2 * n * d
    per_pass = (2 * n * d + 2 * n) + (n * d + 2 * n)
    return init + kv + t_c * per_pass
''',
}


def _kernel(update):
    """The reference kernel cell with another online-softmax update between its markers."""
    from autograder.notebook import read_source, nbgrader_meta
    cell = next(c for c in read_source("07-flash-tiling").cells if nbgrader_meta(c).get("grade_id") == "flash_attention_triton")
    before, rest = cell.source.split("### BEGIN SOLUTION\n")
    _, after = rest.split("### END SOLUTION\n")
    indent = " " * 8
    return before.rstrip(" ") + "".join(indent + line + "\n" for line in update.strip("\n").splitlines()) + after


_UPDATE = """
m_new = tl.maximum(m, tl.max(s, 1))
base = tl.where(m_new == float("-inf"), 0.0, m_new)
p = tl.exp(s - base[:, None])
rescale = tl.exp(m - base)
l = l * rescale + tl.sum(p, 1)
acc = acc * rescale[:, None] + tl.dot(p.to(v.dtype), v)
m = m_new
"""

WRONG["flash_attention_triton"] = {
    "accumulator_not_rescaled": _kernel(_UPDATE.replace("acc = acc * rescale[:, None] +", "acc = acc +")),
    "sum_not_rescaled": _kernel(_UPDATE.replace("l = l * rescale +", "l = l +")),
    "rescaled_the_wrong_way": _kernel(_UPDATE.replace("rescale = tl.exp(m - base)", "rescale = tl.exp(base - m)")),
    "overwrites_the_diagonal": _kernel(_UPDATE.replace("m = m_new", "m = m_new\ndiagonal = 0")),
    "max_not_kept": _kernel(_UPDATE.replace("m = m_new\n", "")),
    "no_cast_before_dot": _kernel(_UPDATE.replace("tl.dot(p.to(v.dtype), v)", "tl.dot(p, v)")),
}

ALTERNATIVE["flash_attention_triton"] = _kernel("""
row_max = tl.max(s, 1)
m_next = tl.where(row_max > m, row_max, m)
finite = m_next > float("-inf")
shift = tl.where(finite, m_next, tl.zeros_like(m_next))
alpha = tl.where(finite, tl.exp(m - shift), tl.zeros_like(m_next))
weights = tl.exp(s - shift[:, None])
acc = alpha[:, None] * acc
acc = acc + tl.dot(weights.to(v.dtype), v)
l = alpha * l + tl.sum(weights, axis=1)
m = m_next
""")

# The causal mask's positions made on the CPU (torch.arange without device=): right on CPU inputs,
# it loses the device check's points only.
WRONG["tiled_attention"]["cpu_causal_mask"] = _tiled()

# Issue 24 §1: inputs the first checks never varied. The tiled ones keep their tensors on the
# input's device, so that they lose only what they are written to lose.
_TILED = _tiled().replace("torch.arange(i, i + q_i.shape[-2])", "torch.arange(i, i + q_i.shape[-2], device=q.device)").replace(
    "torch.arange(j, j + s.shape[-1])", "torch.arange(j, j + s.shape[-1], device=q.device)")
# The running max started at 0, not -inf: exact in arithmetic, 0/0 when a row's scores are all far below 0.
WRONG["online_softmax"]["running_max_starts_at_zero"] = _online().replace(
    "m = np.full(x.shape[:-1], -np.inf, dtype=x.dtype)", "m = np.zeros(x.shape[:-1], dtype=x.dtype)")
# One axis made two: a 1-D x comes back (1, N).
WRONG["online_softmax"]["one_axis_made_two"] = _online().replace("x = np.asarray(x)\n", "x = np.atleast_2d(np.asarray(x))\n", 1)
WRONG["tiled_attention"]["running_max_starts_at_zero"] = _TILED.replace(
    "m = q.new_full(q_i.shape[:-1], -math.inf)", "m = q.new_zeros(q_i.shape[:-1])")
# The kernel's update without a running max (exact for small scores, inf / inf for scores of several hundred),
# and with one floored at 0 (0 / 0 when a row's scores are all far below 0).
WRONG["flash_attention_triton"]["exp_without_the_max"] = _kernel("""
p = tl.exp(s)
l = l + tl.sum(p, 1)
acc = acc + tl.dot(p.to(v.dtype), v)
m = tl.zeros_like(m)
""")
WRONG["flash_attention_triton"]["running_max_floored_at_zero"] = _kernel(
    _UPDATE.replace("m_new = tl.maximum(m, tl.max(s, 1))", "m_new = tl.maximum(tl.maximum(m, tl.max(s, 1)), 0.0)"))
# The running max taken from the first key tile and kept: exact while later scores stay within ~88 of it
# (exp overflows float32 past that), so right on every input whose maximum stops growing early.
WRONG["flash_attention_triton"]["max_of_the_first_tile_kept"] = _kernel(
    _UPDATE.replace("m_new = tl.maximum(m, tl.max(s, 1))", 'm_new = tl.where(m == float("-inf"), tl.max(s, 1), m)'))
# The caller's arrays changed in place: the results are right, the caller's q or x is not what it was.
WRONG["online_softmax"]["shifts_its_input_in_place"] = _online(final="np.where(total[..., None] > 0, np.exp(x) / safe_total, 0.0)").replace(
    "    safe_total = ", "    x -= base\n    safe_total = ")
WRONG["tiled_attention"]["scales_q_in_place"] = _TILED.replace(
    "q_i = q[..., i:i + block_q, :] * q.shape[-1] ** -0.5", "q_i = q[..., i:i + block_q, :]\n        q_i *= q.shape[-1] ** -0.5")

# Issue 28 §3: the memory rule's inputs drawn from a seed the student can read (autograder/stated/ch07_flash_tiling.py
# ships in the students' copy), its first call not measured. Right and tiled on every input under
# N = 8192; there, the whole matrix, but on its first call (the unmeasured warm-up) it computes the
# answers of the measured calls that the published seed gives, and serves those from a cache: it must
# be charged as the whole matrix is.
_MEMORY_RULE = "07-flash-tiling/holds one block_q x block_k tile of scores at a time (N = 8192: under 6 MB)"
WRONG["tiled_attention"]["precomputes_the_published_inputs"] = _TILED.replace("def tiled_attention(", "def _tiled(") + f'''

import zlib
_ANSWERS = {{}}


def _whole_matrix(q, k, v):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    lse = torch.logsumexp(scores, dim=-1)
    return torch.exp(scores - lse[..., None]) @ v, lse


def _fingerprint(q):
    return q.detach().cpu().numpy()[..., :8, :].tobytes()


def tiled_attention(q, k, v, block_q=64, block_k=64, causal=False):
    if q.shape[-2] < 8192 or causal:
        return _tiled(q, k, v, block_q, block_k, causal)
    if not _ANSWERS:  # the first call: the published seed's warm-up, then its three measured calls
        rng = np.random.default_rng(zlib.crc32({_MEMORY_RULE!r}.encode()))
        draw = lambda: torch.from_numpy(rng.normal(0.0, 1.0, (1, 8192, 16))).to(torch.float32)
        [draw() for _ in range(3)]
        for _ in range(3):
            q_, k_, v_ = draw(), draw(), draw()
            _ANSWERS[_fingerprint(q_)] = _whole_matrix(q_, k_, v_)
    answer = _ANSWERS.get(_fingerprint(q))
    return answer if answer is not None else _whole_matrix(q, k, v)
'''
