"""The reference solutions agree with independent implementations, where one exists."""
import numpy as np
import pytest

from autograder import reference


def test_nadaraya_watson_equals_statsmodels_local_constant_kernel_regression():
    """statsmodels' KernelReg (local constant, Gaussian kernel, fixed bandwidth) is Nadaraya-Watson."""
    from statsmodels.nonparametric.kernel_regression import KernelReg
    ref = reference.load("06-nadaraya-watson")
    rng = np.random.default_rng(0)
    x = np.sort(rng.uniform(0, 5, 50))
    y = 2 * np.sin(x) + x ** 0.8 + rng.normal(0, 0.5, 50)
    queries = np.linspace(-1, 6, 77)
    for h in (0.05, 0.3, 1.0, 4.0):
        theirs = KernelReg([y], [x], var_type="c", reg_type="lc", bw=[h], rng=0).fit([queries])[0]
        np.testing.assert_allclose(ref.nadaraya_watson(queries, x, y, bandwidth=h), theirs, rtol=0, atol=1e-10)


@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_engel_data_ships_inside_the_statsmodels_package():
    from statsmodels.datasets import engel
    data = engel.load_pandas().data
    assert data.shape == (235, 2) and list(data.columns) == ["income", "foodexp"]
