"""An nbgrader preprocessor for feedback: tracebacks of test cells show their context lines,
which would print the hidden tests; keep only the error's type and message, bounded (a student's
exception class may have a name of megabytes)."""
from nbgrader.preprocessors import NbGraderPreprocessor

from .notebook import is_test_cell
from .text import bounded


class ShortTestTracebacks(NbGraderPreprocessor):
    def preprocess_cell(self, cell, resources, index):
        if is_test_cell(cell):
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    ename, evalue = bounded(output.get("ename", "Error")), bounded(output.get("evalue", ""))
                    output.update(ename=ename, evalue=evalue, traceback=[f"{ename}: {evalue}"])
        return cell, resources


class FigureAltText(NbGraderPreprocessor):
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
