"""An nbgrader preprocessor for feedback: tracebacks of test cells show their context lines,
which would print the hidden tests; keep only the error's type and message, bounded (a student's
exception class may have a name of megabytes)."""
from nbconvert.utils.base import NbConvertBase
from nbgrader.preprocessors import ClearHiddenTests, NbGraderPreprocessor
from traitlets import List

from .notebook import is_test_cell
from .text import bounded


class FeedbackStep(NbGraderPreprocessor):
    """An nbgrader preprocessor that takes nbconvert's `display_data_priority` setting: nbgrader's
    base class redeclares that trait as not configurable, so nbconvert's HTML exporter, which sets
    it for every NbConvertBase, made `generate_feedback` warn "Config option `display_data_priority`
    not recognized" once per preprocessor and page."""

    display_data_priority = List(NbConvertBase.display_data_priority.default_value).tag(config=True)


class QuietClearHiddenTests(FeedbackStep, ClearHiddenTests):
    """nbgrader's ClearHiddenTests, without that warning."""


class ShortTestTracebacks(FeedbackStep):
    def preprocess_cell(self, cell, resources, index):
        if is_test_cell(cell):
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    ename, evalue = bounded(output.get("ename", "Error")), bounded(output.get("evalue", ""))
                    output.update(ename=ename, evalue=evalue, traceback=[f"{ename}: {evalue}"])
        return cell, resources


class FigureAltText(FeedbackStep):
    """nbconvert's HTML template writes a notebook's figures (PNG, JPEG) without alternative text,
    and warns for each page ("Alternative text is missing on N image(s)"): each figure gets an
    HTML form with an alt text, which the exporter prefers to the bare image."""

    ALT = "A figure drawn by the notebook"

    def preprocess_cell(self, cell, resources, index):
        import html
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if "text/html" in data:
                continue
            for mime in ("image/png", "image/jpeg"):
                if mime in data:
                    image = "".join(data[mime]).replace("\n", "")
                    data["text/html"] = (f'<img src="data:{mime};base64,{html.escape(image)}" '
                                         f'alt="{self.ALT}">')
                    break
        return cell, resources
