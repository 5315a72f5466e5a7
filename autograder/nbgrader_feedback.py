"""An nbgrader preprocessor for feedback: tracebacks of test cells show their context lines,
which would print the hidden tests; keep only the error's type and message."""
from nbgrader.preprocessors import NbGraderPreprocessor

from .notebook import is_test_cell


class ShortTestTracebacks(NbGraderPreprocessor):
    def preprocess_cell(self, cell, resources, index):
        if is_test_cell(cell):
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    output["traceback"] = [f"{output.get('ename', 'Error')}: {output.get('evalue', '')}"]
        return cell, resources
