"""The grader's probes, on the student's side: objects a check puts in the student's namespace by
name, made here from plain arguments. No code travels to the student's process: it runs this
package's files and its own notebook, nothing else. Each maker gets the notebook's namespace, the
current stand-ins (`standins.py`) and `ask(question, *args)`, a question to the grader mid-call.

Each probe is declared once, as a `Probe`: the name the student's code sees it by, its maker, and
the question it asks, which the check that uses it answers (`callbacks[probe.question]`).
"""
import sys
from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class Probe:
    name: str                    # in the student's namespace, and in the grader's requests
    make: Callable[..., Any]     # make(namespace, standins, ask), in the student's process
    question: str | None = None  # what its calls ask the grader (the check registers the answer)


def _placeholders(count):
    """`count` layers that compute nothing: a probe model's length, as the student's loop reads it."""
    torch = sys.modules["torch"]
    return torch.nn.ModuleList([torch.nn.Identity() for _layer in range(count)])


def grader_model(namespace, standins, ask):
    """What chapter 5's `generate` is given: a TinyLM whose every forward the grader computes and counts."""
    torch = sys.modules["torch"]

    class _GraderModel(torch.nn.Module):
        def __init__(self, num_layers):
            super().__init__()
            self.blocks = _placeholders(num_layers)

        def forward(self, tokens, caches=None):
            return ask(GRADER_MODEL.question, tokens, None if caches is None else [id(c) for c in caches])
    return _GraderModel


def kernel_by_name(namespace, standins, ask):
    """Chapter 6: the kernel of that name as the student's code sees it (a stand-in), to pass on."""
    def _grader_kernel(name):
        return namespace[name]
    return _grader_kernel


def fit_probe(namespace, standins, ask):
    """Chapter 6: the student's LearnedKernelRegression, its `forward` the reference's (a stand-in
    the grader computes), so its `fit` is judged alone."""
    if not isinstance(namespace.get("LearnedKernelRegression"), type):
        raise NameError("`LearnedKernelRegression` is not a class in your notebook (was it renamed, or did its cell fail?)")

    class _GraderFitProbe(namespace["LearnedKernelRegression"]):
        forward = standins.method_of("LearnedKernelRegression", "forward")
    return _GraderFitProbe


def llama_layer(namespace, standins, ask):
    """Chapter 8: what block_from_llama is given: a LlamaDecoderLayer's tensors and sizes, as plain data."""
    import types

    class _LlamaLayer:
        def __init__(self, state, config):
            self._state = state
            self.self_attn = types.SimpleNamespace(config=types.SimpleNamespace(**config))

        def state_dict(self):
            return dict(self._state)
    return _LlamaLayer


def grader_llama(namespace, standins, ask):
    """Chapter 9: what generate is given: a LlamaLM whose every forward the grader computes and counts."""
    torch = sys.modules["torch"]

    class _GraderLlama(torch.nn.Module):
        def __init__(self, num_layers):
            super().__init__()
            self.layers = _placeholders(num_layers)

        def forward(self, tokens, positions=None, mask=None, caches=None):
            return ask(GRADER_LLAMA.question, tokens, positions, mask, None if caches is None else [id(c) for c in caches])
    return _GraderLlama


def _config_and_state(name, doc):
    """A `transformers` model as its exercise may see it: `config` (plain attributes) and `state_dict()`."""
    import types

    def maker(namespace, standins, ask):
        class _Model:
            def __init__(self, state, config):
                self._state = state
                self.config = types.SimpleNamespace(**config)

            def state_dict(self):
                return dict(self._state)
        _Model.__name__ = _Model.__qualname__ = name
        _Model.__doc__ = doc
        return _Model
    maker.__doc__ = doc
    return maker


GRADER_MODEL = Probe("_GraderModel", grader_model, question="tinylm")
GRADER_KERNEL = Probe("_grader_kernel", kernel_by_name)
FIT_PROBE = Probe("_GraderFitProbe", fit_probe)
LLAMA_LAYER = Probe("_LlamaLayer", llama_layer)
LLAMA_FOR_CAUSAL_LM = Probe("_LlamaForCausalLM", _config_and_state(
    "_LlamaForCausalLM", "Chapter 9: what lm_from_llama is given: a LlamaForCausalLM's tensors and sizes, as plain data."))
GRADER_LLAMA = Probe("_GraderLlama", grader_llama, question="llamalm")
MARIAN_MT_MODEL = Probe("_MarianMTModel", _config_and_state(
    "_MarianMTModel", "Chapter 10: what transformer_from_marian is given: a MarianMTModel's tensors and sizes, "
    "as plain data."))
VIT_MODEL = Probe("_ViTModel", _config_and_state(
    "_ViTModel", "Chapter 10: what vit_encoder_from_hf is given: a ViTModel's tensors and sizes, as plain data."))
PROBES = {probe.name: probe for probe in (GRADER_MODEL, GRADER_KERNEL, FIT_PROBE, LLAMA_LAYER, LLAMA_FOR_CAUSAL_LM,
                                          GRADER_LLAMA, MARIAN_MT_MODEL, VIT_MODEL)}
