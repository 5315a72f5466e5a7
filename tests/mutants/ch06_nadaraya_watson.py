"""Chapter 6: the slips of kernels, kernel regression, leave-one-out and a learned bandwidth."""

_NW = '''
def nadaraya_watson(x_query, x_train, y_train, kernel=gaussian_kernel, bandwidth=1.0):
    x_query, x_train, y_train = (np.asarray(a, dtype=np.float64) for a in (x_query, x_train, y_train))
    weights = {weights}
    total = weights.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        estimate = {estimate}
    return estimate
'''
_DIVIDE = "(weights @ y_train.reshape(len(x_train), -1) / total[:, None]).reshape((len(x_query),) + y_train.shape[1:])"

_WEIGHTS = '''
def nw_attention_weights(x_query, x_train, bandwidth):
    x_query, x_train = np.asarray(x_query, dtype=np.float64), np.asarray(x_train, dtype=np.float64)
    scores = {scores}
    {shift}
    weights = np.exp(scores)
    return weights / weights.sum(axis={axis}, keepdims=True)
'''
_SCORES = "-((x_query[:, None] - x_train[None, :]) ** 2) / (2 * bandwidth ** 2)"
_SHIFT = "scores = scores - scores.max(axis=1, keepdims=True)"

_LOO = '''
def loo_cv_score(x, y, bandwidth, kernel=gaussian_kernel):
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    weights = kernel((x[:, None] - x[None, :]) / bandwidth)
    {leave_out}
    total = weights.sum(axis=1)
    {empty}
    return {score}
'''
_LEAVE_OUT = "np.fill_diagonal(weights, 0.0)"
_EMPTY = "if np.any(total <= 0):\n        return np.inf"
_MSE = "np.mean((y - weights @ y / total) ** 2)"


def _learned(scores="-(x_query[:, None] - x_train[None, :]) ** 2 / (2 * self.bandwidth ** 2)",
             mask="scores = scores.masked_fill(torch.eye(len(x_train), dtype=torch.bool), -math.inf)",
             parameter="nn.Parameter(torch.tensor(math.log(bandwidth), dtype=torch.float64))",
             optimizer="torch.optim.Adam(self.parameters(), lr=lr)", loo="True",
             step="optimizer.zero_grad()\n            loss.backward()\n            optimizer.step()\n            losses.append(loss.item())"):
    return f'''
class LearnedKernelRegression(nn.Module):
    def __init__(self, bandwidth=1.0):
        super().__init__()
        self.log_bandwidth = {parameter}

    @property
    def bandwidth(self):
        return self.log_bandwidth.exp()

    def forward(self, x_query, x_train, y_train, leave_one_out=False):
        scores = {scores}
        if leave_one_out:
            {mask}
        return torch.softmax(scores, dim=-1) @ y_train

    def fit(self, x, y, steps=100, lr=0.05):
        optimizer = {optimizer}
        losses = []
        for _ in range(steps):
            loss = ((self(x, x, y, leave_one_out={loo}) - y) ** 2).mean()
            {step}
        return losses
'''


WRONG = {
    "gaussian_kernel": {
        "no_minus_sign": "def gaussian_kernel(u):\n    return np.exp(np.asarray(u, dtype=float) ** 2 / 2) / math.sqrt(2 * math.pi)\n",
        "no_normalising_constant": "def gaussian_kernel(u):\n    return np.exp(-np.asarray(u, dtype=float) ** 2 / 2)\n",
        "variance_one_half": "def gaussian_kernel(u):\n    return np.exp(-np.asarray(u, dtype=float) ** 2) / math.sqrt(math.pi)\n",
    },
    "boxcar_kernel": {
        "edge_excluded": "def boxcar_kernel(u):\n    return np.where(np.abs(u) < 1, 1.0, 0.0)\n",
        "returns_booleans": "def boxcar_kernel(u):\n    return np.abs(np.asarray(u)) <= 1\n",
        "density_one_half": "def boxcar_kernel(u):\n    return np.where(np.abs(u) <= 1, 0.5, 0.0)\n",
    },
    "epanechnikov_kernel": {
        "negative_outside": "def epanechnikov_kernel(u):\n    u = np.asarray(u, dtype=float)\n    return 0.75 * (1 - u ** 2)\n",
        "no_three_quarters": "def epanechnikov_kernel(u):\n    u = np.asarray(u, dtype=float)\n    return np.where(np.abs(u) <= 1, 1 - u ** 2, 0.0)\n",
        "absolute_not_square": "def epanechnikov_kernel(u):\n    u = np.asarray(u, dtype=float)\n    return np.where(np.abs(u) <= 1, 0.75 * (1 - np.abs(u)), 0.0)\n",
    },
    "nadaraya_watson": {
        "not_normalised": _NW.format(weights="kernel((x_query[:, None] - x_train[None, :]) / bandwidth)",
                                     estimate="np.tensordot(weights, y_train, axes=1)"),
        "no_bandwidth": _NW.format(weights="kernel(x_query[:, None] - x_train[None, :])", estimate=_DIVIDE),
        "bandwidth_squared": _NW.format(weights="kernel((x_query[:, None] - x_train[None, :]) / bandwidth ** 2)",
                                        estimate=_DIVIDE),
        "zero_where_no_data": _NW.format(weights="kernel((x_query[:, None] - x_train[None, :]) / bandwidth)",
                                         estimate=_DIVIDE.replace("/ total[:, None]", "/ np.maximum(total, 1e-300)[:, None]")),
        "always_gaussian": _NW.format(weights="gaussian_kernel((x_query[:, None] - x_train[None, :]) / bandwidth)",
                                      estimate=_DIVIDE),
        "normalised_over_queries": _NW.format(weights="kernel((x_query[:, None] - x_train[None, :]) / bandwidth)",
                                              estimate=_DIVIDE.replace("total[:, None]", "weights.sum(axis=0).sum()")),
    },
    "nw_attention_weights": {
        "no_minus_sign": _WEIGHTS.format(scores=_SCORES[1:], shift=_SHIFT, axis=1),
        "bandwidth_not_squared": _WEIGHTS.format(scores=_SCORES.replace("bandwidth ** 2", "bandwidth"), shift=_SHIFT, axis=1),
        "no_two": _WEIGHTS.format(scores=_SCORES.replace("(2 * bandwidth ** 2)", "bandwidth ** 2"), shift=_SHIFT, axis=1),
        "not_stable": _WEIGHTS.format(scores=_SCORES, shift="", axis=1),
        "softmax_over_queries": _WEIGHTS.format(scores=_SCORES, shift=_SHIFT.replace("axis=1", "axis=0"), axis=0),
    },
    "loo_cv_score": {
        "keeps_the_point": _LOO.format(leave_out="", empty=_EMPTY, score=_MSE),
        "drops_every_duplicate": _LOO.format(leave_out="weights[x[:, None] == x[None, :]] = 0.0", empty=_EMPTY, score=_MSE),
        "skips_points_without_estimate": _LOO.format(
            leave_out=_LEAVE_OUT, empty="",
            score="np.nanmean((y - weights @ y / np.where(total > 0, total, np.nan)) ** 2)"),
        "sum_not_mean": _LOO.format(leave_out=_LEAVE_OUT, empty=_EMPTY, score=_MSE.replace("np.mean", "np.sum")),
        "root_mean_square": _LOO.format(leave_out=_LEAVE_OUT, empty=_EMPTY, score=f"np.sqrt({_MSE})"),
    },
    "select_bandwidth": {
        "largest_score": '''
def select_bandwidth(x, y, bandwidths, kernel=gaussian_kernel):
    scores = np.array([loo_cv_score(x, y, h, kernel) for h in bandwidths])
    return np.asarray(bandwidths, dtype=float)[np.argmax(scores)], scores
''',
        "sorts_the_grid": '''
def select_bandwidth(x, y, bandwidths, kernel=gaussian_kernel):
    bandwidths = np.sort(np.asarray(bandwidths, dtype=float))
    scores = np.array([loo_cv_score(x, y, h, kernel) for h in bandwidths])
    return bandwidths[np.argmin(scores)], scores
''',
        "in_sample_error": '''
def select_bandwidth(x, y, bandwidths, kernel=gaussian_kernel):
    scores = np.array([np.mean((y - nadaraya_watson(x, x, y, kernel, h)) ** 2) for h in bandwidths])
    return np.asarray(bandwidths, dtype=float)[np.argmin(scores)], scores
''',
        "ignores_kernel": '''
def select_bandwidth(x, y, bandwidths, kernel=gaussian_kernel):
    scores = np.array([loo_cv_score(x, y, h) for h in bandwidths])
    return np.asarray(bandwidths, dtype=float)[np.argmin(scores)], scores
''',
    },
    "LearnedKernelRegression": {
        "bandwidth_stored_raw": _learned(parameter="nn.Parameter(torch.tensor(float(bandwidth), dtype=torch.float64))"),
        "float32_parameter": _learned(parameter="nn.Parameter(torch.tensor(math.log(bandwidth)))"),
        "no_minus_sign": _learned(scores="(x_query[:, None] - x_train[None, :]) ** 2 / (2 * self.bandwidth ** 2)"),
        "bandwidth_not_squared": _learned(scores="-(x_query[:, None] - x_train[None, :]) ** 2 / (2 * self.bandwidth)"),
        "mask_sets_score_zero": _learned(mask="scores = scores.masked_fill(torch.eye(len(x_train), dtype=torch.bool), 0.0)"),
        "leave_one_out_ignored": _learned(mask="pass"),
        "fit_on_training_error": _learned(loo="False"),
        "fit_with_sgd": _learned(optimizer="torch.optim.SGD(self.parameters(), lr=lr)"),
        "loss_noted_after_step": _learned(step="optimizer.zero_grad()\n            loss.backward()\n            optimizer.step()\n"
                                          "            losses.append(((self(x, x, y, leave_one_out=True) - y) ** 2).mean().item())"),
        "no_zero_grad": _learned(step="loss.backward()\n            optimizer.step()\n            losses.append(loss.item())"),
    },
}

ALTERNATIVE = {
    "gaussian_kernel": '''
def gaussian_kernel(u):
    return np.exp(-0.5 * np.square(np.asarray(u, dtype=float))) * (2 * np.pi) ** -0.5
''',
    "boxcar_kernel": '''
def boxcar_kernel(u):
    return (np.abs(np.asarray(u, dtype=float)) <= 1).astype(np.float64)
''',
    "epanechnikov_kernel": '''
def epanechnikov_kernel(u):
    u = np.asarray(u, dtype=float)
    return 0.75 * np.clip(1 - u * u, 0, None)
''',
    "nadaraya_watson": '''
def nadaraya_watson(x_query, x_train, y_train, kernel=gaussian_kernel, bandwidth=1.0):
    # all M x N weights at once, as the text asks, by an outer difference instead of broadcasting
    y_train = np.asarray(y_train, dtype=float)
    w = kernel(np.subtract.outer(np.asarray(x_query, dtype=float), np.asarray(x_train, dtype=float)) / bandwidth)
    total = w.sum(axis=1).reshape((-1,) + (1,) * (y_train.ndim - 1))
    with np.errstate(invalid="ignore", divide="ignore"):   # no weight at all: 0/0 is the NaN asked for
        return np.tensordot(w, y_train, axes=(1, 0)) / total
''',
    "nw_attention_weights": '''
def nw_attention_weights(x_query, x_train, bandwidth):
    d = np.subtract.outer(np.asarray(x_query, dtype=float), np.asarray(x_train, dtype=float))
    scores = -0.5 * (d / bandwidth) ** 2
    log_norm = np.logaddexp.reduce(scores, axis=-1, keepdims=True)
    return np.exp(scores - log_norm)
''',
    "loo_cv_score": '''
def loo_cv_score(x, y, bandwidth, kernel=gaussian_kernel):
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    errors = []
    for i in range(len(x)):
        rest = np.arange(len(x)) != i
        estimate = nadaraya_watson(x[i:i + 1], x[rest], y[rest], kernel, bandwidth)[0]
        if np.isnan(estimate):
            return float("inf")
        errors.append((y[i] - estimate) ** 2)
    return float(np.mean(errors))
''',
    "select_bandwidth": '''
def select_bandwidth(x, y, bandwidths, kernel=gaussian_kernel):
    scores = [loo_cv_score(x, y, h, kernel=kernel) for h in bandwidths]
    best = min(range(len(scores)), key=scores.__getitem__)
    return float(bandwidths[best]), np.array(scores, dtype=np.float64)
''',
    "LearnedKernelRegression": '''
class LearnedKernelRegression(nn.Module):
    def __init__(self, bandwidth=1.0):
        super().__init__()
        self.log_bandwidth = nn.Parameter(torch.log(torch.tensor(bandwidth, dtype=torch.float64)))

    @property
    def bandwidth(self):
        return torch.exp(self.log_bandwidth)

    def forward(self, x_query, x_train, y_train, leave_one_out=False):
        distance = x_query.unsqueeze(-1) - x_train.unsqueeze(0)
        scores = -0.5 * (distance / self.bandwidth) ** 2
        if leave_one_out:
            scores = torch.where(torch.eye(len(x_train), dtype=torch.bool, device=scores.device), -torch.inf, scores)
        weights = torch.exp(scores - scores.logsumexp(dim=-1, keepdim=True))
        return torch.tensordot(weights, y_train, dims=1)

    def fit(self, x, y, steps=100, lr=0.05):
        optimizer = torch.optim.Adam([self.log_bandwidth], lr=lr)
        history = []
        for step in range(steps):
            optimizer.zero_grad()
            loss = torch.mean(torch.square(y - self.forward(x, x, y, leave_one_out=True)))
            history.append(float(loss))
            loss.backward()
            optimizer.step()
        return history
''',
}

# A tensor made on the CPU: right on CPU inputs, it loses the device check's points only.
WRONG["LearnedKernelRegression"]["cpu_leave_one_out_mask"] = '''
class LearnedKernelRegression(nn.Module):
    def __init__(self, bandwidth=1.0):
        super().__init__()
        self.log_bandwidth = nn.Parameter(torch.tensor(math.log(bandwidth), dtype=torch.float64))

    @property
    def bandwidth(self):
        return self.log_bandwidth.exp()

    def forward(self, x_query, x_train, y_train, leave_one_out=False):
        scores = -(x_query[:, None] - x_train[None, :]) ** 2 / (2 * self.bandwidth ** 2)
        if leave_one_out:
            scores = scores.masked_fill(torch.eye(len(x_train), dtype=torch.bool), -math.inf)
        return torch.softmax(scores, dim=-1) @ y_train

    def fit(self, x, y, steps=100, lr=0.05):
        optimizer = torch.optim.Adam(self.parameters(), lr=lr)
        losses = []
        for _ in range(steps):
            loss = ((self(x, x, y, leave_one_out=True) - y) ** 2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        return losses
'''

# Issue 24 §1: inputs and properties the first checks never varied. Each keeps its tensors on the
# input's device, so that it loses only what it is written to lose.
_MASK = "scores = scores.masked_fill(torch.eye(len(x_train), dtype=torch.bool, device=x_train.device), -math.inf)"
# A row's scores all far below another row's: the largest score of all is not each row's.
WRONG["nw_attention_weights"]["shift_by_the_largest_score_of_all"] = _WEIGHTS.format(
    scores=_SCORES, shift="scores = scores - scores.max()", axis=1)
# A tie between bandwidths: the first of them in the order given, not the smallest.
WRONG["select_bandwidth"]["smallest_bandwidth_among_ties"] = '''
def select_bandwidth(x, y, bandwidths, kernel=gaussian_kernel):
    scores = np.array([loo_cv_score(x, y, h, kernel) for h in bandwidths])
    return min(zip(scores, bandwidths))[1], scores
'''
# The bandwidth read as a Python number: the same values, and no gradient reaches log_bandwidth.
WRONG["LearnedKernelRegression"]["bandwidth_read_as_a_number"] = _learned(
    mask=_MASK, scores="-(x_query[:, None] - x_train[None, :]) ** 2 / (2 * math.exp(self.log_bandwidth.item()) ** 2)")
WRONG["LearnedKernelRegression"]["bandwidth_detached"] = _learned(
    mask=_MASK, scores="-(x_query[:, None] - x_train[None, :]) ** 2 / (2 * self.bandwidth.detach() ** 2)")
# Optimisers other than the one the recipe names.
WRONG["LearnedKernelRegression"]["fit_with_adamw"] = _learned(mask=_MASK, optimizer="torch.optim.AdamW(self.parameters(), lr=lr)")
WRONG["LearnedKernelRegression"]["fit_with_amsgrad"] = _learned(mask=_MASK, optimizer="torch.optim.Adam(self.parameters(), lr=lr, amsgrad=True)")
WRONG["LearnedKernelRegression"]["a_new_adam_each_step"] = _learned(
    mask=_MASK, optimizer="None",
    step="optimizer = torch.optim.Adam(self.parameters(), lr=lr)\n            optimizer.zero_grad()\n"
         "            loss.backward()\n            optimizer.step()\n            losses.append(loss.item())")
WRONG["LearnedKernelRegression"]["fit_with_nadam"] = _learned(mask=_MASK, optimizer="torch.optim.NAdam(self.parameters(), lr=lr)")
WRONG["LearnedKernelRegression"]["fit_with_radam"] = _learned(mask=_MASK, optimizer="torch.optim.RAdam(self.parameters(), lr=lr)")
WRONG["LearnedKernelRegression"]["fit_with_adamax"] = _learned(mask=_MASK, optimizer="torch.optim.Adamax(self.parameters(), lr=lr)")
