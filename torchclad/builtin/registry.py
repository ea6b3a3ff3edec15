"""Registry of the built-in kernels.

Every entry names a function in a file under ``csrc/kernels/``. At install time ``setup.py`` runs
the engine (:func:`torchclad.engine.differentiate`) on each entry, writes the translation units to
``torchclad/_generated/`` and compiles them, with the pybind11 glue, into ``torchclad._C``.
Entries that share a file share one translation unit.

A unit's source is its file, or, when an entry names ``sources``, those files under ``csrc/``
concatenated in order (:func:`unit_source`): ``matmul.cpp`` is followed by its custom derivative
``csrc/custom/matmul.cpp``. ``libraries`` lists what the extension must link against
(:func:`torchclad.toolchain.compiler.external_library`): ``"torch_cpu"`` for the BLAS behind matmul.

For a kernel ``f`` and a scalar suffix ``sfx`` (``f32``, ``f64``; a template gets both) the
extension has ``f_{sfx}``, ``f_pullback_{sfx}``, ``f_reverse_forw_{sfx}``,
``f_reverse_sweep_{sfx}`` and, for a non-void ``f``, ``f_grad_{sfx}``; see
:mod:`torchclad.toolchain.glue` for the calling convention.

This module is imported by ``setup.py`` from the source tree, so it must not import torch or any
part of torchclad that needs the compiled extension.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["KernelSpec", "KERNELS", "kernel_dir", "csrc_dir", "by_file", "unit_source"]


@dataclass(frozen=True)
class KernelSpec:
    """One built-in kernel: ``name`` in ``csrc/kernels/<file>``, differentiated w.r.t. ``wrt``.

    ``wrt`` follows :func:`torchclad.engine.differentiate`: ``None`` means every floating parameter.
    ``sources``: the files under ``csrc/`` whose concatenation is the unit's source, in order
    (empty: ``kernels/<file>`` alone); entries that share a file must agree on it.
    ``libraries``: external libraries the extension links against (``"torch_cpu"``).
    """

    file: str
    name: str
    wrt: tuple[str, ...] | None = None
    sources: tuple[str, ...] = ()
    libraries: tuple[str, ...] = ()

    @property
    def unit(self) -> str:
        """Name of the translation unit (and of ``_generated/<unit>.cpp``): the file's stem."""
        return Path(self.file).stem


KERNELS: tuple[KernelSpec, ...] = (
    KernelSpec(file="gelu.cpp", name="gelu_forward", wrt=("inp",)),
    # torchclad.nn modules (csrc/kernels/<file> documents each signature)
    KernelSpec(file="gelu.cpp", name="gelu_erf_forward", wrt=("inp",)),
    KernelSpec(file="matmul.cpp", name="matmul_forward", wrt=("inp", "weight", "bias"),
               sources=("kernels/matmul.cpp", "custom/matmul.cpp"), libraries=("torch_cpu",)),
    KernelSpec(file="layernorm.cpp", name="layernorm_forward", wrt=("inp", "weight", "bias")),
    KernelSpec(file="softmax.cpp", name="softmax_forward", wrt=("inp",)),
    KernelSpec(file="crossentropy.cpp", name="crossentropy_forward", wrt=("logits",)),
    KernelSpec(file="encoder.cpp", name="embedding_forward", wrt=("weight",)),
    KernelSpec(file="encoder.cpp", name="encoder_forward", wrt=("wte", "wpe")),
    KernelSpec(file="residual.cpp", name="residual_forward", wrt=("inp1", "inp2")),
    # its two products go through matmul_strided and its custom derivative (BLAS)
    KernelSpec(file="attention.cpp", name="attention_forward", wrt=("inp",),
               sources=("kernels/matmul.cpp", "custom/matmul.cpp", "kernels/attention.cpp"),
               libraries=("torch_cpu",)),
    # LLaMA-style layers (torchclad.nn.RMSNorm, SiLU, SwiGLU, RotaryEmbedding)
    KernelSpec(file="rmsnorm.cpp", name="rmsnorm_forward", wrt=("inp", "weight")),
    KernelSpec(file="silu.cpp", name="silu_forward", wrt=("inp",)),
    KernelSpec(file="silu.cpp", name="swiglu_forward", wrt=("inp",)),
    KernelSpec(file="rope.cpp", name="rope_forward", wrt=("inp",)),
    # GPT-2, the whole model forward in one function (torchclad.nn.GPT2(fused=True)): one unit of
    # the layer kernels above, matmul's custom derivative, then csrc/kernels/gpt2.cpp; the engine
    # differentiates gpt2_forward as a whole (one reverse sweep calling the layers' sweeps).
    KernelSpec(file="gpt2.cpp", name="gpt2_forward", wrt=("params",),
               sources=("kernels/encoder.cpp", "kernels/layernorm.cpp", "kernels/matmul.cpp",
                        "custom/matmul.cpp", "kernels/attention.cpp", "kernels/gelu.cpp",
                        "kernels/residual.cpp", "kernels/crossentropy.cpp", "kernels/gpt2.cpp"),
               libraries=("torch_cpu",)),
)


def kernel_dir() -> Path:
    """``csrc/kernels`` of the source tree this package was installed from (editable install)."""
    return Path(__file__).resolve().parents[2] / "csrc" / "kernels"


def csrc_dir() -> Path:
    """``csrc`` of the source tree this package was installed from."""
    return kernel_dir().parent


def unit_source(spec: KernelSpec, csrc: Path | None = None) -> str:
    """The source text of ``spec``'s translation unit.

    ``kernels/<file>``, or the files of ``spec.sources`` concatenated; each file after the first
    starts with a ``#line 1 "csrc/<path>"`` marker, so compiler messages name the right file.
    """
    root = csrc_dir() if csrc is None else Path(csrc)
    parts = spec.sources or (f"kernels/{spec.file}",)
    if len(parts) == 1:
        return (root / parts[0]).read_text()
    texts = []
    for i, rel in enumerate(parts):
        text = (root / rel).read_text()
        if i:
            text = f'#line 1 "csrc/{rel}"\n' + text
        texts.append(text if text.endswith("\n") else text + "\n")
    return "".join(texts)


def by_file(specs: tuple[KernelSpec, ...] = KERNELS) -> dict[str, list[KernelSpec]]:
    """Group specs by source file, keeping registry order (one translation unit per file)."""
    groups: dict[str, list[KernelSpec]] = {}
    for spec in specs:
        groups.setdefault(spec.file, []).append(spec)
    return groups
