"""Write autograder/stated/known_answers.py: the known answers of the stated rules that need one.

A stated rule ships to students (autograder/stated/), so it holds no implementation of an exercise
(issue 36): where a rule compares a value with the text's formula and no property says it, it
compares it with a *known answer*, the reference solution's output on inputs fixed here, stored
as data. The inputs are the rule's own, stated in its text (a rule's inputs are no secret:
`check` shows them); the hidden checks use others, so the stored outputs earn nothing there.
The file is Python (a Gradescope zip carries the package's .py files only): arrays as base64 of
.npy bytes, read back by `known_answers.array`.

    .venv/bin/python tests/make_known_answers.py          # writes the file
    .venv/bin/python tests/make_known_answers.py --check  # exit 1 when it is not what it would write

tests/test_no_answers.py checks that the file is up to date with the reference solutions.
"""
import base64
import io
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
TARGET = REPO / "autograder" / "stated" / "known_answers.py"

# sinusoidal_positions(4096, 8): the rows checked, the last 512 positions (where float32 angles are
# off the most) and every 16th before them
SINUSOIDAL_N, SINUSOIDAL_DIM = 4096, 8
SINUSOIDAL_ROWS = np.concatenate([np.arange(0, SINUSOIDAL_N - 512, 16), np.arange(SINUSOIDAL_N - 512, SINUSOIDAL_N)])

HEADER = '''"""Known answers of the stated rules: the reference solutions' outputs on the rules' own inputs,
stored as data. Written by tests/make_known_answers.py; never edit by hand."""
import base64
import io

import numpy as np


def array(text):
    """The array stored as base64 of .npy bytes."""
    return np.load(io.BytesIO(base64.b64decode(text)), allow_pickle=False)


'''


def encoded(a):
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(a), allow_pickle=False)
    text = base64.b64encode(buffer.getvalue()).decode("ascii")
    lines = [text[i:i + 100] for i in range(0, len(text), 100)]
    return "(\n" + "\n".join(f'    "{line}"' for line in lines) + "\n)"


def contents():
    import torch
    from autograder import reference
    ch08 = reference.load("08-transformer")
    values = ch08.sinusoidal_positions(SINUSOIDAL_N, SINUSOIDAL_DIM).to(torch.float64).numpy()[SINUSOIDAL_ROWS]
    return (HEADER
            + "# sinusoidal_positions(SINUSOIDAL_N, SINUSOIDAL_DIM) at the rows SINUSOIDAL_ROWS, float64\n"
            + f"SINUSOIDAL_N, SINUSOIDAL_DIM = {SINUSOIDAL_N}, {SINUSOIDAL_DIM}\n"
            + f"SINUSOIDAL_ROWS = {encoded(SINUSOIDAL_ROWS.astype(np.int64))}\n"
            + f"SINUSOIDAL_VALUES = {encoded(values)}\n")


if __name__ == "__main__":
    text = contents()
    if "--check" in sys.argv[1:]:
        sys.exit(0 if TARGET.exists() and TARGET.read_text() == text else 1)
    TARGET.write_text(text)
    print(f"wrote {TARGET.relative_to(REPO)} ({len(text):,} characters)")
