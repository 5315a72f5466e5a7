"""Chapter 6's stated rules: LearnedKernelRegression's gradient."""
import math

import numpy as np

from ..sandbox.calls import StudentError
from .register import CheckFailure, stated
from .calling import describe


# ---- chapter 6: LearnedKernelRegression -------------------------------------------------------

@stated("06-nadaraya-watson", "LearnedKernelRegression", "trainable: the gradient of forward's output reaches "
        "log_bandwidth (no .item(), float() or .detach() on the way), with leave_one_out and without", weight=0.5)
def learned_gradient(student, rng):
    import torch
    x = torch.from_numpy(np.sort(rng.uniform(0, 5, 10)))
    y, x_query = torch.sin(x) + torch.from_numpy(rng.normal(0, 0.3, 10)), torch.from_numpy(rng.uniform(0, 5, 7))
    label = "LearnedKernelRegression(0.7)"
    for queries, leave_one_out in ((x_query, False), (x, True)):
        what = f"{label}(x_query {describe(queries)}, x_train {describe(x)}, y_train, leave_one_out={leave_one_out})"
        module = student.call("LearnedKernelRegression", 0.7, keep=True, _label=label)
        out = student.call(module, queries, x, y, leave_one_out=leave_one_out, keep=True, _label=label)
        try:
            student.call(student.call(out, method="sum", keep=True, _label=what), method="backward",
                         _label=f"{what}.sum()")
            parameter = student.call(module, "log_bandwidth", method="get_parameter", keep=True,
                                     _label=f"{label}.log_bandwidth")
            got = student.call(parameter, "grad", method="__getattribute__", _label=f"{label}.log_bandwidth.grad")
        except StudentError as error:
            raise CheckFailure(f"{error}: no gradient reaches log_bandwidth through forward, so fit could never "
                               "change it. Compute the scores from self.bandwidth as a tensor: no .item(), float(), "
                               ".detach() or torch.no_grad() on the way") from None
        # the derivative of the student's own forward (its output's sum) along log_bandwidth, by central
        # differences in float64 (error about 1e-10): no formula here, a detached path shows by itself
        values = []
        for sign in (1, -1):
            moved = student.call("LearnedKernelRegression", 0.7, keep=True, _label=label)
            student.call(moved, {"log_bandwidth": torch.tensor(math.log(0.7) + sign * GRADIENT_STEP,
                                                               dtype=torch.float64)}, method="load_state_dict")
            values.append(float(np.asarray(student.call(moved, queries, x, y, leave_one_out=leave_one_out,
                                                        _label=label), dtype=np.float64).sum()))
        numeric = (values[0] - values[1]) / (2 * GRADIENT_STEP)
        if got is None or not math.isclose(float(np.asarray(got, dtype=np.float64)), numeric, rel_tol=1e-5,
                                           abs_tol=1e-8):
            raise CheckFailure(f"{what}.sum().backward(): log_bandwidth.grad is {describe(got)}, expected "
                               f"{numeric:.6g}, the derivative of your forward's sum (moving log_bandwidth by "
                               f"+-{GRADIENT_STEP:g})" + (": no gradient reached it (.item(), float() or .detach() "
                                                          "of the bandwidth cut the graph)" if got is None else ""))


GRADIENT_STEP = 1e-6
