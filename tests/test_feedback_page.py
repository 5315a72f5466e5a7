"""A student's feedback page on a phone (390 px wide), in light and dark mode: nothing scrolls
sideways, whatever a student's folder name or message holds."""
import pytest
from test_browser import browser  # noqa: F401 (the fixture: headless chromium, or a skip saying what to install)

from autograder.report import feedback_html
from autograder.results import CheckResult, ExerciseResult, Graded

PHONE = {"width": 390, "height": 844, "deviceScaleFactor": 3, "mobile": True}


def hostile_page(tmp_path):
    unbroken = "ValueError: " + "x" * 600 + " (in softmax, code cell 3, line 2)"
    values = "softmax(float64 array of shape (2, 3), axis=0) returned " + "[0.33333333, 0.33333333]" * 10
    graded = Graded("a-folder-name-" + "y" * 200, "01-weights",
                    [ExerciseResult("weighted_average_" + "z" * 60, 4.0,
                                    [CheckResult("random inputs of many shapes " + "w" * 80, 0.0, 2.0, unbroken),
                                     CheckResult("stable", 0.0, 2.0, values + "\nsecond line"),
                                     CheckResult("ties", 0.0, 0.0, ran=False)])],
                    notes=["code cell 4 raised " + unbroken])
    path = tmp_path / "01-weights.html"
    path.write_text(feedback_html(graded))
    return path


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_feedback_page_fits_a_phone(scheme, browser, tmp_path):  # noqa: F811
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", PHONE)
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": scheme}]})
    try:
        browser.get(hostile_page(tmp_path).as_uri())
        width, viewport, background, total = browser.execute_script(
            "return [document.documentElement.scrollWidth, window.innerWidth,"
            " getComputedStyle(document.body).backgroundColor, document.querySelector('h1').textContent]")
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    assert viewport == PHONE["width"], "the page has no viewport tag: a phone lays it out 980 px wide"
    assert width <= viewport, f"the page scrolls sideways: {width} px wide on a {viewport} px screen"
    assert total == "01-weights: 0 / 4 points"
    assert (background == "rgb(18, 18, 18)") == (scheme == "dark")
