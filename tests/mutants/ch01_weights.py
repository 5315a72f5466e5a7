"""Chapter 1: the mistakes students make with softmax, hardmax, averages and entropy."""

WRONG = {
    "softmax": {
        "no_max_shift": '''
def softmax(scores, axis=-1, temperature=1.0):
    exps = np.exp(np.asarray(scores) / temperature)
    return exps / exps.sum(axis=axis, keepdims=True)
''',
        "all_masked_gives_nan": '''
def softmax(scores, axis=-1, temperature=1.0):
    scores = np.asarray(scores) / temperature
    exps = np.exp(scores - scores.max(axis=axis, keepdims=True))
    return exps / exps.sum(axis=axis, keepdims=True)
''',
        "ignores_axis": '''
def softmax(scores, axis=-1, temperature=1.0):
    scores = np.asarray(scores, dtype=float) / temperature
    shift = scores.max(axis=-1, keepdims=True)
    shift = np.where(np.isfinite(shift), shift, 0)
    exps = np.exp(scores - shift)
    total = exps.sum(axis=-1, keepdims=True)
    return np.divide(exps, total, out=np.zeros_like(exps), where=total > 0)
''',
        "multiplies_by_temperature": '''
def softmax(scores, axis=-1, temperature=1.0):
    scores = np.asarray(scores) * temperature
    shift = scores.max(axis=axis, keepdims=True)
    shift = np.where(np.isfinite(shift), shift, 0)
    exps = np.exp(scores - shift)
    total = exps.sum(axis=axis, keepdims=True)
    return np.divide(exps, total, out=np.zeros_like(exps), where=total > 0)
''',
        "always_float64": '''
def softmax(scores, axis=-1, temperature=1.0):
    scores = np.asarray(scores, dtype=np.float64) / temperature
    shift = scores.max(axis=axis, keepdims=True)
    shift = np.where(np.isfinite(shift), shift, 0)
    exps = np.exp(scores - shift)
    total = exps.sum(axis=axis, keepdims=True)
    return np.divide(exps, total, out=np.zeros_like(exps), where=total > 0)
''',
    },
    "hardmax": {
        "ties_not_shared": '''
def hardmax(scores, axis=-1):
    scores = np.asarray(scores, dtype=float)
    best = np.expand_dims(np.argmax(scores, axis=axis), axis)
    out = np.zeros_like(scores)
    np.put_along_axis(out, best, 1.0, axis=axis)
    return out
''',
        "ignores_axis": '''
def hardmax(scores, axis=-1):
    scores = np.asarray(scores, dtype=float)
    is_best = (scores == scores.max(axis=-1, keepdims=True)) & (scores > -np.inf)
    count = is_best.sum(axis=-1, keepdims=True)
    return np.divide(is_best, count, out=np.zeros(scores.shape), where=count > 0)
''',
        "unnormalised_mask": '''
def hardmax(scores, axis=-1):
    scores = np.asarray(scores, dtype=float)
    return (scores == scores.max(axis=axis, keepdims=True)).astype(float)
''',
        "all_minus_inf_shared": '''
def hardmax(scores, axis=-1):
    scores = np.asarray(scores, dtype=float)
    is_best = scores == scores.max(axis=axis, keepdims=True)
    return is_best / is_best.sum(axis=axis, keepdims=True)
''',
    },
    "weighted_average": {
        "unweighted_mean": '''
def weighted_average(items, weights):
    return np.asarray(items).mean(axis=-2)
''',
        "dot_without_batch": '''
def weighted_average(items, weights):
    return np.dot(weights, items)
''',
        "sums_the_wrong_axis": '''
def weighted_average(items, weights):
    return (np.asarray(items) * np.asarray(weights)[..., None]).sum(axis=-1)
''',
        "upcasts_to_float64": '''
def weighted_average(items, weights):
    items = np.asarray(items, dtype=np.float64)
    return np.einsum("...n,...nd->...d", np.asarray(weights, dtype=np.float64), items)
''',
    },
    "entropy": {
        "sum_of_p_log_p": '''
def entropy(weights, axis=-1):
    return -np.sum(weights * np.log(weights))
''',
        "in_bits": '''
def entropy(weights, axis=-1):
    weights = np.asarray(weights)
    positive = weights > 0
    return -np.sum(np.where(positive, weights * np.log2(np.where(positive, weights, 1)), 0), axis=axis)
''',
        "zero_log_zero_is_nan": '''
def entropy(weights, axis=-1):
    weights = np.asarray(weights)
    return -np.sum(weights * np.log(weights), axis=axis)
''',
        "missing_minus_sign": '''
def entropy(weights, axis=-1):
    weights = np.asarray(weights)
    positive = weights > 0
    return np.sum(np.where(positive, weights * np.log(np.where(positive, weights, 1)), 0), axis=axis)
''',
        "ignores_axis": '''
def entropy(weights, axis=-1):
    weights = np.asarray(weights)
    positive = weights > 0
    return -np.sum(np.where(positive, weights * np.log(np.where(positive, weights, 1)), 0), axis=-1)
''',
    },
    "effective_count": {
        "inverse_participation_ratio": '''
def effective_count(weights, axis=-1):
    return 1.0 / np.sum(np.asarray(weights) ** 2, axis=axis)
''',
        "two_to_the_entropy": '''
def effective_count(weights, axis=-1):
    return 2.0 ** entropy(weights, axis=axis)
''',
        "counts_nonzero_weights": '''
def effective_count(weights, axis=-1):
    return np.count_nonzero(np.asarray(weights) > 0, axis=axis).astype(float)
''',
        "ignores_axis": '''
def effective_count(weights, axis=-1):
    return np.exp(entropy(weights))
''',
    },
}

# effective_count calls the student's entropy: a wrong entropy may cost points there too.
ALTERNATIVE = {
    "softmax": '''
def softmax(scores, axis=-1, temperature=1.0):
    z = np.moveaxis(np.asarray(scores), axis, -1)
    z = z / temperature if np.issubdtype(z.dtype, np.floating) else z.astype(float) / temperature
    out = np.zeros_like(z)
    for index in np.ndindex(z.shape[:-1]):
        row = z[index]
        if np.all(row == -np.inf):
            continue
        e = np.exp(row - row.max())
        out[index] = e / e.sum()
    return np.moveaxis(out, -1, axis)
''',
    "hardmax": '''
def hardmax(scores, axis=-1):
    s = np.asarray(scores)
    tiny = softmax(s.astype(s.dtype if np.issubdtype(s.dtype, np.floating) else float), axis=axis, temperature=1e-12)
    return tiny.round(12).astype(tiny.dtype)
''',
    "weighted_average": '''
def weighted_average(items, weights):
    return np.einsum("...n,...nd->...d", weights, items)
''',
    "entropy": '''
def entropy(weights, axis=-1):
    p = np.asarray(weights)
    logs = np.log(p, out=np.zeros_like(p, dtype=float), where=p > 0)
    return -(p * logs).sum(axis=axis)
''',
    "effective_count": '''
def effective_count(weights, axis=-1):
    return np.exp(entropy(weights, axis))
''',
}
