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
