"""The node's CPU as the process that trains sees it (/proc/cpuinfo), read at run time: the
paper ran on "Intel Core Processor @ 2.2 GHz" (section IV-A), and which kernels a framework
dispatches to depends on the instruction sets here (TensorFlow >= 2.9 turns oneDNN on by
itself on CPUs with AVX-512 VNNI or BF16, for one). Standard library, Python 3.6.
"""

# the instruction sets that decide kernels, as the kernel names them, and as shown
KERNEL_FLAGS = (("avx2", "AVX2"), ("avx512f", "AVX-512F"), ("avx512_vnni", "AVX-512 VNNI"),
                ("avx512_bf16", "AVX-512 BF16"), ("amx_tile", "AMX"))


def describe(path="/proc/cpuinfo"):
    """{model, isa, mhz, threads_per_core, hypervisor}, or {} where it cannot be read: the
    figure is then missing, never the cell's result."""
    try:
        with open(path) as handle:
            first = handle.read().split("\n\n")[0]
    except (IOError, OSError):
        return {}
    fields = {}
    for line in first.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    flags = set(fields.get("flags", "").split())
    out = {"model": fields.get("model name", ""),
           "isa": [shown for name, shown in KERNEL_FLAGS if name in flags],
           "hypervisor": "hypervisor" in flags}
    try:
        out["mhz"] = round(float(fields["cpu MHz"]))
    except (KeyError, ValueError):
        out["mhz"] = None
    try:
        out["threads_per_core"] = int(fields["siblings"]) // int(fields["cpu cores"])
    except (KeyError, ValueError, ZeroDivisionError):
        out["threads_per_core"] = None
    return out

