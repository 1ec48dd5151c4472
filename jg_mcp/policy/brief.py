"""The static policy (jg_mcp.policy.check) in one paragraph, as the agent is told it (goal constraints and the goal
resource)."""

from __future__ import annotations

from jg_mcp.policy.members import MODULE_MEMBERS
from jg_mcp.policy.tables import ALLOWED_MODULES


def members_text() -> str:
    """The members a solution may use of each allow-listed module, as the agent reads them."""
    listed = "; ".join(f"{m}: {', '.join(sorted(ms, key=str.lower))}" for m, ms in MODULE_MEMBERS.items())
    return (
        f"Of these modules only the listed members may be used ({listed}); functools.wraps only as `@wraps(fn)` "
        "directly on a def. math is allowed whole. triton.testing, triton.compiler, triton.backends, triton.knobs "
        "and the rest of Triton are not (do_bench belongs in the self-test below)."
    )


def policy_text(forbidden: list[str], allowed: set[str] | None = None) -> str:
    """The policy in one paragraph, as the agent is told it (goal constraints and the goal resource)."""
    mods = ", ".join(sorted((ALLOWED_MODULES | (allowed or set())) - {"__future__", "os"}))
    return (
        f"The solution file may import only {mods} (and read one named environment variable with "
        "os.environ.get('NAME'), os.getenv('NAME', default) or 'NAME' in os.environ). It may not use reflection "
        "or dynamic code "
        "(getattr with a computed name, setattr, dunder attributes such as __dict__ or __class__, "
        "exec/eval/compile, private torch APIs such as torch._C or torch.ops, frames; super().__init__ and a "
        "module's __version__, and reading __name__, __qualname__ and __doc__ are fine), threads, processes or "
        "CUDA streams, files, tensor subclasses, `match` "
        "statements or coroutines (async/await), or Triton's compiler, builds, cache, backends and configuration "
        "(triton.compile, triton.runtime.build and .cache, triton.knobs): write triton.jit kernels. Native code "
        "is refused: no torch.utils.cpp_extension (load, load_inline or any other builder), whose libraries run "
        "with the interpreter's full powers; the kernel's compiled code is Triton's, and on a GPU a solution that "
        "compiles no Triton kernel is rejected (no_kernel). Nothing of torch.utils, no "
        "TorchScript (torch.jit), torch.compiler, torch.onnx, profilers, numpy arrays (.numpy()), files mapped by "
        "from_file, torch.cuda.gds, torch.cuda.tunable, torch.serialization, torch.classes, pluggable allocators, "
        "torch.library (custom_op, triton_op and the rest: they register kernels over the library's operators), "
        "derivatives (torch.autograd.grad, .backward(), torch.func), torch.distributions, torch.ao (or its "
        "former names torch.quantization, torch.nn.quantized, torch.nn.intrinsic, torch.nn.qat), "
        "and torch.compile only without options. A forbidden "
        "API is forbidden under every spelling (alias, method, string), with its whole operator family and its "
        "namespace (torch.linalg for a matrix product, torch.nn.attention for attention). A module, or a torch or "
        "triton class, may be "
        "used only through its attributes, calls, type tests, annotations and as a base class, not bound to another "
        "name or passed around; attributes may be assigned only on self, cls or ctx, a plain function the file "
        "defines, or an instance of a plain class it defines bound once at module level, and os.environ only read; "
        "no "
        "function may be named __torch_function__ or __torch_dispatch__, and a class may define only the dunder "
        "methods of its protocol (__init__, __post_init__, __call__, __repr__, comparisons, __hash__, __len__, "
        "__iter__, __getitem__, __contains__, __bool__, __enter__/__exit__, arithmetic operators), not a finalizer "
        "(__del__) nor hooks into attribute access, copying or creation (__getattr__, __setattr__, "
        "__getattribute__, __get__/__set__, __new__, __init_subclass__, __reduce__, ...); no class is made at run "
        "time: type(x) only to compare classes (`is`, isinstance), no metaclass=, and enum classes only as the base "
        "of an enum that lists its members. " + members_text() + " A "
        "self-test that calls forbidden ops to compare against must sit "
        'inside an `if __name__ == "__main__":` block at module level, whose body is not judged for names (the eval '
        "imports the solution, so it never runs); a helper defined outside that block is judged as any code."
    )
